// The `redis` sink (Redis Streams, hiredis): see docs/design.md §6 and docs/sinks.md.
//
// One XADD {key_prefix}:{stream} [MAXLEN ~ n] {globalPosition}-0 messageId <id> message <json>
// per message, the whole page pipelined on one persistent connection. `stream` may route by
// root ({root}, {partition}, {store}: each message to its own stream, see routing.hpp); each
// stream then holds ascending ids of its own messages, and the duplicate check below is made
// in the stream the message was routed to. "format": "cloudevents" sends the message as a
// CloudEvent (format.hpp) in the `message` field. Redis refuses an id that
// is not above the stream's top entry; for those the sink reads the entry at that id (XRANGE)
// and compares its messageId: the same message counts as deduplicated, anything else fails the
// page. The page is accepted only when every message is in the stream.
//
// All I/O goes through hiredis's non-blocking context and WaitSocket, so no call waits past
// the Budget's deadline and a cancel is seen within 100 ms.
// hiredis's blocking calls are never used. Host names are resolved by getaddrinfo, which has
// no timeout of its own: use an address or a name from /etc/hosts where DNS may hang.
//
// Not thread-safe: a RedisSink is used by one thread at a time (its dispatcher). Writing to a
// socket the server closed raises SIGPIPE, which PostgreSQL's processes ignore.
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include "statesman/error.hpp"
#include "statesman/sinks/format.hpp"
#include "statesman/sinks/io.hpp"
#include "statesman/sinks/routing.hpp"

namespace statesman::sink {
namespace {

std::string CheckOptions(const std::string &options_json) {
  nlohmann::json o =
      ParseOptions("redis", options_json,
                   {"host", "port", "db", "password", "key_prefix", "stream", "max_length", "timeout_ms", "format"});
  nlohmann::json out = nlohmann::json::object();
  out["host"] = StringOption("redis", o, "host").value_or("127.0.0.1");
  out["port"] = IntOption("redis", o, "port", 1, 65535).value_or(6379);
  out["db"] = IntOption("redis", o, "db", 0, 1000000).value_or(0);
  // A null password is refused rather than read as "no password": a password that a template
  // or a function left NULL would otherwise log in without one, where the server allows it.
  if (auto p = SecretOption("redis", o, "password", "Leave the option out for a server without a password."))
    out["password"] = *p;
  out["key_prefix"] = StringOption("redis", o, "key_prefix").value_or("statesman");
  out["stream"] =
      Route::Parse(StringOption("redis", o, "stream").value_or("state-change"), "stream", "redis").Pattern();
  if (auto m = IntOption("redis", o, "max_length", 1, INT64_MAX)) out["max_length"] = *m;
  // Without timeout_ms, the dispatcher gives each call 5 s, or half the lease when that is less.
  if (auto t = IntOption("redis", o, "timeout_ms", 1, 3600000)) out["timeout_ms"] = *t;
  if (auto it = o.find("format"); it != o.end() && !it->is_null() && !it->is_string())
    throw Error(sqlstate::kInvalidParameterValue, "sink \"redis\": option \"format\" must be a string");
  out["format"] = FormatName(ParseFormat(StringOption("redis", o, "format").value_or("statesman"), "redis"));
  return out.dump();
}

// The reply Redis gives an XADD whose id is not above the stream's top entry.
constexpr std::string_view kNotAboveTop =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";

struct ContextFree {
  void operator()(redisContext *c) const { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply *r) const { freeReplyObject(r); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;
using Reply = std::unique_ptr<redisReply, ReplyFree>;

// A failure after which the connection is in an unknown state (I/O error, timeout, cancel,
// a refused handshake): Publish drops the connection, the next call reconnects.
class ConnectionLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "<position>-0", the stream id of a message, into `buf`; returns its length.
size_t StreamId(int64_t position, char (&buf)[32]) {
  char *end = std::to_chars(buf, buf + sizeof(buf) - 2, position).ptr;
  end[0] = '-';
  end[1] = '0';
  return static_cast<size_t>(end + 2 - buf);
}

std::string_view Text(const redisReply *r) { return r->str ? std::string_view(r->str, r->len) : std::string_view(); }

class RedisSink : public Sink {
 public:
  explicit RedisSink(const std::string &options_json) {
    nlohmann::json o = nlohmann::json::parse(options_json);
    host_ = o.value("host", "127.0.0.1");
    port_ = o.value("port", 6379);
    db_ = o.value("db", int64_t{0});
    password_ = o.value("password", "");
    key_prefix_ = o.value("key_prefix", "statesman") + ":";
    route_ = Route::Parse(o.value("stream", "state-change"), "stream", "redis");
    key_ = key_prefix_ + route_.Pattern();
    format_ = ParseFormat(o.value("format", "statesman"), "redis");
    if (o.contains("max_length") && o["max_length"].is_number_integer())
      max_length_ = std::to_string(o["max_length"].get<int64_t>());
    prefix_ = "redis sink " + host_ + ":" + std::to_string(port_) + ": ";
  }

  Outcome Publish(const std::vector<Message> &page, const Budget &budget) override {
    Start(page, budget);
    return Finish();
  }
  // Start queues the page's XADDs and writes what the socket takes at once; Finish writes the
  // rest and reads the replies.
  void Start(const std::vector<Message> &page, const Budget &budget) override;
  Outcome Finish() override;

 private:
  void Connect(const Budget &budget);
  void Exchange(size_t expected, std::vector<Reply> &replies, const Budget &budget, const char *what);
  void Wait(bool for_read, bool for_write, const Budget &budget, const std::string &what);
  void Command(std::initializer_list<std::string_view> args);
  void AppendXadd(const Message &m, const std::string &key);
  void AppendXrange(const std::string &key, int64_t position);
  // The stream a message goes to: {key_prefix}:{stream}, the stream routed per message.
  const std::string &KeyOf(size_t i) const { return route_.Routed() ? keys_[i] : key_; }
  void Queue();
  std::string Describe(const std::string &what) const { return Redact(prefix_ + what, password_); }
  std::string Why() const { return conn_ && conn_->errstr[0] ? conn_->errstr : std::strerror(errno); }

  std::string host_;
  int port_ = 6379;
  int64_t db_ = 0;
  std::string password_;
  std::string key_prefix_;  // "{key_prefix}:"
  Route route_;
  std::string key_;                // {key_prefix}:{stream}, when the stream is not routed
  std::vector<std::string> keys_;  // the page's streams, one per message, when it is
  Format format_ = Format::kStatesman;
  std::optional<std::string> max_length_;
  std::string prefix_;    // "redis sink host:port: "
  int64_t limit_ms_ = 0;  // this call's time limit, for messages
  Context conn_;
  std::string out_;             // the page's commands, RESP-encoded; reused across pages
  std::vector<Reply> replies_;  // reused across pages
  // Between Start and Finish:
  const std::vector<Message> *page_ = nullptr;
  Budget budget_;            // the call's limit
  bool in_flight_ = false;   // Start sent XADDs whose replies Finish has not read
  std::string start_error_;  // Start failed: Finish reports it
};

void RedisSink::Start(const std::vector<Message> &page, const Budget &budget) {
  // A page started and never finished left replies on the connection: start afresh.
  if (in_flight_) conn_.reset();
  in_flight_ = false;
  page_ = &page;
  start_error_.clear();
  replies_.clear();
  // The call's limit is the caller's (the dispatcher's: timeout_ms, or less before the lease
  // would expire).
  Clock::time_point start = Clock::now();
  budget_ = budget;
  limit_ms_ = std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(budget_.deadline - start).count());
  if (page.empty()) return;
  try {
    // An idle connection that is readable was closed by the server (a restart, its idle
    // timeout) or holds garbage: start afresh rather than fail the page on it.
    if (conn_) {
      pollfd p{conn_->fd, POLLIN, 0};
      if (poll(&p, 1, 0) != 0) conn_.reset();
    }
    if (!conn_) Connect(budget_);
    out_.clear();
    keys_.clear();
    if (route_.Routed()) {
      keys_.reserve(page.size());
      for (const Message &m : page) keys_.push_back(key_prefix_ + route_.For(m));
    }
    for (size_t i = 0; i < page.size(); ++i) AppendXadd(page[i], KeyOf(i));
    Queue();
    in_flight_ = true;
    // Write what the socket takes now; Finish writes the rest.
    int done = 0;
    if (redisBufferWrite(conn_.get(), &done) != REDIS_OK) throw ConnectionLost("sending XADD: " + Why());
  } catch (const std::exception &e) {  // ConnectionLost; std::bad_alloc
    conn_.reset();
    in_flight_ = false;
    start_error_ = e.what();
    if (start_error_.empty()) start_error_ = "failed";
  }
}

Outcome RedisSink::Finish() {
  Outcome out;
  const std::vector<Message> *pending = page_;
  page_ = nullptr;
  if (pending == nullptr) {
    out.error = Describe("Finish without Start");
    return out;
  }
  const std::vector<Message> &page = *pending;
  if (!start_error_.empty()) {
    out.error = Describe(start_error_);
    return out;
  }
  if (page.empty()) {
    out.ok = true;
    return out;
  }
  const Budget &b = budget_;
  try {
    Exchange(page.size(), replies_, b, "XADD");
    in_flight_ = false;

    std::vector<size_t> rejected;  // ids not above the stream's top: already there?
    size_t failed = 0;
    std::string first_error;
    for (size_t i = 0; i < page.size(); ++i) {
      const redisReply *r = replies_[i].get();
      if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        ++out.published;
      } else if (r->type == REDIS_REPLY_ERROR && Text(r) == kNotAboveTop) {
        rejected.push_back(i);
      } else {
        if (failed++ == 0)
          first_error = "XADD " + KeyOf(i) + " " + std::to_string(page[i].position) + "-0 (messageId \"" + page[i].id +
                        "\") failed: " +
                        (r->type == REDIS_REPLY_ERROR ? std::string(Text(r))
                                                      : "unexpected reply type " + std::to_string(r->type));
      }
    }

    if (!rejected.empty()) {
      for (size_t i : rejected) AppendXrange(KeyOf(i), page[i].position);
      Queue();
      Exchange(rejected.size(), replies_, b, "XRANGE");
      for (size_t k = 0; k < rejected.size(); ++k) {
        const Message &m = page[rejected[k]];
        const redisReply *r = replies_[k].get();
        std::string problem;
        if (r->type == REDIS_REPLY_ERROR) {
          problem = "XRANGE failed: " + std::string(Text(r));
        } else if (r->type != REDIS_REPLY_ARRAY) {
          problem = "XRANGE gave an unexpected reply type " + std::to_string(r->type);
        } else if (r->elements == 0) {
          problem = "the stream has no entry at that id (trimmed by MAXLEN, deleted, or never written)";
        } else {
          // [[id, [field, value, …]]]
          const redisReply *entry = r->element[0];
          const redisReply *fields =
              entry->type == REDIS_REPLY_ARRAY && entry->elements == 2 ? entry->element[1] : nullptr;
          std::optional<std::string_view> found;
          if (fields && fields->type == REDIS_REPLY_ARRAY)
            for (size_t f = 0; f + 1 < fields->elements; f += 2)
              if (Text(fields->element[f]) == "messageId") {
                found = Text(fields->element[f + 1]);
                break;
              }
          if (found && *found == m.id) {
            ++out.deduplicated;
            continue;
          }
          problem = found ? "the entry there holds messageId \"" + std::string(*found) + "\""
                          : "the entry there has no messageId field";
        }
        if (failed++ == 0)
          first_error = "position " + std::to_string(m.position) + " (messageId \"" + m.id + "\"): XADD " +
                        KeyOf(rejected[k]) + " refused id " + std::to_string(m.position) +
                        "-0 as not above the stream's top, and " + problem;
      }
    }

    if (failed == 0) {
      out.ok = true;
    } else {
      out.error = Describe(first_error + (failed > 1 ? " (and " + std::to_string(failed - 1) + " more of the " +
                                                           std::to_string(page.size()) + " messages)"
                                                     : std::string()));
    }
  } catch (const std::exception &e) {  // ConnectionLost; std::bad_alloc
    conn_.reset();
    in_flight_ = false;
    out.error = Describe(e.what());
  }
  replies_.clear();
  return out;
}

// Opens the connection, waits for it within the budget, then AUTH and SELECT (one round trip).
void RedisSink::Connect(const Budget &budget) {
  if (budget.cancelled && budget.cancelled()) throw ConnectionLost("cancelled before connecting");
  conn_.reset(redisConnectNonBlock(host_.c_str(), port_));
  if (!conn_) throw ConnectionLost("cannot connect: out of memory");
  if (conn_->err) throw ConnectionLost(std::string("cannot connect: ") + conn_->errstr);
  Wait(false, true, budget, "connecting");
  int error = 0;
  socklen_t len = sizeof(error);
  if (getsockopt(conn_->fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
  if (error != 0) throw ConnectionLost(std::string("cannot connect: ") + std::strerror(error));

  size_t expected = 0;
  if (!password_.empty()) {
    const char *argv[] = {"AUTH", password_.c_str()};
    const size_t argvlen[] = {4, password_.size()};
    if (redisAppendCommandArgv(conn_.get(), 2, argv, argvlen) != REDIS_OK) throw ConnectionLost("AUTH: " + Why());
    ++expected;
  }
  std::string db = std::to_string(db_);
  if (db_ != 0) {
    const char *argv[] = {"SELECT", db.c_str()};
    const size_t argvlen[] = {6, db.size()};
    if (redisAppendCommandArgv(conn_.get(), 2, argv, argvlen) != REDIS_OK) throw ConnectionLost("SELECT: " + Why());
    ++expected;
  }
  if (expected == 0) return;
  Exchange(expected, replies_, budget, password_.empty() ? "SELECT" : db_ != 0 ? "AUTH and SELECT" : "AUTH");
  size_t i = 0;
  if (!password_.empty()) {
    const redisReply *r = replies_[i++].get();
    if (r->type == REDIS_REPLY_ERROR) throw ConnectionLost("AUTH failed: " + std::string(Text(r)));
  }
  if (db_ != 0) {
    const redisReply *r = replies_[i].get();
    if (r->type == REDIS_REPLY_ERROR) throw ConnectionLost("SELECT " + db + " failed: " + std::string(Text(r)));
  }
}

// The RESP encoding of one command, appended to out_ (formatted here rather than by
// redisAppendCommandArgv: one buffer for the page, no allocation per command).
void RedisSink::Command(std::initializer_list<std::string_view> args) {
  char num[24];
  out_ += '*';
  out_.append(num, std::to_chars(num, num + sizeof(num), args.size()).ptr - num);
  out_ += "\r\n";
  for (std::string_view a : args) {
    out_ += '$';
    out_.append(num, std::to_chars(num, num + sizeof(num), a.size()).ptr - num);
    out_ += "\r\n";
    out_ += a;
    out_ += "\r\n";
  }
}

void RedisSink::AppendXadd(const Message &m, const std::string &key) {
  char id[32];
  std::string_view sid(id, StreamId(m.position, id));
  std::string rendered;
  if (format_ != Format::kStatesman) rendered = Render(format_, m);
  std::string_view message = format_ != Format::kStatesman ? std::string_view(rendered) : std::string_view(m.json);
  if (max_length_)
    Command({"XADD", key, "MAXLEN", "~", *max_length_, sid, "messageId", m.id, "message", message});
  else
    Command({"XADD", key, sid, "messageId", m.id, "message", message});
}

void RedisSink::AppendXrange(const std::string &key, int64_t position) {
  char id[32];
  std::string_view sid(id, StreamId(position, id));
  Command({"XRANGE", key, sid, sid});
}

// Hands the commands in out_ to hiredis's output buffer.
void RedisSink::Queue() {
  if (redisAppendFormattedCommand(conn_.get(), out_.data(), out_.size()) != REDIS_OK)
    throw ConnectionLost("queueing commands: " + Why());
  out_.clear();
}

// Sends what is queued and reads `expected` replies into `replies`, writing and reading as the
// socket allows (one write for the whole pipeline when the socket buffer takes it).
void RedisSink::Exchange(size_t expected, std::vector<Reply> &replies, const Budget &budget, const char *what) {
  replies.clear();
  replies.reserve(expected);
  redisContext *c = conn_.get();
  int sent = 0;
  for (;;) {
    if (!sent && redisBufferWrite(c, &sent) != REDIS_OK)
      throw ConnectionLost(std::string("sending ") + what + ": " + Why());
    for (;;) {
      void *reply = nullptr;
      if (redisGetReplyFromReader(c, &reply) != REDIS_OK)
        throw ConnectionLost(std::string("reading ") + what + " replies: " + Why());
      if (!reply) break;
      replies.emplace_back(static_cast<redisReply *>(reply));
    }
    if (replies.size() >= expected) return;
    Wait(true, !sent, budget,
         std::string("waiting for ") + what + " replies (" + std::to_string(replies.size()) + " of " +
             std::to_string(expected) + " received)");
    if (redisBufferRead(c) != REDIS_OK) throw ConnectionLost(std::string("reading ") + what + " replies: " + Why());
  }
}

void RedisSink::Wait(bool for_read, bool for_write, const Budget &budget, const std::string &what) {
  switch (WaitSocket(conn_->fd, for_read, for_write, budget)) {
    case WaitResult::kReady: return;
    case WaitResult::kTimedOut:
      throw ConnectionLost("timed out after " + std::to_string(limit_ms_) + " ms while " + what);
    case WaitResult::kCancelled: throw ConnectionLost("cancelled while " + what);
    case WaitResult::kFailed: throw ConnectionLost(what + ": poll failed: " + std::strerror(errno));
  }
}

std::unique_ptr<Sink> Open(const std::string &options_json) { return std::make_unique<RedisSink>(options_json); }

}  // namespace

extern const SinkType kRedisSink;
const SinkType kRedisSink = {"redis", false, CheckOptions, Open, nullptr};

}  // namespace statesman::sink
