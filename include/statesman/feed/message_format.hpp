// Pieces of the statesman.state-change/v1 wire message (docs/design.md §5) that need no PostgreSQL.
// Pure C++, no allocation, no exceptions, thread-safe (sink threads may use them too).
#pragma once

#include <cstddef>
#include <cstdint>

namespace statesman::store {

inline constexpr const char *kMessageSchema = "statesman.state-change/v1";

// Bytes Base64Encode writes for `length` input bytes (no terminator).
constexpr std::size_t Base64Length(std::size_t length) { return (length + 2) / 3 * 4; }

// Standard base64 (RFC 4648, padded, no line breaks) into out[0 .. Base64Length(length)).
void Base64Encode(const unsigned char *data, std::size_t length, char *out) noexcept;

// Formats microseconds since 2000-01-01 00:00:00 UTC (PostgreSQL's timestamptz) as
// "YYYY-MM-DDTHH:MM:SS.ffffffZ" into out (at least kUtcTextSize bytes, NUL-terminated).
inline constexpr std::size_t kUtcTextSize = 48;
void FormatUtcMicros(int64_t micros_since_2000, char *out) noexcept;

// Formats 16 UUID bytes as the canonical 36-character text into out (at least 37 bytes).
void FormatUuid(const unsigned char *bytes, char *out) noexcept;

}  // namespace statesman::store
