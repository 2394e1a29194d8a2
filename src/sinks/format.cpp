// The "format" option: the statesman message as it is, or CloudEvents 1.0 (see format.hpp).
#include "statesman/sinks/format.hpp"

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "statesman/error.hpp"

namespace statesman::sink {

Format ParseFormat(const std::string &value, const std::string &sink) {
  if (value == "statesman") return Format::kStatesman;
  if (value == "cloudevents") return Format::kCloudEvents;
  std::string prefix = sink.empty() ? std::string() : "sink \"" + sink + "\": ";
  throw Error(sqlstate::kInvalidParameterValue,
              prefix + "option \"format\" must be \"statesman\" or \"cloudevents\" (got \"" + value + "\")",
              "\"statesman\" (the default) sends the statesman.state-change/v1 message; \"cloudevents\" sends it "
              "as a CloudEvents 1.0 event in structured JSON mode.");
}

const char *FormatName(Format f) { return f == Format::kCloudEvents ? "cloudevents" : "statesman"; }

bool Base64Decode(const std::string &in, std::string &out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  size_t n = in.size();
  while (n > 0 && in[n - 1] == '=' && in.size() - n < 2) --n;
  if (n % 4 == 1) return false;
  if (in.size() != n && in.size() % 4 != 0) return false;  // padding only up to a whole quantum
  out.clear();
  out.reserve(n / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    int v = value(in[i]);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  // The bits left over must be zero (a canonical encoding).
  return (acc & ((1u << bits) - 1)) == 0;
}

namespace {

// application/json, or any type ending in +json (application/cloudevents+json, …), with
// parameters (";charset=utf-8") aside, case-insensitive.
bool IsJsonType(const std::string &content_type) {
  std::string t = content_type.substr(0, content_type.find(';'));
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.pop_back();
  size_t start = t.find_first_not_of(" \t");
  t = start == std::string::npos ? std::string() : t.substr(start);
  for (char &c : t) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (t == "application/json") return true;
  return t.size() > 5 && t.compare(t.size() - 5, 5, "+json") == 0 && t.find('/') != std::string::npos;
}

// The field `key` as a string, or "" when absent or not a string.
std::string Text(const nlohmann::json &o, const char *key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A JSON integer (or a string holding one) as decimal text.
std::string Decimal(const nlohmann::json &o, const char *key) {
  auto it = o.find(key);
  if (it == o.end()) return std::string();
  if (it->is_number_unsigned()) return std::to_string(it->get<uint64_t>());
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

}  // namespace

std::string Render(Format f, const Message &m) {
  if (f == Format::kStatesman) return m.json;
  nlohmann::json msg = nlohmann::json::parse(m.json, nullptr, false);
  if (msg.is_discarded() || !msg.is_object()) throw std::runtime_error("message " + m.id + " is not a JSON object");

  nlohmann::ordered_json ce = nlohmann::ordered_json::object();
  ce["specversion"] = "1.0";
  std::string id = Text(msg, "messageId");
  ce["id"] = id.empty() ? m.id : id;
  ce["source"] = "statesman://" + Text(msg, "store");
  std::string operation = Text(msg, "operation");
  ce["type"] = "statesman." + (operation.empty() ? std::string("change") : operation);
  ce["subject"] = Text(msg, "address");
  if (auto it = msg.find("occurredAt"); it != msg.end() && it->is_string()) ce["time"] = *it;
  auto content_type = msg.find("contentType");
  bool has_type = content_type != msg.end() && content_type->is_string();
  if (has_type) ce["datacontenttype"] = *content_type;
  ce["statesmanposition"] = Decimal(msg, "globalPosition");
  ce["statesmanrevision"] = Decimal(msg, "revision");
  ce["statesmanepoch"] = Text(msg, "epoch");

  auto payload = msg.find("payload");
  std::string data;  // the payload's JSON text, as it was written, when it goes inline
  if (payload != msg.end() && payload->is_string()) {
    const std::string &b64 = payload->get_ref<const std::string &>();
    bool inlined = false;
    if (has_type && IsJsonType(content_type->get<std::string>()) && Base64Decode(b64, data)) {
      // A UTF-8 byte order mark would not be JSON in the middle of the event.
      if (data.compare(0, 3, "\xEF\xBB\xBF") == 0) data.erase(0, 3);
      inlined = nlohmann::json::accept(data);
    }
    if (!inlined) {
      data.clear();
      ce["data_base64"] = b64;
    }
  }
  std::string out = ce.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!data.empty()) {
    // The payload goes in byte for byte rather than re-serialized, so numbers beyond 64 bits
    // and the payload's own spelling survive.
    out.pop_back();  // '}'
    out += ",\"data\":";
    out += data;
    out += '}';
  }
  return out;
}

}  // namespace statesman::sink
