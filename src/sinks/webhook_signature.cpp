// The `webhook` sink's signature, key, batch id and Retry-After (see webhook.hpp).
#include "statesman/sinks/webhook.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <ctime>

#include "statesman/sinks/format.hpp"

namespace statesman::sink::webhook {

std::optional<std::string> SecretKey(const std::string &secret) {
  constexpr const char *kPrefix = "whsec_";
  if (secret.rfind(kPrefix, 0) != 0) return secret;
  std::string key;
  if (!Base64Decode(secret.substr(std::strlen(kPrefix)), key) || key.empty()) return std::nullopt;
  return key;
}

std::string Signature(const std::string &key, const std::string &id, const std::string &timestamp,
                      const std::string &body) {
  std::string content;
  content.reserve(id.size() + timestamp.size() + body.size() + 2);
  content.append(id).append(1, '.').append(timestamp).append(1, '.').append(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char *>(content.data()), content.size(), mac, &mac_len) == nullptr)
    return std::string();
  unsigned char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  int n = EVP_EncodeBlock(b64, mac, static_cast<int>(mac_len));
  return "v1," + std::string(reinterpret_cast<const char *>(b64), static_cast<size_t>(n));
}

std::string BatchId(int64_t first_position, int64_t last_position) {
  return "statesman-batch-" + std::to_string(first_position) + "-" + std::to_string(last_position);
}

std::optional<int64_t> RetryAfterMillis(const std::string &raw, std::time_t now) {
  constexpr int64_t kMaxSeconds = 86400;
  std::string value = raw;
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.erase(0, 1);
  if (value.empty()) return std::nullopt;
  bool digits = true;
  for (char c : value) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits) {
    if (value.size() > 9) return kMaxSeconds * 1000;
    return std::min<int64_t>(std::stoll(value), kMaxSeconds) * 1000;
  }
  // An HTTP-date (RFC 9110 IMF-fixdate): "Sun, 06 Nov 1994 08:49:37 GMT".
  std::tm tm{};
  const char *end = strptime(value.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  std::time_t when = timegm(&tm);
  if (when == static_cast<std::time_t>(-1)) return std::nullopt;
  int64_t seconds = static_cast<int64_t>(when) - static_cast<int64_t>(now);
  if (seconds < 0) seconds = 0;
  return std::min<int64_t>(seconds, kMaxSeconds) * 1000;
}

}  // namespace statesman::sink::webhook
