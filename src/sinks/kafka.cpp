// The `kafka` sink (librdkafka): see docs/design.md §6 and docs/sinks.md.
//
// One idempotent producer (enable.idempotence, acks=all, enable.gapless.guarantee) per sink
// object, kept across pages and recreated after a fatal error. Each message is one record on
// its routed topic ("topic", default "statesman.{root}") with key = the record's address (so
// one address stays in one partition, in revision order) and the headers messageId,
// globalPosition and epoch; the value is the message (or its CloudEvents form). A page counts
// only when the delivery report of every one of its records says it was written: Start
// produces the page, Finish serves delivery reports (rd_kafka_poll) until all are in, the
// Budget's deadline passes, or the budget is cancelled (seen within 100 ms).
//
// The "properties" option passes librdkafka settings through, except those that would break
// these guarantees or let an outbox run code in the server (refused at create_outbox).
// librdkafka's own log lines are dropped (they would land in the server's log on stderr);
// what matters reaches the page's error: the delivery error, or the last error the producer
// reported (error_cb). Secrets (sasl.password, ssl.key.password, …) are redacted from both.
//
// A page of more than kThreadedPage records is produced on a thread of the sink's own,
// started with its first such page and ended with the sink: Start hands the page over and
// returns, so that the dispatcher reads its next page meanwhile; the thread then serves the
// page's delivery reports, and Finish waits until it is done (and serves what may be left).
// Not thread-safe otherwise: a KafkaSink is used by one thread at a time, the dispatcher's,
// except that between Start and Finish (or Forget) only the producing thread touches it, and
// that thread never calls the dispatcher's `cancelled` (Finish does, and stops the page when it
// says so). librdkafka's own threads call only the log callback, which does nothing; the
// delivery report and error callbacks run inside rd_kafka_poll, on whichever of the two
// threads polls.
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "statesman/error.hpp"
#include "statesman/sinks/format.hpp"
#include "statesman/sinks/io.hpp"
#include "statesman/sinks/routing.hpp"

namespace statesman::sink {
namespace {

constexpr const char *kSink = "kafka";

[[noreturn]] void Invalid(const std::string &message, std::string hint = {}) {
  throw Error(sqlstate::kInvalidParameterValue, std::string("sink \"kafka\": ") + message, std::move(hint));
}

// A librdkafka setting whose value is a secret: never shown in an error or a log line.
bool SecretProperty(const std::string &key) {
  return key.find("password") != std::string::npos || key.find("secret") != std::string::npos ||
         key == "sasl.oauthbearer.config" || key == "ssl.key.pem";
}

// A property value as librdkafka takes it (a string), from a JSON string, number or boolean.
std::string PropertyText(const std::string &key, const nlohmann::json &v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return v.dump();
  Invalid("property \"" + key + "\" must be a string, a number or a boolean");
}

// The properties the sink sets itself, or that would break its guarantees, and why.
// Checked by name (and librdkafka's aliases), before librdkafka sees them.
void RefuseProperty(const std::string &key, const std::string &value) {
  auto refuse = [&](const std::string &rule) { Invalid("property \"" + key + "\" " + rule); };
  if (key == "bootstrap.servers" || key == "metadata.broker.list")
    refuse("cannot be set: give the brokers in the option \"brokers\"");
  if (key == "acks" || key == "request.required.acks") {
    if (value != "all" && value != "-1")
      refuse("must be \"all\" (or -1): a record counts as delivered only when every in-sync replica has it");
  }
  if (key == "enable.idempotence" && value != "true")
    refuse("must be true: the producer is idempotent, so that its retries never write a record twice or out of order");
  if (key == "enable.gapless.guarantee" && value != "true")
    refuse("must be true: a failed batch must stop the producer rather than leave a gap before later records");
  if (key == "max.in.flight.requests.per.connection" || key == "max.in.flight") {
    char *end = nullptr;
    long n = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || n < 1 || n > 5)
      refuse("must be between 1 and 5: the idempotent producer keeps order only with at most 5 requests in flight");
  }
  if (key == "transactional.id")
    refuse("cannot be set: the sink does not use transactions (see docs/sinks.md, \"Exactly once?\")");
  // Settings that load code into the server process or run a command there.
  if (key == "plugin.library.paths" || key == "ssl.engine.location" || key == "sasl.kerberos.kinit.cmd")
    refuse("cannot be set: it would load code into the server or run a command there");
}

// The librdkafka configuration a producer of these options is made with, checked by
// rd_kafka_conf_set. Throws Error 22023 naming the property librdkafka refuses (its value
// redacted when secret).
struct ConfFree {
  void operator()(rd_kafka_conf_t *c) const { rd_kafka_conf_destroy(c); }
};
using Conf = std::unique_ptr<rd_kafka_conf_t, ConfFree>;

// What the sink sets unless the options' properties say otherwise, then what it always sets.
std::vector<std::pair<std::string, std::string>> Settings(const nlohmann::json &o) {
  std::vector<std::pair<std::string, std::string>> s;
  int64_t timeout = o.value("timeout_ms", kDefaultTimeoutMillis);
  // Records not written within about one call are given up by librdkafka too, so a failed
  // page's records do not pile up behind the retry (linger.ms must stay below it).
  s.emplace_back("message.timeout.ms", std::to_string(std::max<int64_t>(timeout, 100)));
  // A topic the cluster says it does not have fails its records within the call (librdkafka
  // waits 30 s by default, for a topic just created to propagate): the page fails naming it.
  s.emplace_back("topic.metadata.propagation.max.ms", std::to_string(std::max<int64_t>(timeout / 2, 100)));
  // The whole page is produced at once and then waited for: lingering longer only delays it.
  s.emplace_back("linger.ms", "1");
  // Java's partitioner, so that a key lands in the partition a Java producer would pick.
  s.emplace_back("partitioner", "murmur2_random");
  s.emplace_back("client.id", "statesman");
  if (auto p = o.find("properties"); p != o.end() && p->is_object())
    for (auto it = p->begin(); it != p->end(); ++it) s.emplace_back(it.key(), it->get<std::string>());
  s.emplace_back("bootstrap.servers", o.value("brokers", ""));
  s.emplace_back("enable.idempotence", "true");
  s.emplace_back("acks", "all");
  s.emplace_back("enable.gapless.guarantee", "true");
  return s;
}

Conf MakeConf(const nlohmann::json &o) {
  Conf conf(rd_kafka_conf_new());
  char errstr[512];
  for (const auto &[key, value] : Settings(o)) {
    if (rd_kafka_conf_set(conf.get(), key.c_str(), value.c_str(), errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
      std::string why = errstr;
      if (SecretProperty(key)) why = Redact(why, value);
      Invalid("property \"" + key + "\" is refused by librdkafka: " + why);
    }
  }
  return conf;
}

std::string CheckOptions(const std::string &options_json) {
  nlohmann::json o = ParseOptions(kSink, options_json, {"brokers", "topic", "properties", "timeout_ms", "format"});
  nlohmann::json out = nlohmann::json::object();
  std::optional<std::string> brokers = StringOption(kSink, o, "brokers");
  if (!brokers) Invalid("option \"brokers\" is required", "Give the bootstrap brokers as \"host:port,host:port\".");
  out["brokers"] = *brokers;
  out["topic"] = Route::Parse(StringOption(kSink, o, "topic").value_or("statesman.{root}"), "topic", kSink).Pattern();
  if (auto it = o.find("properties"); it != o.end() && !it->is_null()) {
    if (!it->is_object()) Invalid("option \"properties\" must be a JSON object of librdkafka settings");
    nlohmann::json props = nlohmann::json::object();
    for (auto p = it->begin(); p != it->end(); ++p) {
      std::string value = PropertyText(p.key(), p.value());
      RefuseProperty(p.key(), value);
      props[p.key()] = value;
    }
    if (!props.empty()) out["properties"] = props;
  }
  if (auto t = IntOption(kSink, o, "timeout_ms", 1, 3600000)) out["timeout_ms"] = *t;
  out["format"] = FormatName(ParseFormat(StringOption(kSink, o, "format").value_or("statesman"), kSink));
  MakeConf(out);  // what librdkafka refuses (an unknown property, a bad value) is refused now
  return out.dump();
}

struct ProducerFree {
  void operator()(rd_kafka_t *rk) const {
    // Queued records are dropped; those in flight are waited for no longer than librdkafka's
    // shutdown takes (their delivery reports are never read: the page they belonged to failed).
    rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT | RD_KAFKA_PURGE_F_NON_BLOCKING);
    rd_kafka_destroy(rk);
  }
};
using Producer = std::unique_ptr<rd_kafka_t, ProducerFree>;

struct TopicFree {
  void operator()(rd_kafka_topic_t *t) const { rd_kafka_topic_destroy(t); }
};
using Topic = std::unique_ptr<rd_kafka_topic_t, TopicFree>;

// The epoch of a message (its "epoch" string), found in the JSON text without parsing it: the
// feed's messages are jsonb text, whose top-level "epoch" comes before any nested object. Falls
// back to a parse for other text.
std::string_view Epoch(const std::string &json, std::string &scratch) {
  static constexpr std::string_view kKey = "\"epoch\": \"";
  size_t at = json.find(kKey);
  if (at != std::string::npos) {
    size_t start = at + kKey.size();
    size_t end = json.find('"', start);
    if (end != std::string::npos && end - start == 36) return std::string_view(json).substr(start, 36);
  }
  nlohmann::json m = nlohmann::json::parse(json, nullptr, false);
  scratch = m.is_object() && m.contains("epoch") && m["epoch"].is_string() ? m["epoch"].get<std::string>() : "";
  return scratch;
}

// The address in a messageId "{store}/{address}#{revision}".
std::string_view Address(const std::string &id) {
  size_t slash = id.find('/');
  size_t hash = id.rfind('#');
  if (slash == std::string::npos || hash == std::string::npos || hash <= slash) return id;
  return std::string_view(id).substr(slash + 1, hash - slash - 1);
}

class KafkaSink : public Sink {
 public:
  explicit KafkaSink(const std::string &options_json)
      : options_(nlohmann::json::parse(options_json)),
        route_(Route::Parse(options_.value("topic", "statesman.{root}"), "topic", kSink)),
        format_(ParseFormat(options_.value("format", "statesman"), kSink)) {
    prefix_ = "kafka sink " + options_.value("brokers", "") + ": ";
    if (auto p = options_.find("properties"); p != options_.end() && p->is_object())
      for (auto it = p->begin(); it != p->end(); ++it)
        if (SecretProperty(it.key()) && it->is_string()) secrets_.push_back(it->get<std::string>());
  }
  ~KafkaSink() override {
    GiveUpPage();
    if (producing_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(produced_mu_);
        exit_ = true;
      }
      produced_cv_.notify_all();
      producing_.join();
    }
    topics_.clear();  // before the producer they belong to
  }

  Outcome Publish(const std::vector<Message> &page, const Budget &budget) override {
    Start(page, budget);
    return Finish();
  }
  void Start(const std::vector<Message> &page, const Budget &budget) override;
  Outcome Finish() override;
  void Forget() noexcept override { GiveUpPage(); }

  // Pages of more records than this are produced on a thread (Start returns at once).
  static constexpr size_t kThreadedPage = 64;

 private:
  struct Page;
  void Connect();
  void Drop();
  bool NoteFatal();
  rd_kafka_topic_t *TopicFor(const std::string &name);
  void ProducePage() noexcept;
  void ProducingThread() noexcept;
  void Produce(const Message &m, uint32_t index);
  bool Serve(int ms, bool on_producing_thread = false);
  void AwaitProduced() noexcept;
  bool AwaitReports(bool on_producing_thread);
  void GiveUpPage() noexcept;
  std::string Outstanding() const;
  std::string Describe(std::string what) const {
    for (const std::string &s : secrets_) what = Redact(std::move(what), s);
    return prefix_ + what;
  }
  // Called by librdkafka (C frames, from rd_kafka_poll): nothing may be thrown out of them, so
  // they build their texts under a catch-all and leave them empty when they cannot.
  static void OnDelivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) noexcept;
  static void OnError(rd_kafka_t *rk, int err, const char *reason, void *opaque) noexcept;
  static void OnLog(const rd_kafka_t *, int, const char *, const char *) {}

  nlohmann::json options_;
  Route route_;
  Format format_;
  std::string prefix_;  // "kafka sink host:port,…: "
  std::vector<std::string> secrets_;
  Producer producer_;
  std::unordered_map<std::string, Topic> topics_;
  std::string last_error_;  // the producer's last error (error_cb), for a page that times out
  bool fatal_ = false;      // the producer hit a fatal error: a new one for the next page

  // Between Start and Finish. Delivery reports carry (generation << 32 | index): reports of
  // records of an earlier, abandoned page are not counted.
  const std::vector<Message> *page_ = nullptr;
  Budget budget_;
  int64_t limit_ms_ = 0;
  uint64_t generation_ = 0;
  size_t outstanding_ = 0;          // records of this page without their delivery report
  std::vector<bool> reported_;      // per record of the page
  std::vector<uint32_t> topic_of_;  // per record: index into topic_names_
  std::vector<std::string> topic_names_;
  size_t failed_ = 0;
  std::string first_error_;
  std::string start_error_;
  std::string value_;  // scratch

  // The thread that produces large pages (ProducingThread). Under produced_mu_: Start sets
  // to_produce_, the thread clears it, produces the page and sets produced_; exit_ ends it.
  // stop_producing_ tells it to give up the page (a cancel, Forget).
  std::thread producing_;
  std::mutex produced_mu_;
  std::condition_variable produced_cv_;
  bool to_produce_ = false;
  bool produced_ = false;
  bool exit_ = false;
  bool threaded_ = false;  // the started page is the thread's (written by the dispatcher's thread only)
  std::atomic<bool> stop_producing_{false};
};

void KafkaSink::Connect() {
  Conf conf = MakeConf(options_);
  rd_kafka_conf_set_dr_msg_cb(conf.get(), OnDelivery);
  rd_kafka_conf_set_error_cb(conf.get(), OnError);
  rd_kafka_conf_set_log_cb(conf.get(), OnLog);
  rd_kafka_conf_set_opaque(conf.get(), this);
  char errstr[512];
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), errstr, sizeof(errstr));
  if (rk == nullptr) throw std::runtime_error(std::string("cannot create the producer: ") + errstr);
  conf.release();  // rd_kafka_new owns it now
  producer_.reset(rk);
  fatal_ = false;
  last_error_.clear();
}

void KafkaSink::Drop() {
  topics_.clear();
  producer_.reset();
}

rd_kafka_topic_t *KafkaSink::TopicFor(const std::string &name) {
  auto it = topics_.find(name);
  if (it != topics_.end()) return it->second.get();
  rd_kafka_topic_t *t = rd_kafka_topic_new(producer_.get(), name.c_str(), nullptr);
  if (t == nullptr) throw std::runtime_error("topic \"" + name + "\": " + rd_kafka_err2str(rd_kafka_last_error()));
  topics_.emplace(name, Topic(t));
  return t;
}

void KafkaSink::OnDelivery(rd_kafka_t *, const rd_kafka_message_t *m, void *opaque) noexcept {
  KafkaSink *self = static_cast<KafkaSink *>(opaque);
  uint64_t tag = reinterpret_cast<uintptr_t>(m->_private);
  if ((tag >> 32) != (self->generation_ & 0xffffffffu) || self->page_ == nullptr) return;
  size_t index = tag & 0xffffffffu;
  if (index >= self->reported_.size() || self->reported_[index]) return;
  self->reported_[index] = true;
  --self->outstanding_;
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) return;
  if (self->failed_++ > 0) return;
  try {
    const Message &msg = (*self->page_)[index];
    std::string topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "?";
    std::string why = rd_kafka_err2str(m->err);
    if (m->err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC || m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
      why = "the topic does not exist (" + why + ")";
    else if (m->err == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT && !self->last_error_.empty())
      why += "; last producer error: " + self->last_error_;
    self->first_error_ = "topic \"" + topic + "\": position " + std::to_string(msg.position) + " (messageId \"" +
                         msg.id + "\") was not delivered: " + why;
  } catch (...) {
    self->first_error_.clear();
  }
}

// Whether the producer has hit a fatal error (an idempotence or gapless-guarantee violation):
// it produces nothing more, and the next page gets a new one. Notes the error for the page.
bool KafkaSink::NoteFatal() {
  char why[512];
  rd_kafka_resp_err_t orig = rd_kafka_fatal_error(producer_.get(), why, sizeof(why));
  if (orig == RD_KAFKA_RESP_ERR_NO_ERROR) return false;
  fatal_ = true;
  last_error_ = std::string("fatal error (") + rd_kafka_err2name(orig) + "): " + why;
  return true;
}

void KafkaSink::OnError(rd_kafka_t *rk, int err, const char *reason, void *opaque) noexcept {
  KafkaSink *self = static_cast<KafkaSink *>(opaque);
  try {
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
      self->NoteFatal();
    } else {
      self->last_error_ = reason ? reason : rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err));
    }
  } catch (...) {
    self->last_error_.clear();
  }
}

void KafkaSink::Produce(const Message &m, uint32_t index) {
  std::string name = route_.For(m);
  auto found = std::find(topic_names_.begin(), topic_names_.end(), name);
  topic_of_[index] = static_cast<uint32_t>(found - topic_names_.begin());
  if (found == topic_names_.end()) topic_names_.push_back(name);
  rd_kafka_topic_t *topic = TopicFor(name);

  std::string scratch;
  std::string_view epoch = Epoch(m.json, scratch);
  std::string_view key = Address(m.id);
  char position[24];
  size_t position_len =
      static_cast<size_t>(std::snprintf(position, sizeof(position), "%lld", static_cast<long long>(m.position)));
  const std::string *value = &m.json;
  if (format_ != Format::kStatesman) {
    value_ = Render(format_, m);
    value = &value_;
  }
  void *tag = reinterpret_cast<void *>(static_cast<uintptr_t>(((generation_ & 0xffffffffu) << 32) | index));
  for (;;) {
    rd_kafka_resp_err_t err = rd_kafka_producev(
        producer_.get(), RD_KAFKA_V_RKT(topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_KEY(key.data(), key.size()), RD_KAFKA_V_VALUE(const_cast<char *>(value->data()), value->size()),
        RD_KAFKA_V_HEADER("messageId", m.id.data(), static_cast<ssize_t>(m.id.size())),
        RD_KAFKA_V_HEADER("globalPosition", position, static_cast<ssize_t>(position_len)),
        RD_KAFKA_V_HEADER("epoch", epoch.data(), static_cast<ssize_t>(epoch.size())), RD_KAFKA_V_OPAQUE(tag),
        RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return;
    if (err == RD_KAFKA_RESP_ERR__FATAL) NoteFatal();
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
      throw std::runtime_error("topic \"" + name + "\": position " + std::to_string(m.position) +
                               " cannot be produced: " +
                               (err == RD_KAFKA_RESP_ERR__FATAL ? "the producer failed: " + last_error_
                                : err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC
                                    ? "the topic does not exist (" + std::string(rd_kafka_err2str(err)) + ")"
                                    : std::string(rd_kafka_err2str(err))));
    // The producer's queue is full: serve delivery reports until it has room.
    if (!Serve(10, threaded_))
      throw std::runtime_error(stop_producing_.load() ? std::string("stopped while producing")
                                                      : "timed out after " + std::to_string(limit_ms_) +
                                                            " ms while producing (the producer's queue is full)");
  }
}

// Serves delivery reports and errors for up to `ms` (at most Budget::kCancelCheck); false when
// the budget's deadline has passed or it is cancelled. On the producing thread the budget's
// `cancelled` (the dispatcher's) is not called: Finish calls it and sets stop_producing_.
bool KafkaSink::Serve(int ms, bool on_producing_thread) {
  if (on_producing_thread ? stop_producing_.load() : budget_.cancelled && budget_.cancelled()) return false;
  auto now = Clock::now();
  if (now >= budget_.deadline) return false;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(budget_.deadline - now).count();
  int slice = static_cast<int>(std::min<int64_t>({left, static_cast<int64_t>(ms), Budget::kCancelCheck.count()}));
  rd_kafka_poll(producer_.get(), std::max(slice, 0));
  return true;
}

// The topics of the records still without a delivery report, for an error.
std::string KafkaSink::Outstanding() const {
  std::set<uint32_t> topics;
  for (size_t i = 0; i < reported_.size() && topics.size() < 4; ++i)
    if (!reported_[i]) topics.insert(topic_of_[i]);
  std::string out;
  size_t shown = 0;
  for (uint32_t t : topics) {
    if (shown++ == 3) {
      out += ", …";
      break;
    }
    out += (out.empty() ? "topic \"" : ", \"") + topic_names_[t] + "\"";
  }
  return out;
}

void KafkaSink::Start(const std::vector<Message> &page, const Budget &budget) {
  // A page started and never finished: its reports no longer count.
  GiveUpPage();
  stop_producing_ = false;
  ++generation_;
  page_ = &page;
  budget_ = budget;
  limit_ms_ =
      std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(budget_.deadline - Clock::now()).count());
  start_error_.clear();
  first_error_.clear();
  failed_ = 0;
  topic_names_.clear();
  reported_.assign(page.size(), false);
  topic_of_.assign(page.size(), 0);
  outstanding_ = 0;
  if (page.empty()) return;
  try {
    if (producer_ && (fatal_ || NoteFatal())) Drop();
    if (!producer_) Connect();
  } catch (const std::exception &e) {  // std::runtime_error, Error from MakeConf, std::bad_alloc
    start_error_ = e.what();
    if (start_error_.empty()) start_error_ = "failed";
    return;
  }
  if (page.size() > kThreadedPage) {
    try {
      if (!producing_.joinable()) {
        SignalsBlocked blocked;  // the server's signal handlers stay on the dispatcher's thread
        producing_ = std::thread([this] { ProducingThread(); });
      }
      threaded_ = true;
      {
        std::lock_guard<std::mutex> lock(produced_mu_);
        to_produce_ = true;
        produced_ = false;
      }
      produced_cv_.notify_all();
      return;
    } catch (...) {  // std::system_error: no thread, so produce here
      threaded_ = false;
    }
  }
  ProducePage();
}

// The producing thread: one started page after another, until the sink ends.
void KafkaSink::ProducingThread() noexcept {
  pthread_setname_np(pthread_self(), "statesman kafka");  // as top -H and /proc/…/task/…/comm show it
  std::unique_lock<std::mutex> lock(produced_mu_);
  for (;;) {
    produced_cv_.wait(lock, [this] { return to_produce_ || exit_; });
    if (exit_) return;
    to_produce_ = false;
    lock.unlock();
    ProducePage();
    try {
      if (start_error_.empty()) AwaitReports(true);
    } catch (...) {  // no memory for a fatal error's text: Finish serves what is left
    }
    lock.lock();
    produced_ = true;
    produced_cv_.notify_all();
  }
}

// Produces the started page, on the producing thread (threaded_) or the caller's. Nothing is
// thrown out of it: a thread's exception would end the server process.
void KafkaSink::ProducePage() noexcept {
  const std::vector<Message> &page = *page_;
  try {
    for (size_t i = 0; i < page.size(); ++i) {
      if (stop_producing_.load(std::memory_order_relaxed)) throw std::runtime_error("stopped while producing");
      Produce(page[i], static_cast<uint32_t>(i));
      ++outstanding_;
    }
    rd_kafka_poll(producer_.get(), 0);
  } catch (const std::exception &e) {  // std::runtime_error, std::bad_alloc, nlohmann's
    try {
      start_error_ = e.what();
    } catch (...) {  // no memory for the text: "failed" below (short enough to need none)
    }
    if (start_error_.empty()) start_error_ = "failed";
  } catch (...) {
    start_error_ = "failed";
  }
}

// Serves the started page's delivery reports until every one is in, one says its record failed,
// the producer hits a fatal error, or Serve gives up (the deadline, a cancel, a stopped page):
// false then. The producing thread calls it after producing its page, so that each record is
// freed on the thread that allocated it; Finish calls it again for what may be left.
bool KafkaSink::AwaitReports(bool on_producing_thread) {
  while (outstanding_ > 0 && failed_ == 0 && !fatal_ && !NoteFatal())
    if (!Serve(static_cast<int>(Budget::kCancelCheck.count()), on_producing_thread)) return false;
  return true;
}

// Waits for the producing thread to finish the started page (if it is the thread's), checking
// the budget's `cancelled` every kCancelCheck and stopping the page when it says so.
void KafkaSink::AwaitProduced() noexcept {
  if (!threaded_) return;
  {
    std::unique_lock<std::mutex> lock(produced_mu_);
    while (!produced_cv_.wait_for(lock, Budget::kCancelCheck, [this] { return produced_; }))
      if (budget_.cancelled && budget_.cancelled()) stop_producing_ = true;
  }
  threaded_ = false;
}

// The started page will not be finished (the dispatcher failed in between, a new page starts,
// the sink ends): the producing thread gives it up, so that nothing reads it any more.
void KafkaSink::GiveUpPage() noexcept {
  if (!threaded_) return;
  stop_producing_ = true;
  AwaitProduced();
}

Outcome KafkaSink::Finish() {
  Outcome out;
  const std::vector<Message> *pending = page_;
  if (pending == nullptr) {
    out.error = Describe("Finish without Start");
    return out;
  }
  const std::vector<Message> &page = *pending;
  AwaitProduced();
  auto done = [&] {
    page_ = nullptr;
    ++generation_;  // late reports of this page are not counted again
  };
  if (!start_error_.empty()) {
    done();
    out.error = Describe(start_error_);
    return out;
  }
  bool cancelled = !AwaitReports(false) && budget_.cancelled && budget_.cancelled();
  if (outstanding_ == 0 && failed_ == 0 && !fatal_) {
    done();
    out.ok = true;
    out.published = static_cast<int64_t>(page.size());
    return out;
  }
  std::string error;
  if (failed_ > 0) {
    error = (first_error_.empty() ? std::string("a record was not delivered (the error could not be described)")
                                  : first_error_) +
            (failed_ > 1
                 ? " (and " + std::to_string(failed_ - 1) + " more of the " + std::to_string(page.size()) + " records)"
                 : std::string());
  } else if (fatal_) {
    error = "the producer failed (" + std::to_string(outstanding_) + " of " + std::to_string(page.size()) +
            " delivery reports outstanding, " + Outstanding() + "): " + last_error_;
  } else {
    std::string waiting = std::to_string(outstanding_) + " of " + std::to_string(page.size()) +
                          " delivery reports outstanding, " + Outstanding();
    error = (cancelled ? "cancelled while waiting for delivery reports (" + waiting + ")"
                       : "timed out after " + std::to_string(limit_ms_) + " ms waiting for delivery reports (" +
                             waiting + ")") +
            (last_error_.empty() ? std::string() : "; last producer error: " + last_error_);
  }
  // The producer stays (its queued records expire by message.timeout.ms), unless it hit a fatal
  // error: then the next page gets a new one.
  if (fatal_ || NoteFatal()) Drop();
  done();
  out.error = Describe(error);
  return out;
}

std::unique_ptr<Sink> Open(const std::string &options_json) { return std::make_unique<KafkaSink>(options_json); }

}  // namespace

extern const SinkType kKafkaSink;
const SinkType kKafkaSink = {"kafka", false, CheckOptions, Open, nullptr};

}  // namespace statesman::sink
