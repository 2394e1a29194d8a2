// Option parsing and socket waits shared by the sinks (see io.hpp).
#include "statesman/sinks/io.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <limits>

#include "statesman/error.hpp"

namespace statesman::sink {

namespace {

[[noreturn]] void Invalid(const char *sink, const std::string &message, std::string hint = {}) {
  throw Error(sqlstate::kInvalidParameterValue, std::string("sink \"") + sink + "\": " + message, std::move(hint));
}

}  // namespace

nlohmann::json ParseOptions(const char *sink, const std::string &options_json, const std::vector<std::string> &known) {
  nlohmann::json options = nlohmann::json::parse(options_json, nullptr, false);
  if (options.is_discarded() || !options.is_object()) Invalid(sink, "sink_options must be a JSON object");
  std::string list;
  for (const std::string &k : known) list += (list.empty() ? "\"" : ", \"") + k + "\"";
  for (auto it = options.begin(); it != options.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end())
      Invalid(sink, "unknown option \"" + it.key() + "\"", std::string("The ") + sink + " sink takes " + list + ".");
  }
  return options;
}

std::optional<std::string> StringOption(const char *sink, const nlohmann::json &options, const char *key) {
  auto it = options.find(key);
  if (it == options.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) Invalid(sink, std::string("option \"") + key + "\" must be a string");
  std::string value = it->get<std::string>();
  if (value.empty()) Invalid(sink, std::string("option \"") + key + "\" must not be empty");
  return value;
}

std::optional<std::string> SecretOption(const char *sink, const nlohmann::json &options, const char *key,
                                        const char *hint) {
  if (auto it = options.find(key); it != options.end() && it->is_null())
    throw Error(sqlstate::kNullValueNotAllowed,
                std::string("sink \"") + sink + "\": option \"" + key + "\" must not be null", hint);
  return StringOption(sink, options, key);
}

void CheckUserPassword(const char *sink, const nlohmann::json &options) {
  bool user = options.contains("user") && options["user"].is_string();
  bool password = options.contains("password") && options["password"].is_string();
  if (user != password)
    Invalid(sink, std::string("option \"") + (user ? "user" : "password") + "\" needs option \"" +
                      (user ? "password" : "user") + "\"");
}

std::optional<int64_t> IntOption(const char *sink, const nlohmann::json &options, const char *key, int64_t min,
                                 int64_t max) {
  auto it = options.find(key);
  if (it == options.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) Invalid(sink, std::string("option \"") + key + "\" must be an integer");
  // A huge unsigned value does not fit int64: treat it as out of range.
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    Invalid(sink, std::string("option \"") + key + "\" must be between " + std::to_string(min) + " and " +
                      std::to_string(max));
  int64_t value = it->get<int64_t>();
  if (value < min || value > max)
    Invalid(sink, std::string("option \"") + key + "\" must be between " + std::to_string(min) + " and " +
                      std::to_string(max) + " (got " + std::to_string(value) + ")");
  return value;
}

WaitResult WaitSocket(int fd, bool for_read, bool for_write, const Budget &budget) {
  for (;;) {
    if (budget.cancelled && budget.cancelled()) return WaitResult::kCancelled;
    auto now = Clock::now();
    if (now >= budget.deadline) return WaitResult::kTimedOut;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(budget.deadline - now);
    int slice = static_cast<int>(std::min<int64_t>(left.count() + 1, Budget::kCancelCheck.count()));
    pollfd p{fd, static_cast<short>((for_read ? POLLIN : 0) | (for_write ? POLLOUT : 0)), 0};
    int rc = poll(&p, 1, slice);
    if (rc > 0) return WaitResult::kReady;  // POLLERR/POLLHUP too: the next read or write says what happened
    if (rc < 0 && errno != EINTR) return WaitResult::kFailed;
  }
}

std::string Redact(std::string text, const std::string &secret) {
  if (secret.empty()) return text;
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 8))
    text.replace(at, secret.size(), "********");
  return text;
}

}  // namespace statesman::sink
