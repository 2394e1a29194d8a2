// The `webhook` sink (HTTP POST, libcurl): see docs/design.md §6 and docs/sinks.md "webhook".
//
// A page goes out as one POST per message, or, with batch_size > 1, as POSTs of JSON arrays of
// up to batch_size messages, in globalPosition order, one after the other on one connection
// (HTTP/1.1 keep-alive: the sink keeps one libcurl handle, and so its connection, across pages).
// Each request carries the Standard Webhooks headers: webhook-id (the messageId, or for a batch
// an id made from its first and last positions, the same on every retry of that batch),
// webhook-timestamp (seconds since the epoch, of this attempt) and, with a "secret",
// webhook-signature ("v1," + base64 HMAC-SHA256 of "{id}.{timestamp}.{body}"). A 2xx answer
// accepts the request's messages; anything else fails the page (the cursor stays, the whole
// page is sent again later, so receivers dedup on webhook-id): 429 and 5xx with the answer's
// Retry-After passed to the dispatcher (Outcome::retry_after_ms), other statuses with the status
// and a short excerpt of the answer's body in the error.
//
// The transfer runs on the dispatcher's own thread through a curl multi handle that it drives
// in waits of at most Budget::kCancelCheck, so no call outlives the Budget's deadline and a
// cancel is seen within 100 ms; libcurl is told never to use signals (CURLOPT_NOSIGNAL), and
// its threaded resolver's threads start with every signal blocked. libcurl never prints: its
// errors go to an error buffer, and every error text has the url's user info and query, the
// secret and every header value replaced by "********".
//
// Not thread-safe: a WebhookSink is used by one thread at a time (its dispatcher).
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <ctime>
#include <mutex>

#include "statesman/error.hpp"
#include "statesman/sinks/format.hpp"
#include "statesman/sinks/io.hpp"
#include "statesman/sinks/webhook.hpp"

namespace statesman::sink {
namespace {

constexpr const char *kName = "webhook";
constexpr int64_t kMaxBatch = 10000;
constexpr size_t kExcerpt = 200;    // of an answer's body, in an error
constexpr size_t kBodyKept = 4096;  // of an answer's body, read (the rest is dropped)

// Header names the sink sets itself, or that would break the request.
constexpr const char *kReservedHeaders[] = {"webhook-id",        "webhook-timestamp", "webhook-signature",
                                            "content-type",      "content-length",    "host",
                                            "transfer-encoding", "connection",        "expect"};

// ---- The url --------------------------------------------------------------------------------

// A url as it may be shown: the user info replaced by "********", the query and fragment
// dropped (they may carry a token); and the parts that must never be shown.
struct UrlParts {
  std::string scheme;  // lower-cased
  std::string host;    // as written (with the port)
  std::string shown;
  std::vector<std::string> secrets;
};

UrlParts SplitUrl(const std::string &url) {
  UrlParts out;
  size_t sep = url.find("://");
  size_t host = sep == std::string::npos ? 0 : sep + 3;
  if (sep != std::string::npos) {
    out.scheme = url.substr(0, sep);
    for (char &c : out.scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  size_t end = url.find_first_of("?#", host);
  std::string rest = url.substr(host, end == std::string::npos ? std::string::npos : end - host);
  if (end != std::string::npos) out.secrets.push_back(url.substr(end + 1));
  size_t slash = rest.find('/');
  size_t at = rest.rfind('@', slash == std::string::npos ? std::string::npos : slash);
  if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
    std::string info = rest.substr(0, at);
    out.secrets.push_back(info);
    if (size_t colon = info.find(':'); colon != std::string::npos && colon + 1 < info.size())
      out.secrets.push_back(info.substr(colon + 1));
    rest.replace(0, at, "********");
    slash = rest.find('/');
    out.host = rest.substr(std::strlen("********@"),
                           slash == std::string::npos ? std::string::npos : slash - std::strlen("********@"));
  } else {
    out.host = rest.substr(0, slash);
  }
  out.shown = (sep == std::string::npos ? std::string() : url.substr(0, host)) + rest +
              (end != std::string::npos ? "?********" : "");
  return out;
}

bool IsTokenChar(unsigned char c) { return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr; }

// ---- Options --------------------------------------------------------------------------------

[[noreturn]] void Invalid(const std::string &what, const std::string &hint = {}) {
  throw Error(sqlstate::kInvalidParameterValue, std::string("sink \"webhook\": ") + what, hint);
}

std::string CheckOptions(const std::string &options_json) {
  nlohmann::json o = ParseOptions(kName, options_json,
                                  {"url", "secret", "headers", "batch_size", "timeout_ms", "format", "tls_verify"});
  nlohmann::json out = nlohmann::json::object();
  std::vector<Error> errors;
  auto check = [&](auto &&fn) {
    try {
      fn();
    } catch (const Error &e) {
      errors.push_back(e);
    }
  };
  check([&] {
    auto url = StringOption(kName, o, "url");
    if (!url)
      Invalid("option \"url\" is required",
              "The receiver's endpoint, such as \"https://hooks.example.com/statesman\".");
    UrlParts parts = SplitUrl(*url);
    if (parts.scheme != "http" && parts.scheme != "https")
      Invalid("option \"url\" must be an http:// or https:// url (got \"" + parts.shown + "\")");
    for (char c : *url)
      if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c)))
        Invalid("option \"url\" holds whitespace or a control character (got \"" + parts.shown + "\")");
    if (parts.host.empty() || parts.host.front() == ':')
      Invalid("option \"url\" has no host (got \"" + parts.shown + "\")");
    out["url"] = *url;
  });
  check([&] {
    if (auto v = SecretOption(kName, o, "secret", "Leave the option out to send unsigned requests.")) {
      if (!webhook::SecretKey(*v))
        Invalid("option \"secret\" starts with \"whsec_\" but what follows is not base64 of at least one byte",
                "A secret \"whsec_…\" is base64 after the prefix (the key's bytes); any other text is the key itself.");
      out["secret"] = *v;
    }
  });
  check([&] {
    auto it = o.find("headers");
    if (it == o.end() || it->is_null()) return;
    if (!it->is_object())
      Invalid("option \"headers\" must be a JSON object of header names and string values",
              "Such as {\"Authorization\": \"Bearer …\"}.");
    for (auto h = it->begin(); h != it->end(); ++h) {
      const std::string &name = h.key();
      bool token = !name.empty();
      for (char c : name) token = token && IsTokenChar(static_cast<unsigned char>(c));
      if (!token) Invalid("option \"headers\": \"" + name + "\" is not a header name");
      std::string lower = name;
      for (char &c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      for (const char *r : kReservedHeaders)
        if (lower == r) Invalid("option \"headers\": \"" + name + "\" is set by the sink itself and cannot be given");
      // The value is never echoed: it may be a credential.
      if (!h->is_string()) Invalid("option \"headers\": the value of \"" + name + "\" must be a string");
      const std::string &value = h->get_ref<const std::string &>();
      for (char c : value)
        if (c == '\r' || c == '\n' || c == '\0')
          Invalid("option \"headers\": the value of \"" + name + "\" holds a line break or NUL");
    }
    if (!it->empty()) out["headers"] = *it;
  });
  check([&] { out["batch_size"] = IntOption(kName, o, "batch_size", 1, kMaxBatch).value_or(1); });
  check([&] {
    if (auto t = IntOption(kName, o, "timeout_ms", 1, 3600000)) out["timeout_ms"] = *t;
  });
  check([&] {
    auto it = o.find("format");
    if (it != o.end() && !it->is_string() && !it->is_null()) Invalid("option \"format\" must be a string");
    std::string f = it != o.end() && it->is_string() ? it->get<std::string>() : "statesman";
    out["format"] = FormatName(ParseFormat(f, kName));
  });
  check([&] {
    auto it = o.find("tls_verify");
    if (it != o.end() && !it->is_boolean() && !it->is_null())
      Invalid("option \"tls_verify\" must be true or false",
              "false turns off the check of an https:// receiver's certificate and host name.");
    out["tls_verify"] = it != o.end() && it->is_boolean() ? it->get<bool>() : true;
  });
  if (errors.size() == 1) throw errors[0];
  if (!errors.empty()) {
    std::string message = "sink \"webhook\": " + std::to_string(errors.size()) + " options are invalid: ";
    const char *state = errors[0].Sqlstate();
    for (size_t i = 0; i < errors.size(); ++i) {
      std::string m = errors[i].what();
      if (m.rfind("sink \"webhook\": ", 0) == 0) m.erase(0, std::strlen("sink \"webhook\": "));
      message += (i ? "; " : "") + m;
    }
    throw Error(state, message);
  }
  return out.dump();
}

// ---- libcurl ------------------------------------------------------------------------------

bool CurlReady() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] {
    SignalsBlocked blocked;
    ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  });
  return ok;
}

// What one answer said (filled by libcurl's callbacks, on this thread).
struct Answer {
  std::string body;  // the first kBodyKept bytes
  std::optional<int64_t> retry_after_ms;
};

// Called from C: nothing may be thrown out of them.
size_t OnBody(char *data, size_t size, size_t n, void *closure) noexcept {
  auto *a = static_cast<Answer *>(closure);
  size_t len = size * n;
  try {
    if (a->body.size() < kBodyKept) a->body.append(data, std::min(len, kBodyKept - a->body.size()));
  } catch (...) {
  }
  return len;
}

size_t OnHeader(char *data, size_t size, size_t n, void *closure) noexcept {
  auto *a = static_cast<Answer *>(closure);
  size_t len = size * n;
  try {
    std::string line(data, len);
    // A new response (after a 1xx): forget the previous one's header.
    if (line.rfind("HTTP/", 0) == 0) a->retry_after_ms.reset();
    constexpr const char *kRetryAfter = "retry-after:";
    if (line.size() > std::strlen(kRetryAfter) && strncasecmp(line.c_str(), kRetryAfter, std::strlen(kRetryAfter)) == 0)
      a->retry_after_ms = webhook::RetryAfterMillis(line.substr(std::strlen(kRetryAfter)), std::time(nullptr));
  } catch (...) {
  }
  return len;
}

// The answer's body as an error may show it: printable ASCII, at most kExcerpt bytes.
std::string Excerpt(const std::string &body) {
  std::string out;
  for (char c : body) {
    if (out.size() >= kExcerpt) return out + "…";
    unsigned char u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : ' ';
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// ---- The sink -------------------------------------------------------------------------------

class WebhookSink : public Sink {
 public:
  explicit WebhookSink(const std::string &options_json) {
    nlohmann::json o = nlohmann::json::parse(options_json);
    url_ = o.value("url", "");
    secret_ = o.value("secret", "");
    if (!secret_.empty()) key_ = webhook::SecretKey(secret_).value_or(secret_);
    batch_size_ = static_cast<size_t>(std::clamp<int64_t>(o.value("batch_size", int64_t{1}), 1, kMaxBatch));
    format_ = ParseFormat(o.value("format", "statesman"), kName);
    tls_verify_ = o.value("tls_verify", true);
    UrlParts parts = SplitUrl(url_);
    secrets_ = parts.secrets;
    if (auto h = o.find("headers"); h != o.end() && h->is_object())
      for (auto it = h->begin(); it != h->end(); ++it) {
        fixed_headers_.push_back(it.key() + ": " + it->get<std::string>());
        secrets_.push_back(it->get<std::string>());
      }
    prefix_ = "webhook sink " + parts.shown + ": ";
    content_type_ = format_ == Format::kCloudEvents
                        ? (batch_size_ > 1 ? "application/cloudevents-batch+json" : "application/cloudevents+json")
                        : "application/json";
  }

  WebhookSink(const WebhookSink &) = delete;
  WebhookSink &operator=(const WebhookSink &) = delete;

  ~WebhookSink() override {
    EndTransfer();
    if (multi_ != nullptr) curl_multi_cleanup(multi_);
    if (easy_ != nullptr) curl_easy_cleanup(easy_);
  }

  Outcome Publish(const std::vector<Message> &page, const Budget &budget) override {
    Start(page, budget);
    return Finish();
  }
  void Start(const std::vector<Message> &page, const Budget &budget) override;
  Outcome Finish() override;

 private:
  void Open();
  void BeginRequest();
  // Drives the transfer until it is done; the error, or "" for a 2xx.
  std::string Complete(int64_t *retry_after_ms);
  void EndTransfer();
  std::string Describe(const std::string &what) const {
    std::string text = Redact(prefix_ + what, secret_);
    if (!key_.empty() && key_ != secret_) text = Redact(std::move(text), key_);
    for (const std::string &s : secrets_) text = Redact(std::move(text), s);
    return text;
  }
  int64_t LeftMillis() const {
    return std::chrono::ceil<std::chrono::milliseconds>(budget_.deadline - Clock::now()).count();
  }
  // "messages 1-100 of 1000, webhook-id …": which request of the page.
  std::string Which() const {
    std::string which = batch_end_ - next_ == 1
                            ? "message " + std::to_string(next_ + 1)
                            : "messages " + std::to_string(next_ + 1) + "-" + std::to_string(batch_end_);
    return which + " of " + std::to_string(page_->size()) + ", webhook-id \"" + id_ + "\"";
  }

  std::string url_, secret_, key_, prefix_, content_type_;
  std::vector<std::string> secrets_;  // never shown: url parts, header values
  std::vector<std::string> fixed_headers_;
  size_t batch_size_ = 1;
  Format format_ = Format::kStatesman;
  bool tls_verify_ = true;

  CURLM *multi_ = nullptr;
  CURL *easy_ = nullptr;
  char errbuf_[CURL_ERROR_SIZE] = {};

  // The page in hand (Start … Finish).
  const std::vector<Message> *page_ = nullptr;
  Budget budget_;
  int64_t limit_ms_ = 0;
  std::string start_error_;
  size_t next_ = 0, batch_end_ = 0;  // the request in flight: page_[next_, batch_end_)
  bool in_transfer_ = false;
  std::string id_, body_;
  curl_slist *headers_ = nullptr;
  Answer answer_;

  // What the receiver accepted of a page that then failed: the page's first position and the
  // last position of its accepted requests. The retry of that page (same first position) skips
  // them, counting them as deduplicated, so that a receiver that fails every few requests still
  // sees a long page through.
  struct Accepted {
    int64_t first = 0, through = 0;
  };
  std::optional<Accepted> accepted_;
  size_t skipped_ = 0;
};

void WebhookSink::Open() {
  if (easy_ != nullptr) return;
  if (!CurlReady()) throw std::runtime_error("libcurl cannot be initialized");
  multi_ = curl_multi_init();
  easy_ = curl_easy_init();
  if (multi_ == nullptr || easy_ == nullptr) throw std::runtime_error("libcurl cannot create a handle");
  bool ok = true;
  auto set = [&](CURLcode c) { ok = ok && c == CURLE_OK; };
  set(curl_easy_setopt(easy_, CURLOPT_URL, url_.c_str()));
  set(curl_easy_setopt(easy_, CURLOPT_NOSIGNAL, 1L));
  set(curl_easy_setopt(easy_, CURLOPT_VERBOSE, 0L));
  set(curl_easy_setopt(easy_, CURLOPT_NOPROGRESS, 1L));
  set(curl_easy_setopt(easy_, CURLOPT_ERRORBUFFER, errbuf_));
  set(curl_easy_setopt(easy_, CURLOPT_PROTOCOLS_STR, "http,https"));
  set(curl_easy_setopt(easy_, CURLOPT_FOLLOWLOCATION, 0L));
  set(curl_easy_setopt(easy_, CURLOPT_POST, 1L));
  set(curl_easy_setopt(easy_, CURLOPT_SSL_VERIFYPEER, tls_verify_ ? 1L : 0L));
  set(curl_easy_setopt(easy_, CURLOPT_SSL_VERIFYHOST, tls_verify_ ? 2L : 0L));
  set(curl_easy_setopt(easy_, CURLOPT_TCP_KEEPALIVE, 1L));
  set(curl_easy_setopt(easy_, CURLOPT_TCP_NODELAY, 1L));
  set(curl_easy_setopt(easy_, CURLOPT_USERAGENT, "statesman/" STATESMAN_VERSION));
  set(curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, OnBody));
  set(curl_easy_setopt(easy_, CURLOPT_WRITEDATA, &answer_));
  set(curl_easy_setopt(easy_, CURLOPT_HEADERFUNCTION, OnHeader));
  set(curl_easy_setopt(easy_, CURLOPT_HEADERDATA, &answer_));
  // One connection, kept across pages (HTTP/1.1 keep-alive).
  ok = ok && curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS, 1L) == CURLM_OK;
  if (!ok) {
    curl_multi_cleanup(multi_);
    curl_easy_cleanup(easy_);
    multi_ = nullptr;
    easy_ = nullptr;
    throw std::runtime_error("libcurl refuses the sink's settings");
  }
}

// Builds the request for page_[next_ …] and starts it (it connects and sends what it can).
void WebhookSink::BeginRequest() {
  const std::vector<Message> &page = *page_;
  batch_end_ = std::min(page.size(), next_ + batch_size_);
  body_.clear();
  if (batch_size_ > 1) body_ += '[';
  for (size_t i = next_; i < batch_end_; ++i) {
    if (i > next_) body_ += ',';
    body_ += format_ == Format::kStatesman ? page[i].json : Render(format_, page[i]);
  }
  if (batch_size_ > 1) body_ += ']';
  id_ = batch_size_ > 1 ? webhook::BatchId(page[next_].position, page[batch_end_ - 1].position) : page[next_].id;
  std::string timestamp = std::to_string(static_cast<int64_t>(std::time(nullptr)));

  if (headers_ != nullptr) curl_slist_free_all(headers_);
  headers_ = nullptr;
  auto add = [&](const std::string &h) {
    curl_slist *l = curl_slist_append(headers_, h.c_str());
    if (l == nullptr) throw std::bad_alloc();
    headers_ = l;
  };
  add("Content-Type: " + content_type_);
  add("Expect:");  // no 100-continue round trip
  add("webhook-id: " + id_);
  add("webhook-timestamp: " + timestamp);
  if (!key_.empty()) add("webhook-signature: " + webhook::Signature(key_, id_, timestamp, body_));
  for (const std::string &h : fixed_headers_) add(h);

  int64_t left = std::max<int64_t>(LeftMillis(), 1);
  answer_ = Answer();
  errbuf_[0] = '\0';
  bool ok = curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, headers_) == CURLE_OK &&
            curl_easy_setopt(easy_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body_.size())) == CURLE_OK &&
            curl_easy_setopt(easy_, CURLOPT_POSTFIELDS, body_.data()) == CURLE_OK &&
            curl_easy_setopt(easy_, CURLOPT_TIMEOUT_MS, static_cast<long>(left)) == CURLE_OK &&
            curl_easy_setopt(easy_, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(left)) == CURLE_OK;
  if (!ok) throw std::runtime_error("libcurl refuses the request's settings");
  if (curl_multi_add_handle(multi_, easy_) != CURLM_OK) throw std::runtime_error("libcurl cannot start the request");
  in_transfer_ = true;
  int running = 0;
  SignalsBlocked blocked;
  curl_multi_perform(multi_, &running);
}

void WebhookSink::EndTransfer() {
  if (in_transfer_) curl_multi_remove_handle(multi_, easy_);  // an unfinished one closes its connection
  in_transfer_ = false;
  if (headers_ != nullptr) curl_slist_free_all(headers_);
  headers_ = nullptr;
}

std::string WebhookSink::Complete(int64_t *retry_after_ms) {
  CURLcode result = CURLE_OK;
  for (;;) {
    int running = 0;
    CURLMcode mc;
    {
      SignalsBlocked blocked;
      mc = curl_multi_perform(multi_, &running);
    }
    if (mc != CURLM_OK) {
      EndTransfer();
      return std::string("libcurl failed: ") + curl_multi_strerror(mc);
    }
    bool done = false;
    int queued = 0;
    while (CURLMsg *m = curl_multi_info_read(multi_, &queued))
      if (m->msg == CURLMSG_DONE && m->easy_handle == easy_) {
        done = true;
        result = m->data.result;
      }
    if (done) break;
    if (budget_.cancelled && budget_.cancelled()) {
      EndTransfer();
      return "cancelled while waiting for the answer to " + Which();
    }
    int64_t left = LeftMillis();
    if (left <= 0) {
      EndTransfer();
      return "timed out after " + std::to_string(limit_ms_) + " ms waiting for the answer to " + Which();
    }
    int numfds = 0;
    curl_multi_poll(multi_, nullptr, 0, static_cast<int>(std::min<int64_t>(left, Budget::kCancelCheck.count())),
                    &numfds);
  }
  long status = 0;
  curl_easy_getinfo(easy_, CURLINFO_RESPONSE_CODE, &status);
  EndTransfer();
  if (result != CURLE_OK) {
    if (result == CURLE_OPERATION_TIMEDOUT)
      return "timed out after " + std::to_string(limit_ms_) + " ms waiting for the answer to " + Which();
    std::string why = errbuf_[0] != '\0' ? errbuf_ : curl_easy_strerror(result);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return "POST of " + Which() + " failed: " + why;
  }
  if (status >= 200 && status < 300) return std::string();
  std::string excerpt = Excerpt(answer_.body);
  std::string text = "POST of " + Which() + " answered HTTP " + std::to_string(status);
  if (status == 429 || status >= 500) {
    if (answer_.retry_after_ms) {
      *retry_after_ms = *answer_.retry_after_ms;
      text += " (Retry-After " + std::to_string(*answer_.retry_after_ms) + " ms)";
    }
  }
  if (!excerpt.empty()) text += ": " + excerpt;
  return text;
}

void WebhookSink::Start(const std::vector<Message> &page, const Budget &budget) {
  EndTransfer();  // a Start without its Finish is abandoned
  page_ = &page;
  budget_ = budget;
  next_ = batch_end_ = 0;
  skipped_ = 0;
  start_error_.clear();
  limit_ms_ = std::max<int64_t>(0, LeftMillis());
  if (page.empty()) return;
  if (accepted_ && accepted_->first == page.front().position)
    while (next_ < page.size() && page[next_].position <= accepted_->through) ++next_;
  accepted_.reset();
  skipped_ = next_;
  if (next_ == page.size()) return;
  try {
    Open();
    BeginRequest();
  } catch (const std::exception &e) {  // std::bad_alloc, a Render failure, libcurl
    EndTransfer();
    start_error_ = e.what();
    if (start_error_.empty()) start_error_ = "failed";
  }
}

Outcome WebhookSink::Finish() {
  Outcome out;
  const std::vector<Message> *pending = page_;
  if (pending == nullptr) {
    out.error = Describe("Finish without Start");
    return out;
  }
  if (!start_error_.empty()) {
    accepted_.reset();
    page_ = nullptr;
    out.error = Describe(start_error_);
    return out;
  }
  std::string problem;
  try {
    while (next_ < pending->size()) {
      if (!in_transfer_) BeginRequest();
      problem = Complete(&out.retry_after_ms);
      if (!problem.empty()) break;
      out.published += static_cast<int64_t>(batch_end_ - next_);
      next_ = batch_end_;
    }
  } catch (const std::exception &e) {
    problem = e.what();
    if (problem.empty()) problem = "failed";
  }
  EndTransfer();
  page_ = nullptr;
  if (!problem.empty()) {
    if (next_ > 0) accepted_ = Accepted{pending->front().position, (*pending)[next_ - 1].position};
    out.published = 0;
    out.error = Describe(problem);
    return out;
  }
  out.ok = true;
  out.deduplicated = static_cast<int64_t>(skipped_);
  return out;
}

std::unique_ptr<Sink> Open(const std::string &options_json) { return std::make_unique<WebhookSink>(options_json); }

}  // namespace

extern const SinkType kWebhookSink;
const SinkType kWebhookSink = {"webhook", false, CheckOptions, Open, nullptr};

}  // namespace statesman::sink
