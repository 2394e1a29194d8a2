// The `nats` sink (NATS JetStream, nats.c): see docs/design.md §6 and docs/sinks.md.
//
// One JetStream publish per message on the subject (routed by root: "statesman.{root}"), with
// the header Nats-Msg-Id: <messageId>, so that the stream's duplicate window stores a
// re-delivery once. Publishing is asynchronous with a bounded window (kWindow messages in
// flight); a page is accepted only when every message's PubAck is in, and an ack with
// "duplicate": true counts as deduplicated. Any error, or an ack missing at the deadline,
// fails the page (the cursor stays; the retry is deduplicated by the stream).
//
// nats.c runs its own threads (a reader, a flusher, timers, the delivery of acks, reconnects);
// they never call PostgreSQL and are created with every signal blocked (they start in Connect
// and at the connection's first publish, or from one another), so the process's signal
// handlers run on its own thread only. The sink keeps one connection across pages: nats.c
// reconnects by itself after a server restart, while the sink waits for it in slices of
// Budget::kCancelCheck, so no call waits past the Budget's deadline and a cancel is seen
// within 100 ms. Two waits inside nats.c are bounded otherwise: the first connection's
// handshake (at most kMaxConnectTimeoutMs, and no longer than the budget) and a write to a
// server that stopped reading (kWriteDeadlineMs, then nats.c drops the connection).
//
// Not thread-safe: a NatsSink is used by one thread at a time (its dispatcher).
#include <nats/nats.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "statesman/error.hpp"
#include "statesman/sinks/format.hpp"
#include "statesman/sinks/io.hpp"
#include "statesman/sinks/routing.hpp"

namespace statesman::sink {
namespace {

constexpr const char *kName = "nats";
constexpr const char *kDefaultUrl = "nats://127.0.0.1:4222";
constexpr const char *kDefaultSubject = "statesman.{root}";
constexpr size_t kWindow = 8192;           // publishes awaiting their ack, at most
constexpr int64_t kWriteDeadlineMs = 500;  // a blocked socket write gives up (and reconnects)
constexpr int64_t kReconnectWaitMs = 100;  // between reconnect attempts
constexpr int64_t kMaxConnectTimeoutMs = 1000;

// ---- Options --------------------------------------------------------------------------------

// A subject the server can take: tokens separated by '.', none empty, no whitespace, no wildcard.
bool ValidSubject(const std::string &s, std::string *why) {
  if (s.empty()) return *why = "is empty", false;
  if (s.front() == '.' || s.back() == '.' || s.find("..") != std::string::npos)
    return *why = "has an empty token (a leading, trailing or doubled '.')", false;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\0') return *why = "holds whitespace", false;
    if (c == '*' || c == '>') return *why = "holds a wildcard ('*' or '>'), which a publish cannot take", false;
  }
  return true;
}

// The URLs' user info (nats://user:password@host): what must never be shown, and the URL without it.
struct UrlParts {
  std::string shown;                 // the URLs with the user info replaced by "********"
  std::vector<std::string> secrets;  // every user info
};

UrlParts SplitUrls(const std::string &urls) {
  UrlParts out;
  size_t start = 0;
  for (;;) {
    size_t comma = urls.find(',', start);
    std::string url = urls.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t scheme = url.find("://");
    size_t host = scheme == std::string::npos ? 0 : scheme + 3;
    size_t at = url.find('@', host);
    size_t slash = url.find('/', host);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
      std::string info = url.substr(host, at - host);  // user:password, or a token
      out.secrets.push_back(info);
      if (size_t colon = info.find(':'); colon != std::string::npos && colon + 1 < info.size())
        out.secrets.push_back(info.substr(colon + 1));
      url.replace(host, at - host, "********");
    }
    if (!out.shown.empty()) out.shown += ',';
    out.shown += url;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void CheckUrls(const std::string &urls) {
  size_t start = 0;
  for (;;) {
    size_t comma = urls.find(',', start);
    std::string url = urls.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!url.empty() && url.front() == ' ') url.erase(0, 1);
    while (!url.empty() && url.back() == ' ') url.pop_back();
    std::string shown = SplitUrls(url).shown;
    size_t scheme = url.find("://");
    std::string s = scheme == std::string::npos ? std::string() : url.substr(0, scheme);
    if (s != "nats" && s != "tls")
      throw Error(sqlstate::kInvalidParameterValue,
                  "sink \"nats\": option \"url\" must be nats://host:port or tls://host:port (got \"" + shown + "\")",
                  "Several servers of one cluster go comma-separated.");
    std::string rest = url.substr(scheme + 3);
    size_t at = rest.find('@');
    if (at != std::string::npos) rest = rest.substr(at + 1);
    if (rest.empty() || rest.front() == ':' || rest.front() == '/' || rest.find_first_of(" \t") != std::string::npos)
      throw Error(sqlstate::kInvalidParameterValue,
                  "sink \"nats\": option \"url\" has no host (got \"" + shown + "\")");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}

std::string CheckOptions(const std::string &options_json) {
  nlohmann::json o =
      ParseOptions(kName, options_json, {"url", "subject", "user", "password", "token", "timeout_ms", "format"});
  nlohmann::json out = nlohmann::json::object();
  // Every bad option is named, in one error.
  std::vector<Error> errors;
  auto check = [&](auto &&fn) {
    try {
      fn();
    } catch (const Error &e) {
      errors.push_back(e);
    }
  };
  check([&] {
    std::string url = StringOption(kName, o, "url").value_or(kDefaultUrl);
    CheckUrls(url);
    out["url"] = url;
  });
  check([&] {
    std::string subject = StringOption(kName, o, "subject").value_or(kDefaultSubject);
    Route route = Route::Parse(subject, "subject", kName);
    // The pattern with every placeholder filled in must be a subject (a routed part that
    // turns out empty, "{partition}" of a record without one, fails that page instead).
    std::string why;
    if (!ValidSubject(route.For("s", "r", "p"), &why))
      throw Error(sqlstate::kInvalidParameterValue,
                  "sink \"nats\": option \"subject\" " + why + " (got \"" + subject + "\")",
                  "A subject is tokens separated by '.', such as \"statesman.{root}\".");
    out["subject"] = subject;
  });
  for (const char *key : {"user", "password", "token"}) {
    check([&] {
      if (auto v = SecretOption(kName, o, key, "Leave the option out for a server without it.")) out[key] = *v;
    });
  }
  check([&] {
    CheckUserPassword(kName, o);
    if (o.contains("token") && o["token"].is_string() && o.contains("user") && o["user"].is_string())
      throw Error(sqlstate::kInvalidParameterValue,
                  "sink \"nats\": option \"token\" cannot be given with options \"user\" and \"password\"",
                  "A server authenticates either by token or by user and password.");
  });
  // Without timeout_ms, the dispatcher gives each call 5 s, or half the lease when that is less.
  check([&] {
    if (auto t = IntOption(kName, o, "timeout_ms", 1, 3600000)) out["timeout_ms"] = *t;
  });
  check([&] {
    auto it = o.find("format");
    if (it != o.end() && !it->is_string() && !it->is_null())
      throw Error(sqlstate::kInvalidParameterValue, "sink \"nats\": option \"format\" must be a string");
    std::string f = it != o.end() && it->is_string() ? it->get<std::string>() : "statesman";
    out["format"] = FormatName(ParseFormat(f, kName));
  });
  if (errors.size() == 1) throw errors[0];
  if (!errors.empty()) {
    std::string message = "sink \"nats\": " + std::to_string(errors.size()) + " options are invalid: ";
    const char *state = errors[0].Sqlstate();
    for (size_t i = 0; i < errors.size(); ++i) {
      std::string m = errors[i].what();
      if (m.rfind("sink \"nats\": ", 0) == 0) m.erase(0, std::strlen("sink \"nats\": "));
      message += (i ? "; " : "") + m;
    }
    throw Error(state, message);
  }
  return out.dump();
}

// ---- The acks ---------------------------------------------------------------------------------

// What nats.c's ack handler (on its delivery thread) and the dispatcher's thread share. A
// message is known by its natsMsg pointer from the publish until its ack: the library owns the
// message until then and hands it to the handler, which destroys it, so the pointer of a live
// message is unique. An ack for a message of an abandoned page finds nothing and is ignored.
struct AckState {
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<const natsMsg *, size_t> pending;  // message → index in the page
  size_t acked = 0;                                     // this page's acks
  size_t duplicates = 0;                                // of which "duplicate": true
  size_t failed = 0;
  std::string first_error;
};

std::string StatusText(natsStatus s) { return natsStatus_GetText(s) ? natsStatus_GetText(s) : "unknown status"; }

// Runs on nats.c's own thread, called from C: nothing may be thrown out of it (an exception
// there would end the server process), so the error text is built under a catch-all; a text that
// cannot be built leaves first_error empty and the page reports a fixed one.
void OnAck(jsCtx *, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure) noexcept {
  auto *state = static_cast<AckState *>(closure);
  {
    std::lock_guard<std::mutex> lock(state->mu);
    auto it = state->pending.find(msg);
    if (it != state->pending.end()) {
      state->pending.erase(it);
      if (pa != nullptr) {
        ++state->acked;
        if (pa->Duplicate) ++state->duplicates;
      } else {
        if (state->failed++ == 0) try {
            const char *subject = natsMsg_GetSubject(msg);
            const char *id = nullptr;
            natsMsgHeader_Get(msg, "Nats-Msg-Id", &id);
            std::string s = subject ? subject : "";
            std::string what;
            if (pae != nullptr && pae->Err == NATS_NO_RESPONDERS)
              what = "no stream captures subject \"" + s + "\" (the server has no responders for it)";
            else if (pae != nullptr)
              what = "publishing to subject \"" + s + "\" failed: " + StatusText(pae->Err) +
                     (pae->ErrCode ? " (JetStream error " + std::to_string(static_cast<int>(pae->ErrCode)) + ")" : "") +
                     (pae->ErrText && *pae->ErrText ? std::string(": ") + pae->ErrText : std::string());
            else
              what = "publishing to subject \"" + s + "\" got neither an ack nor an error";
            state->first_error = what + " (messageId \"" + (id ? id : "") + "\")";
          } catch (...) {
            state->first_error.clear();
          }
      }
      // The waiter wakes for the page's last ack, its first failure, and room in the window.
      if (state->pending.empty() || state->failed == 1 || state->pending.size() == kWindow / 2) state->cv.notify_all();
    }
  }
  natsMsg_Destroy(msg);
}

class ConnectionLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- The sink -------------------------------------------------------------------------------

class NatsSink : public Sink {
 public:
  explicit NatsSink(const std::string &options_json)
      : route_(Route::Parse(nlohmann::json::parse(options_json).value("subject", kDefaultSubject), "subject", kName)) {
    nlohmann::json o = nlohmann::json::parse(options_json);
    url_ = o.value("url", kDefaultUrl);
    user_ = o.value("user", "");
    password_ = o.value("password", "");
    token_ = o.value("token", "");
    format_ = ParseFormat(o.value("format", "statesman"), kName);
    UrlParts parts = SplitUrls(url_);
    url_secrets_ = parts.secrets;
    prefix_ = "nats sink " + parts.shown + ": ";
    state_ = new AckState;
  }

  NatsSink(const NatsSink &) = delete;
  NatsSink &operator=(const NatsSink &) = delete;

  // The shared state is not freed: an ack handler that nats.c's delivery thread had already
  // begun could still touch it after the connection is closed (a few bytes per sink, and a
  // dispatcher opens a new sink only when its outbox's options change).
  ~NatsSink() override {
    if (in_flight_) Abandon();
    Disconnect();
  }

  Outcome Publish(const std::vector<Message> &page, const Budget &budget) override {
    Start(page, budget);
    return Finish();
  }
  void Start(const std::vector<Message> &page, const Budget &budget) override;
  Outcome Finish() override;

 private:
  void Connect(const Budget &budget);
  void Disconnect();
  void WaitConnected(const Budget &budget);
  // Publishes page_[next_ …] while the window has room.
  void PublishSome(const std::vector<Message> &page);
  void Abandon();
  std::string Describe(const std::string &what) const {
    std::string text = Redact(Redact(prefix_ + what, password_), token_);
    for (const std::string &s : url_secrets_) text = Redact(std::move(text), s);
    return text;
  }
  std::string LastError() const {
    const char *text = nullptr;
    natsStatus st = conn_ != nullptr ? natsConnection_GetLastError(conn_, &text) : NATS_OK;
    if (text && *text) return text;
    return st != NATS_OK ? StatusText(st) : "none reported";
  }

  Route route_;
  std::string url_, user_, password_, token_;
  std::vector<std::string> url_secrets_;
  Format format_ = Format::kStatesman;
  std::string prefix_;  // "nats sink nats://host:port: "
  natsConnection *conn_ = nullptr;
  jsCtx *js_ = nullptr;
  AckState *state_ = nullptr;
  bool first_publish_ = false;  // no publish on this connection yet (nats.c starts a thread)
  // Between Start and Finish:
  const std::vector<Message> *page_ = nullptr;
  Budget budget_;
  size_t next_ = 0;          // the next message of the page to publish
  bool in_flight_ = false;   // Start published messages whose acks Finish has not collected
  std::string start_error_;  // Start failed: Finish reports it
  std::string send_error_;   // a publish failed
  int64_t limit_ms_ = 0;
};

void NatsSink::Disconnect() {
  if (conn_ != nullptr) natsConnection_Close(conn_);
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (conn_ != nullptr) natsConnection_Destroy(conn_);
  js_ = nullptr;
  conn_ = nullptr;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->pending.clear();
}

void NatsSink::Connect(const Budget &budget) {
  if (budget.cancelled && budget.cancelled()) throw ConnectionLost("cancelled before connecting");
  int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(budget.deadline - Clock::now()).count();
  SignalsBlocked blocked;
  natsOptions *opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetURL(opts, url_.c_str());
  if (s == NATS_OK && !user_.empty()) s = natsOptions_SetUserInfo(opts, user_.c_str(), password_.c_str());
  if (s == NATS_OK && !token_.empty()) s = natsOptions_SetToken(opts, token_.c_str());
  if (s == NATS_OK) s = natsOptions_SetName(opts, "statesman");
  if (s == NATS_OK) s = natsOptions_SetNoRandomize(opts, true);
  if (s == NATS_OK)
    s = natsOptions_SetTimeout(opts, std::clamp<int64_t>(left, Budget::kCancelCheck.count(), kMaxConnectTimeoutMs));
  if (s == NATS_OK) s = natsOptions_SetAllowReconnect(opts, true);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, kReconnectWaitMs);
  if (s == NATS_OK) s = natsOptions_SetWriteDeadline(opts, kWriteDeadlineMs);
  // A dead peer is noticed within a few seconds, not nats.c's default two minutes.
  if (s == NATS_OK) s = natsOptions_SetPingInterval(opts, 2000);
  if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(opts, 2);
  if (s != NATS_OK) {
    natsOptions_Destroy(opts);
    throw ConnectionLost("cannot set the connection's options: " + StatusText(s));
  }
  // The first connection is made here, within the connect timeout (a refused or failed one
  // fails the page with nats.c's reason, and the next page tries again); once connected,
  // nats.c reconnects by itself.
  s = natsConnection_Connect(&conn_, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    std::string why = StatusText(s);
    natsStatus last = NATS_OK;
    std::string detail = nats_GetLastError(&last) ? nats_GetLastError(&last) : "";
    // "(conn.c:1905): Authorization Violation": the reason without nats.c's source position.
    if (size_t p = detail.find("): "); !detail.empty() && detail[0] == '(' && p != std::string::npos)
      detail.erase(0, p + 3);
    if (!detail.empty() && detail != why) why += ": " + detail;
    if (conn_ != nullptr) natsConnection_Destroy(conn_);
    conn_ = nullptr;
    throw ConnectionLost("cannot connect: " + why);
  }
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.PublishAsync.MaxPending = static_cast<int64_t>(kWindow);
  jo.PublishAsync.AckHandler = OnAck;
  jo.PublishAsync.AckHandlerClosure = state_;
  jo.PublishAsync.StallWait = Budget::kCancelCheck.count();
  s = natsConnection_JetStream(&js_, conn_, &jo);
  first_publish_ = true;
  if (s != NATS_OK) {
    natsConnection_Destroy(conn_);
    conn_ = nullptr;
    js_ = nullptr;
    throw ConnectionLost("cannot open a JetStream context: " + StatusText(s));
  }
}

// Waits (in slices, for the budget) until nats.c has a connection: after a server restart it
// reconnects by itself.
void NatsSink::WaitConnected(const Budget &budget) {
  for (;;) {
    natsConnStatus st = natsConnection_Status(conn_);
    if (st == NATS_CONN_STATUS_CONNECTED) return;
    if (st == NATS_CONN_STATUS_CLOSED) throw ConnectionLost("the connection was closed: " + LastError());
    if (budget.cancelled && budget.cancelled()) throw ConnectionLost("cancelled while connecting");
    auto now = Clock::now();
    if (now >= budget.deadline)
      throw ConnectionLost("not connected after " + std::to_string(limit_ms_) + " ms (" +
                           (st == NATS_CONN_STATUS_RECONNECTING ? "the server went away; reconnecting" : "connecting") +
                           ")");
    auto slice = std::min<Clock::duration>(Budget::kCancelCheck, budget.deadline - now);
    std::this_thread::sleep_for(std::min<Clock::duration>(slice, std::chrono::milliseconds(10)));
  }
}

void NatsSink::PublishSome(const std::vector<Message> &page) {
  std::string rendered;
  while (next_ < page.size() && send_error_.empty()) {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->pending.size() >= kWindow || state_->failed > 0) return;
    }
    const Message &m = page[next_];
    std::string subject = route_.For(m);
    if (route_.Routed()) {
      std::string why;
      if (!ValidSubject(subject, &why)) {
        send_error_ = "the routed subject \"" + subject + "\" of messageId \"" + m.id + "\" " + why;
        return;
      }
    }
    const std::string *data = &m.json;
    if (format_ != Format::kStatesman) {
      rendered = Render(format_, m);
      data = &rendered;
    }
    natsMsg *msg = nullptr;
    natsStatus s = natsMsg_Create(&msg, subject.c_str(), nullptr, data->data(), static_cast<int>(data->size()));
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Nats-Msg-Id", m.id.c_str());
    if (s == NATS_OK && format_ == Format::kCloudEvents)
      s = natsMsgHeader_Set(msg, "Content-Type", "application/cloudevents+json");
    if (s != NATS_OK) {
      natsMsg_Destroy(msg);
      send_error_ = "cannot build the message for messageId \"" + m.id + "\": " + StatusText(s);
      return;
    }
    const natsMsg *key = msg;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->pending.emplace(key, next_);
    }
    if (first_publish_) {
      // The first asynchronous publish starts the thread that delivers the acks.
      SignalsBlocked blocked;
      s = js_PublishMsgAsync(js_, &msg, nullptr);
      first_publish_ = false;
    } else {
      s = js_PublishMsgAsync(js_, &msg, nullptr);
    }
    if (s != NATS_OK) {
      // Not taken by the library (msg is still ours): no ack will come for it.
      {
        std::lock_guard<std::mutex> lock(state_->mu);
        state_->pending.erase(key);
      }
      natsMsg_Destroy(msg);
      if (s == NATS_TIMEOUT) return;  // the library's window is full: wait for acks, then again
      std::string why = StatusText(s);
      natsStatus last = NATS_OK;
      const char *detail = nats_GetLastError(&last);
      if (detail && *detail && why != detail) why += std::string(": ") + detail;
      send_error_ = "publishing to subject \"" + subject + "\" (messageId \"" + m.id + "\") failed: " + why;
      return;
    }
    ++next_;
  }
}

// Forgets the page in flight: its acks still to come are dropped (the retry is deduplicated).
void NatsSink::Abandon() {
  if (js_ != nullptr) {
    natsMsgList list{};
    if (js_PublishAsyncGetPendingList(&list, js_) == NATS_OK) natsMsgList_Destroy(&list);
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->pending.clear();
  in_flight_ = false;
}

void NatsSink::Start(const std::vector<Message> &page, const Budget &budget) {
  if (in_flight_) Abandon();
  page_ = &page;
  budget_ = budget;
  next_ = 0;
  start_error_.clear();
  send_error_.clear();
  limit_ms_ =
      std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(budget.deadline - Clock::now()).count());
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->pending.clear();
    state_->acked = state_->duplicates = state_->failed = 0;
    state_->first_error.clear();
  }
  if (page.empty()) return;
  try {
    if (conn_ != nullptr && natsConnection_IsClosed(conn_)) Disconnect();
    if (conn_ == nullptr) Connect(budget_);
    WaitConnected(budget_);
    in_flight_ = true;
    PublishSome(page);
  } catch (const std::exception &e) {  // ConnectionLost; std::bad_alloc
    if (in_flight_) Abandon();
    start_error_ = e.what();
    if (start_error_.empty()) start_error_ = "failed";
  }
}

Outcome NatsSink::Finish() {
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
  std::string problem;
  try {
    for (;;) {
      PublishSome(page);
      std::unique_lock<std::mutex> lock(state_->mu);
      if (state_->failed > 0) {
        problem = state_->first_error.empty()
                      ? std::string("publishing a message failed (the error could not be described)")
                      : state_->first_error;
        if (state_->failed > 1)
          problem += " (and " + std::to_string(state_->failed - 1) + " more of the " + std::to_string(page.size()) +
                     " messages)";
        break;
      }
      if (!send_error_.empty()) {
        problem = send_error_;
        break;
      }
      if (next_ == page.size() && state_->pending.empty()) break;
      if (b.cancelled && b.cancelled()) {
        problem = "cancelled while waiting for acks (" + std::to_string(state_->acked) + " of " +
                  std::to_string(page.size()) + " received)";
        break;
      }
      auto now = Clock::now();
      if (now >= b.deadline) {
        natsConnStatus st = natsConnection_Status(conn_);
        problem = "timed out after " + std::to_string(limit_ms_) + " ms waiting for acks (" +
                  std::to_string(state_->acked) + " of " + std::to_string(page.size()) + " received" +
                  (st == NATS_CONN_STATUS_CONNECTED
                       ? std::string()
                       : std::string("; the connection is ") +
                             (st == NATS_CONN_STATUS_RECONNECTING ? "reconnecting" : "not connected") +
                             ", last error: " + LastError()) +
                  ")";
        break;
      }
      // Woken by the handler when the page's last ack or its first failure is in; else look
      // again (room in the window, the cancel, the deadline) after a slice.
      auto slice = std::min<Clock::duration>(Budget::kCancelCheck, b.deadline - now);
      state_->cv.wait_for(lock, slice);
    }
  } catch (const std::exception &e) {  // std::bad_alloc, a Render failure
    problem = e.what();
  }
  if (!problem.empty()) {
    Abandon();
    out.error = Describe(problem);
    return out;
  }
  in_flight_ = false;
  std::lock_guard<std::mutex> lock(state_->mu);
  out.ok = true;
  out.deduplicated = static_cast<int64_t>(state_->duplicates);
  out.published = static_cast<int64_t>(state_->acked - state_->duplicates);
  return out;
}

std::unique_ptr<Sink> Open(const std::string &options_json) { return std::make_unique<NatsSink>(options_json); }

}  // namespace

extern const SinkType kNatsSink;
const SinkType kNatsSink = {"nats", false, CheckOptions, Open, nullptr};

}  // namespace statesman::sink
