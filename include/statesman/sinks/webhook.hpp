// The parts of the `webhook` sink (src/sinks/webhook.cpp) that need no server: the Standard
// Webhooks signature, the secret's key, a batch's id, the Retry-After header. Plain C++ (no
// PostgreSQL headers); the HMAC is OpenSSL's libcrypto. Thread-safe.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>

namespace statesman::sink::webhook {

// The key bytes of the "secret" option: after the prefix "whsec_", the base64 that follows
// (decoded; nullopt when it is not base64 or decodes to nothing); any other text is used as it is.
std::optional<std::string> SecretKey(const std::string &secret);

// The "webhook-signature" header's value: "v1," + base64(HMAC-SHA256(key, id "." timestamp "." body)).
std::string Signature(const std::string &key, const std::string &id, const std::string &timestamp,
                      const std::string &body);

// The "webhook-id" of a batch (batch_size > 1): made from its first and last globalPosition, so
// that every retry of the same batch carries the same id.
std::string BatchId(int64_t first_position, int64_t last_position);

// The wait a "Retry-After" header asks for, in milliseconds: delay-seconds, or an HTTP-date
// (against `now`); nullopt when the value is neither. A date in the past is 0. At most a day.
std::optional<int64_t> RetryAfterMillis(const std::string &value, std::time_t now);

}  // namespace statesman::sink::webhook
