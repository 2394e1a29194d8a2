// The `rabbitmq` sink (AMQP 0-9-1, rabbitmq-c): see docs/design.md §6 and docs/sinks.md.
//
// One connection and one channel in confirm mode (confirm.select) per sink object, kept across
// pages. Each message is one basic.publish to the exchange ("exchange", default "": the
// default exchange, which routes to the queue named by the routing key) with the routed
// routing key ("routing_key", default "{root}"), mandatory set, persistent (delivery_mode 2),
// the properties message_id = messageId and content_type, and the headers globalPosition (a
// long) and epoch. A page counts only when the broker confirmed every one of its messages
// (basic.ack, also with `multiple`); a basic.nack, a basic.return (an unroutable message: the
// broker sends it before the message's ack) or a channel or connection closed by the broker
// (a missing exchange: 404) fails the page, and the cursor stays. RabbitMQ keeps no record of
// message ids: a retried page is published again, and consumers deduplicate on message_id.
//
// rabbitmq-c 0.11 runs no threads and has no confirm wait of its own: Start publishes the
// page, Finish reads frames (amqp_simple_wait_frame_noblock in slices of Budget::kCancelCheck)
// until every delivery tag of the page is confirmed, the Budget's deadline passes or it is
// cancelled. A socket write never blocks: before the kernel's send buffer could fill, the sink
// waits (in slices) for the broker to read. The connection's handshake and its RPCs (login,
// channel.open, confirm.select) are bounded by min(the budget, kMaxConnectTimeoutMs). After
// a failure or a timeout the connection is dropped and the next page connects again.
//
// Not thread-safe: a RabbitSink is used by one thread at a time (its dispatcher).
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "statesman/error.hpp"
#include "statesman/sinks/format.hpp"
#include "statesman/sinks/io.hpp"
#include "statesman/sinks/routing.hpp"

namespace statesman::sink {
namespace {

constexpr const char *kName = "rabbitmq";
constexpr const char *kDefaultHost = "127.0.0.1";
constexpr int64_t kDefaultPort = 5672;
constexpr const char *kDefaultVhost = "/";
constexpr const char *kDefaultExchange = "";
constexpr const char *kDefaultRoutingKey = "{root}";
constexpr const char *kGuest = "guest";  // RabbitMQ's default user (loopback only), when none is given
constexpr size_t kWindow = 8192;         // messages awaiting their confirm, at most
constexpr int64_t kMaxConnectTimeoutMs = 1000;
constexpr size_t kShortString = 255;  // AMQP's shortstr: exchange, routing key, vhost, message_id
constexpr int kFrameMax = 131072;

// ---- Options --------------------------------------------------------------------------------

// A name the broker takes as a shortstr: at most 255 bytes, no control characters.
bool ValidName(const std::string &s, std::string *why) {
  if (s.size() > kShortString) return *why = "is longer than 255 bytes", false;
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return *why = "holds a control character", false;
  return true;
}

std::string CheckOptions(const std::string &options_json) {
  nlohmann::json o =
      ParseOptions(kName, options_json,
                   {"host", "port", "vhost", "user", "password", "exchange", "routing_key", "timeout_ms", "format"});
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
    std::string host = StringOption(kName, o, "host").value_or(kDefaultHost);
    // One ':' is "host:port" (an IPv6 address has more).
    bool one_colon = std::count(host.begin(), host.end(), ':') == 1;
    if (host.find_first_of(" \t\r\n/@") != std::string::npos || one_colon)
      throw Error(sqlstate::kInvalidParameterValue,
                  "sink \"rabbitmq\": option \"host\" must be a host name or an IP address (got \"" + host + "\")",
                  "The port goes in option \"port\", the virtual host in option \"vhost\".");
    out["host"] = host;
  });
  check([&] { out["port"] = IntOption(kName, o, "port", 1, 65535).value_or(kDefaultPort); });
  check([&] {
    std::string vhost = StringOption(kName, o, "vhost").value_or(kDefaultVhost);
    std::string why;
    if (!ValidName(vhost, &why))
      throw Error(sqlstate::kInvalidParameterValue, "sink \"rabbitmq\": option \"vhost\" " + why);
    out["vhost"] = vhost;
  });
  check([&] {
    // "" is the default exchange (StringOption refuses an empty string, so look first).
    auto it = o.find("exchange");
    std::string exchange = kDefaultExchange;
    if (it != o.end() && !it->is_null()) {
      if (!it->is_string())
        throw Error(sqlstate::kInvalidParameterValue, "sink \"rabbitmq\": option \"exchange\" must be a string");
      exchange = it->get<std::string>();
    }
    std::string why;
    if (!ValidName(exchange, &why))
      throw Error(sqlstate::kInvalidParameterValue,
                  "sink \"rabbitmq\": option \"exchange\" " + why + " (got \"" + exchange + "\")");
    out["exchange"] = exchange;
  });
  check([&] {
    std::string key = StringOption(kName, o, "routing_key").value_or(kDefaultRoutingKey);
    Route route = Route::Parse(key, "routing_key", kName);
    std::string why;
    if (!ValidName(route.For("s", "r", "p"), &why))
      throw Error(sqlstate::kInvalidParameterValue,
                  "sink \"rabbitmq\": option \"routing_key\" " + why + " (got \"" + key + "\")",
                  "A routing key is at most 255 bytes, such as \"statesman.{root}\".");
    out["routing_key"] = key;
  });
  for (const char *key : {"user", "password"}) {
    check([&] {
      if (auto v = SecretOption(kName, o, key,
                                "Leave out both \"user\" and \"password\" to log in as RabbitMQ's default user."))
        out[key] = *v;
    });
  }
  check([&] { CheckUserPassword(kName, o); });
  // Without timeout_ms, the dispatcher gives each call 5 s, or half the lease when that is less.
  check([&] {
    if (auto t = IntOption(kName, o, "timeout_ms", 1, 3600000)) out["timeout_ms"] = *t;
  });
  check([&] {
    auto it = o.find("format");
    if (it != o.end() && !it->is_string() && !it->is_null())
      throw Error(sqlstate::kInvalidParameterValue, "sink \"rabbitmq\": option \"format\" must be a string");
    std::string f = it != o.end() && it->is_string() ? it->get<std::string>() : "statesman";
    out["format"] = FormatName(ParseFormat(f, kName));
  });
  if (errors.size() == 1) throw errors[0];
  if (!errors.empty()) {
    static const std::string kPrefix = "sink \"rabbitmq\": ";
    std::string message = kPrefix + std::to_string(errors.size()) + " options are invalid: ";
    const char *state = errors[0].Sqlstate();
    for (size_t i = 0; i < errors.size(); ++i) {
      std::string m = errors[i].what();
      if (m.rfind(kPrefix, 0) == 0) m.erase(0, kPrefix.size());
      message += (i ? "; " : "") + m;
    }
    throw Error(state, message);
  }
  return out.dump();
}

// ---- Helpers ----------------------------------------------------------------------------------

class ConnectionLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string Text(amqp_bytes_t b) {
  return b.bytes == nullptr ? std::string() : std::string(static_cast<const char *>(b.bytes), b.len);
}

amqp_bytes_t Bytes(const std::string &s) { return amqp_bytes_t{s.size(), const_cast<char *>(s.data())}; }

// "404 NOT_FOUND - no exchange 'x' in vhost '/'" from a channel.close or connection.close.
std::string CloseText(const amqp_method_t &m) {
  if (m.id == AMQP_CHANNEL_CLOSE_METHOD) {
    auto *c = static_cast<const amqp_channel_close_t *>(m.decoded);
    return std::to_string(c->reply_code) + " " + Text(c->reply_text);
  }
  if (m.id == AMQP_CONNECTION_CLOSE_METHOD) {
    auto *c = static_cast<const amqp_connection_close_t *>(m.decoded);
    return std::to_string(c->reply_code) + " " + Text(c->reply_text);
  }
  return "method " + std::to_string(m.id);
}

// The reason of an RPC that failed (login, channel.open, confirm.select).
std::string ReplyText(const amqp_rpc_reply_t &r) {
  switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL: return "no error";
    case AMQP_RESPONSE_NONE: return "no reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: return amqp_error_string2(r.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      return "the broker closed the " +
             std::string(r.reply.id == AMQP_CONNECTION_CLOSE_METHOD ? "connection" : "channel") + ": " +
             CloseText(r.reply);
  }
  return "unknown reply";
}

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

// ---- The sink -------------------------------------------------------------------------------

class RabbitSink : public Sink {
 public:
  explicit RabbitSink(const std::string &options_json)
      : route_(Route::Parse(nlohmann::json::parse(options_json).value("routing_key", kDefaultRoutingKey), "routing_key",
                            kName)) {
    nlohmann::json o = nlohmann::json::parse(options_json);
    host_ = o.value("host", kDefaultHost);
    port_ = o.value("port", kDefaultPort);
    vhost_ = o.value("vhost", kDefaultVhost);
    exchange_ = o.value("exchange", kDefaultExchange);
    user_ = o.value("user", kGuest);
    password_ = o.value("password", user_ == kGuest ? kGuest : "");
    format_ = ParseFormat(o.value("format", "statesman"), kName);
    content_type_ = format_ == Format::kCloudEvents ? "application/cloudevents+json" : "application/json";
    prefix_ = "rabbitmq sink amqp://" + user_ + "@" + host_ + ":" + std::to_string(port_) + "/" + vhost_ + ": ";
  }

  RabbitSink(const RabbitSink &) = delete;
  RabbitSink &operator=(const RabbitSink &) = delete;
  ~RabbitSink() override { Disconnect(); }

  Outcome Publish(const std::vector<Message> &page, const Budget &budget) override {
    Start(page, budget);
    return Finish();
  }
  void Start(const std::vector<Message> &page, const Budget &budget) override;
  Outcome Finish() override;

 private:
  void Connect(const Budget &budget);
  void Disconnect();
  // Publishes page[next_ …] while the window has room and the socket can take it without blocking.
  void PublishSome(const std::vector<Message> &page);
  // Reads the frames that are there, waiting at most `wait_ms` for the first; false when none came.
  bool ReadFrames(int wait_ms);
  void OnFrame(const amqp_frame_t &frame);
  void Confirm(uint64_t tag, bool multiple, bool ack);
  // Room in the socket's send buffer for `bytes` more (the kernel's queue, SIOCOUTQ).
  bool Room(size_t bytes);
  std::string Describe(const std::string &what) const { return Redact(prefix_ + what, password_); }
  std::string Where(const std::string &routing_key) const {
    return "exchange \"" + exchange_ + "\" with routing key \"" + routing_key + "\"";
  }

  Route route_;
  std::string host_, vhost_, exchange_, user_, password_, content_type_;
  int64_t port_ = kDefaultPort;
  Format format_ = Format::kStatesman;
  std::string prefix_;  // "rabbitmq sink amqp://user@host:port/vhost: "

  amqp_connection_state_t conn_ = nullptr;
  int fd_ = -1;
  std::string broken_;        // why the connection can no longer be used (the next page reconnects)
  uint64_t next_tag_ = 1;     // the delivery tag of the channel's next publish
  size_t credit_ = 0;         // bytes the socket takes without blocking, as last measured
  bool socket_full_ = false;  // PublishSome stopped for want of room in the socket's buffer
  // A basic.return being read: its reason, then its content header and body frames.
  bool returning_ = false;
  uint64_t return_body_left_ = 0;
  std::string return_reason_;

  // Between Start and Finish:
  const std::vector<Message> *page_ = nullptr;
  Budget budget_;
  size_t next_ = 0;         // the next message of the page to publish
  uint64_t first_tag_ = 0;  // the delivery tag of page[0]
  std::vector<char> confirmed_;
  size_t low_ = 0;  // every message before it is confirmed
  size_t acked_ = 0;
  size_t nacked_ = 0;
  std::string failure_;      // the page's first failure (a nack, a return, the channel closed)
  std::string start_error_;  // Start failed: Finish reports it
  int64_t limit_ms_ = 0;
};

void RabbitSink::Disconnect() {
  if (conn_ != nullptr) amqp_destroy_connection(conn_);  // closes the socket, frees the pools
  conn_ = nullptr;
  fd_ = -1;
  broken_.clear();
  returning_ = false;
  credit_ = 0;
}

void RabbitSink::Connect(const Budget &budget) {
  if (budget.cancelled && budget.cancelled()) throw ConnectionLost("cancelled before connecting");
  int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(budget.deadline - Clock::now()).count();
  int64_t ms = std::clamp<int64_t>(left, 1, kMaxConnectTimeoutMs);
  struct timeval tv = {static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  conn_ = amqp_new_connection();
  if (conn_ == nullptr) throw std::bad_alloc();
  amqp_socket_t *socket = amqp_tcp_socket_new(conn_);
  if (socket == nullptr) {
    Disconnect();
    throw ConnectionLost("cannot create a socket");
  }
  errno = 0;
  int rc = amqp_socket_open_noblock(socket, host_.c_str(), static_cast<int>(port_), &tv);
  if (rc != AMQP_STATUS_OK) {
    int err = errno;
    std::string why = amqp_error_string2(rc);
    if (rc == AMQP_STATUS_SOCKET_ERROR && err != 0) why += " (" + std::string(std::strerror(err)) + ")";
    Disconnect();
    throw ConnectionLost("cannot connect: " + why);
  }
  fd_ = amqp_socket_get_sockfd(socket);
  amqp_set_handshake_timeout(conn_, &tv);
  amqp_set_rpc_timeout(conn_, &tv);
  // No heartbeats: the sink reads only while it publishes, and every wait has its deadline (a
  // timed-out page drops the connection).
  amqp_rpc_reply_t r =
      amqp_login(conn_, vhost_.c_str(), 1, kFrameMax, 0, AMQP_SASL_METHOD_PLAIN, user_.c_str(), password_.c_str());
  if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    std::string why = ReplyText(r);
    Disconnect();
    throw ConnectionLost("cannot log in as \"" + user_ + "\" to vhost \"" + vhost_ + "\": " + why);
  }
  amqp_channel_open(conn_, 1);
  r = amqp_get_rpc_reply(conn_);
  if (r.reply_type == AMQP_RESPONSE_NORMAL) {
    amqp_confirm_select(conn_, 1);
    r = amqp_get_rpc_reply(conn_);
  }
  if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    std::string why = ReplyText(r);
    Disconnect();
    throw ConnectionLost("cannot open a channel in confirm mode: " + why);
  }
  next_tag_ = 1;
}

bool RabbitSink::Room(size_t bytes) {
  if (credit_ >= bytes) return true;
  int sndbuf = 0, outq = 0;
  socklen_t len = sizeof sndbuf;
  if (getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len) != 0 || ioctl(fd_, SIOCOUTQ, &outq) != 0) {
    credit_ = bytes;  // cannot tell: let the write decide
    return true;
  }
  // getsockopt reports twice the payload the buffer holds (the kernel's bookkeeping); keep a margin.
  int64_t room = static_cast<int64_t>(sndbuf) / 2 - outq;
  credit_ = room > 0 ? static_cast<size_t>(room) : 0;
  // A message larger than the buffer goes when the queue is empty (the broker is reading).
  if (outq == 0 && credit_ < bytes) credit_ = bytes;
  return credit_ >= bytes;
}

void RabbitSink::Confirm(uint64_t tag, bool multiple, bool ack) {
  size_t n = confirmed_.size();
  if (page_ == nullptr || tag < first_tag_ || tag - first_tag_ >= n) return;  // an abandoned page's
  size_t last = static_cast<size_t>(tag - first_tag_);
  auto mark = [&](size_t i) {
    if (confirmed_[i] != 0) return;
    confirmed_[i] = ack ? 1 : 2;
    if (ack) {
      ++acked_;
    } else if (nacked_++ == 0 && failure_.empty()) {
      const Message &m = (*page_)[i];
      failure_ = "the broker refused (basic.nack) messageId \"" + m.id + "\" published to " + Where(route_.For(m));
    }
  };
  if (multiple) {
    for (size_t i = low_; i <= last; ++i) mark(i);
  } else {
    mark(last);
  }
  while (low_ < n && confirmed_[low_] != 0) ++low_;
}

void RabbitSink::OnFrame(const amqp_frame_t &frame) {
  if (frame.frame_type == AMQP_FRAME_METHOD) {
    const amqp_method_t &m = frame.payload.method;
    switch (m.id) {
      case AMQP_BASIC_ACK_METHOD: {
        auto *a = static_cast<const amqp_basic_ack_t *>(m.decoded);
        Confirm(a->delivery_tag, a->multiple != 0, true);
        return;
      }
      case AMQP_BASIC_NACK_METHOD: {
        auto *a = static_cast<const amqp_basic_nack_t *>(m.decoded);
        Confirm(a->delivery_tag, a->multiple != 0, false);
        return;
      }
      case AMQP_BASIC_RETURN_METHOD: {
        // Unroutable (mandatory): the message comes back, before its basic.ack. It names no
        // delivery tag; its properties name the message.
        auto *r = static_cast<const amqp_basic_return_t *>(m.decoded);
        returning_ = true;
        return_body_left_ = UINT64_MAX;
        return_reason_ = "the broker returned messageId \"{id}\" as unroutable (" + std::to_string(r->reply_code) +
                         " " + Text(r->reply_text) + ") from " + Where(Text(r->routing_key));
        if (Text(r->exchange) != exchange_) return_reason_ += " (exchange \"" + Text(r->exchange) + "\")";
        return;
      }
      case AMQP_CHANNEL_CLOSE_METHOD: {
        amqp_channel_close_ok_t ok{};
        amqp_send_method(conn_, frame.channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
        broken_ = "the broker closed the channel: " + CloseText(m);
        return;
      }
      case AMQP_CONNECTION_CLOSE_METHOD: {
        amqp_connection_close_ok_t ok{};
        amqp_send_method(conn_, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        broken_ = "the broker closed the connection: " + CloseText(m);
        return;
      }
      default: return;  // basic.cancel, connection.blocked and the like: nothing this sink asked for
    }
  }
  if (!returning_) return;
  if (frame.frame_type == AMQP_FRAME_HEADER) {
    return_body_left_ = frame.payload.properties.body_size;
    auto *p = static_cast<const amqp_basic_properties_t *>(frame.payload.properties.decoded);
    std::string id = p != nullptr && (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) ? Text(p->message_id) : "";
    std::string reason = return_reason_;
    reason.replace(reason.find("{id}"), 4, id);
    // A return counts for the page in flight when it is one of its messages.
    bool ours = false;
    if (page_ != nullptr)
      for (size_t i = 0; i < next_ && !ours; ++i) ours = (*page_)[i].id == id;
    if (ours && failure_.empty()) failure_ = reason;
    if (return_body_left_ == 0) returning_ = false;
  } else if (frame.frame_type == AMQP_FRAME_BODY) {
    uint64_t len = frame.payload.body_fragment.len;
    return_body_left_ = len >= return_body_left_ ? 0 : return_body_left_ - len;
    if (return_body_left_ == 0) returning_ = false;
  }
}

bool RabbitSink::ReadFrames(int wait_ms) {
  bool any = false;
  for (;;) {
    if (!broken_.empty()) return any;
    amqp_frame_t frame;
    struct timeval tv = {0, any ? 0 : wait_ms * 1000};
    int rc = amqp_simple_wait_frame_noblock(conn_, &frame, &tv);
    if (rc == AMQP_STATUS_TIMEOUT) break;
    if (rc != AMQP_STATUS_OK) {
      broken_ = "the connection was lost: " + std::string(amqp_error_string2(rc));
      return any;
    }
    any = true;
    OnFrame(frame);
  }
  amqp_maybe_release_buffers(conn_);
  return any;
}

void RabbitSink::PublishSome(const std::vector<Message> &page) {
  std::string rendered, scratch;
  socket_full_ = false;
  while (next_ < page.size() && broken_.empty() && failure_.empty()) {
    if (next_ - low_ >= kWindow) return;
    const Message &m = page[next_];
    std::string key = route_.For(m);
    if (route_.Routed()) {
      std::string why;
      if (!ValidName(key, &why)) {
        failure_ = "the routed routing key \"" + key + "\" of messageId \"" + m.id + "\" " + why;
        return;
      }
    }
    const std::string *data = &m.json;
    if (format_ != Format::kStatesman) {
      rendered = Render(format_, m);
      data = &rendered;
    }
    // The frames' size (method, content header with the properties, body), roughly.
    size_t bytes = data->size() + key.size() + exchange_.size() + m.id.size() + 200;
    if (!Room(bytes)) {
      socket_full_ = true;  // Finish waits for the broker to read
      return;
    }
    std::string_view epoch = Epoch(m.json, scratch);
    amqp_table_entry_t headers[2];
    headers[0].key = amqp_cstring_bytes("globalPosition");
    headers[0].value.kind = AMQP_FIELD_KIND_I64;
    headers[0].value.value.i64 = m.position;
    headers[1].key = amqp_cstring_bytes("epoch");
    headers[1].value.kind = AMQP_FIELD_KIND_UTF8;
    headers[1].value.value.bytes = amqp_bytes_t{epoch.size(), const_cast<char *>(epoch.data())};
    amqp_basic_properties_t props{};
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
                   AMQP_BASIC_HEADERS_FLAG;
    props.content_type = Bytes(content_type_);
    props.delivery_mode = 2;  // persistent
    props.message_id = Bytes(m.id);
    props.headers = amqp_table_t{2, headers};
    int rc = amqp_basic_publish(conn_, 1, Bytes(exchange_), Bytes(key), 1, 0, &props, Bytes(*data));
    if (rc != AMQP_STATUS_OK) {
      broken_ = "publishing messageId \"" + m.id + "\" to " + Where(key) + " failed: " + amqp_error_string2(rc);
      return;
    }
    credit_ = credit_ > bytes ? credit_ - bytes : 0;
    ++next_tag_;
    ++next_;
    // Read the confirms that came in meanwhile, without waiting, now and then.
    if ((next_ & 255) == 0 || amqp_frames_enqueued(conn_) || amqp_data_in_buffer(conn_)) ReadFrames(0);
  }
}

void RabbitSink::Start(const std::vector<Message> &page, const Budget &budget) {
  // A page in flight that Finish never collected is abandoned: its confirms are ignored.
  page_ = &page;
  budget_ = budget;
  next_ = 0;
  low_ = 0;
  acked_ = nacked_ = 0;
  failure_.clear();
  start_error_.clear();
  confirmed_.assign(page.size(), 0);
  limit_ms_ =
      std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(budget.deadline - Clock::now()).count());
  if (page.empty()) return;
  try {
    // What came while the connection was idle: confirms of an abandoned page, or the broker
    // closing it (a restart). A connection the broker closed is replaced at once.
    if (conn_ != nullptr && broken_.empty()) {
      first_tag_ = next_tag_;
      ReadFrames(0);
    }
    if (conn_ != nullptr && !broken_.empty()) Disconnect();
    if (conn_ == nullptr) Connect(budget_);
    first_tag_ = next_tag_;
    PublishSome(page);
  } catch (const std::exception &e) {  // ConnectionLost; std::bad_alloc; a Render failure
    start_error_ = e.what();
    if (start_error_.empty()) start_error_ = "failed";
  }
}

Outcome RabbitSink::Finish() {
  Outcome out;
  const std::vector<Message> *pending = page_;
  if (pending == nullptr) {
    out.error = Describe("Finish without Start");
    return out;
  }
  const std::vector<Message> &page = *pending;
  std::string problem = start_error_;
  if (problem.empty() && !page.empty()) {
    const Budget &b = budget_;
    try {
      for (;;) {
        PublishSome(page);
        if (!failure_.empty()) {
          problem = failure_;
          break;
        }
        if (acked_ == page.size()) break;  // every message confirmed, whatever came after
        if (!broken_.empty()) {
          problem =
              broken_ + " (" + std::to_string(acked_) + " of " + std::to_string(page.size()) + " messages confirmed)";
          break;
        }
        if (b.cancelled && b.cancelled()) {
          problem = "cancelled while waiting for confirms (" + std::to_string(acked_) + " of " +
                    std::to_string(page.size()) + " received)";
          break;
        }
        auto now = Clock::now();
        if (now >= b.deadline) {
          problem = "timed out after " + std::to_string(limit_ms_) + " ms waiting for confirms (" +
                    std::to_string(acked_) + " of " + std::to_string(page.size()) + " received, " +
                    std::to_string(next_) + " published)";
          broken_ = "timed out";  // a broker that does not answer: connect again next time
          break;
        }
        auto slice = std::min<Clock::duration>(Budget::kCancelCheck, b.deadline - now);
        int ms = static_cast<int>(std::max<int64_t>(1, std::chrono::ceil<std::chrono::milliseconds>(slice).count()));
        if (socket_full_) {
          // The socket's buffer is full: wait briefly for the broker to read (or a confirm).
          struct pollfd p = {fd_, POLLIN, 0};
          if (poll(&p, 1, std::min(ms, 2)) > 0) ReadFrames(0);
          credit_ = 0;  // measure again
          continue;
        }
        ReadFrames(ms);
      }
    } catch (const std::exception &e) {  // std::bad_alloc, a Render failure
      problem = e.what();
      if (problem.empty()) problem = "failed";
    }
  }
  page_ = nullptr;
  if (!problem.empty()) {
    // A nack or a return leaves the channel usable; anything else reconnects on the next page.
    if (!broken_.empty()) Disconnect();
    out.error = Describe(problem);
    return out;
  }
  out.ok = true;
  out.published = static_cast<int64_t>(page.size());
  return out;
}

std::unique_ptr<Sink> Open(const std::string &options_json) { return std::make_unique<RabbitSink>(options_json); }

}  // namespace

extern const SinkType kRabbitSink;
const SinkType kRabbitSink = {"rabbitmq", false, CheckOptions, Open, nullptr};

}  // namespace statesman::sink
