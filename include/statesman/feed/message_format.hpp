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
// "YYYY-MM-DDTHH:MM:SS.ffffffZ" into out (at least kUtcTextSize bytes, NUL-terminated); returns
// the length written (27, more for a year past 9999 or before year 0).
inline constexpr std::size_t kUtcTextSize = 48;
std::size_t FormatUtcMicros(int64_t micros_since_2000, char *out) noexcept;

// Formats 16 UUID bytes as the canonical 36-character text into out (at least 37 bytes).
void FormatUuid(const unsigned char *bytes, char *out) noexcept;

// ---- How large a message can be (src/feed/message.cpp builds it as one jsonb object) ----
//
// jsonb limits the contents of one container to JENTRY_OFFLENMASK bytes (2^28 - 1; message.cpp
// asserts the two agree): the message's header, its 24 keys' entries, the key names and every
// value, base64 payload included. A record whose message would not fit can never be read from
// the feed, so the append functions refuse it (MessageFits) before it is written.
inline constexpr std::size_t kMaxMessageBytes = 0x0FFFFFFF;

// The most an outbox's or a root's envelope fallback (fingerprint, content type) adds: both are
// limited to this many bytes when they are declared.
inline constexpr std::size_t kMaxEnvelopeBytes = 1024;

// What every message takes besides the record's own variable fields and its payload, at most:
// the object header (4) and 24 key/value entries (8 each), the key names (202 bytes), "schema"'s
// value (25), the epoch (36), occurredAt (at most kUtcTextSize - 1), the store name (at most 63)
// and what messageId adds to the address (the store name, '/', '#' and at most 20 digits), three
// numbers (revision, globalPosition, schemaVersion: a numeric of at most 16 bytes, 3 bytes of
// alignment each) and the alignment of the metadata object (3).
inline constexpr std::size_t kMessageFixedBytes =
    4 + 24 * 8 + 202 + 25 + 36 + (kUtcTextSize - 1) + 63 + (63 + 1 + 1 + 20) + 3 * (16 + 3) + 3;

// The sizes of a record's fields as the message carries them. Text fields count their bytes;
// an absent fingerprint or content type counts as the largest fallback; metadata counts its
// jsonb contents (the varlena's size less its header).
struct MessageFieldBytes {
  std::size_t verbatim = 0;  // address (twice: in address and messageId), root, path, partition,
                             // operation, status, valueType, source, serializerId, correlationId,
                             // causationId, error, fingerprint, contentType, metadata
  std::size_t payload = 0;   // the payload's bytes (base64-encoded in the message)
};

// An upper bound of the message's jsonb contents, in bytes.
constexpr std::size_t MessageBytesBound(const MessageFieldBytes &f) {
  return kMessageFixedBytes + f.verbatim + Base64Length(f.payload);
}

// True when the message certainly fits in one jsonb value.
constexpr bool MessageFits(const MessageFieldBytes &f) {
  return f.verbatim <= kMaxMessageBytes && f.payload <= kMaxMessageBytes && MessageBytesBound(f) <= kMaxMessageBytes;
}

// The largest payload a record with these other fields can carry (0 when none fits).
constexpr std::size_t MaxPayloadBytes(std::size_t verbatim) {
  if (kMessageFixedBytes + verbatim > kMaxMessageBytes) return 0;
  return (kMaxMessageBytes - kMessageFixedBytes - verbatim) / 4 * 3;
}

}  // namespace statesman::store
