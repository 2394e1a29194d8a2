// Pieces of the wire message that need no server (src/feed/message_format.cpp): base64 of the
// payload bytes, the UTC timestamp text, the UUID text.
#include "statesman/feed/message_format.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#include "tap.hpp"

using statesman::store::Base64Encode;
using statesman::store::Base64Length;
using statesman::store::FormatUtcMicros;
using statesman::store::FormatUuid;
using statesman::store::kUtcTextSize;

// Encodes into a buffer filled with '#', so bytes written past Base64Length show.
static std::string Base64(const std::string &in) {
  char out[64];
  std::memset(out, '#', sizeof out);
  Base64Encode(reinterpret_cast<const unsigned char *>(in.data()), in.size(), out);
  return std::string(out, Base64Length(in.size()) + 1);  // one byte past the end: still '#'
}

// The text, checked against the length FormatUtcMicros returns.
static std::string Utc(int64_t micros) {
  char out[kUtcTextSize];
  std::size_t length = FormatUtcMicros(micros, out);
  if (length != std::strlen(out)) return "length " + std::to_string(length) + " for " + out;
  return out;
}

// Base64 bit by bit, the reference for the table-driven encoder.
static std::string Base64Reference(const std::string &in) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t bits = 0;
  int nbits = 0;
  for (unsigned char c : in) {
    bits = (bits << 8) | c;
    nbits += 8;
    while (nbits >= 6) {
      out += kAlphabet[(bits >> (nbits - 6)) & 63];
      nbits -= 6;
    }
  }
  if (nbits > 0) out += kAlphabet[(bits << (6 - nbits)) & 63];
  while (out.size() % 4 != 0) out += '=';
  return out;
}

int main() {
  // RFC 4648, section 10.
  CHECK_EQ(Base64(""), std::string("#"), "base64 of \"\" is empty (RFC 4648)");
  CHECK_EQ(Base64("f"), std::string("Zg==#"), "base64 of \"f\" (RFC 4648)");
  CHECK_EQ(Base64("fo"), std::string("Zm8=#"), "base64 of \"fo\" (RFC 4648)");
  CHECK_EQ(Base64("foo"), std::string("Zm9v#"), "base64 of \"foo\" (RFC 4648)");
  CHECK_EQ(Base64("foob"), std::string("Zm9vYg==#"), "base64 of \"foob\" (RFC 4648)");
  CHECK_EQ(Base64("fooba"), std::string("Zm9vYmE=#"), "base64 of \"fooba\" (RFC 4648)");
  CHECK_EQ(Base64("foobar"), std::string("Zm9vYmFy#"), "base64 of \"foobar\" (RFC 4648)");
  CHECK_EQ(Base64(std::string("\xfb\xff\xbf", 3)), std::string("+/+/#"),
           "base64 uses the standard alphabet's + and / (not base64url)");
  CHECK_EQ(Base64(std::string("\0\0\0\0", 4)), std::string("AAAAAA==#"), "base64 of NUL bytes");
  {
    // Every 12-bit group in every position of a 3-byte block: all 2^24 blocks would be slow, so
    // each byte value in each of the three places, next to bytes that set the other bits.
    std::string all;
    for (int b = 0; b < 256; ++b)
      for (unsigned char other : {0x00, 0x5a, 0xa5, 0xff}) {
        all += static_cast<char>(b), all += static_cast<char>(other), all += static_cast<char>(other ^ 0x3c);
        all += static_cast<char>(other), all += static_cast<char>(b), all += static_cast<char>(other ^ 0xc3);
        all += static_cast<char>(other ^ 0x0f), all += static_cast<char>(other), all += static_cast<char>(b);
      }
    std::string encoded(Base64Length(all.size()), '#');
    Base64Encode(reinterpret_cast<const unsigned char *>(all.data()), all.size(), encoded.data());
    CHECK_EQ(encoded, Base64Reference(all), "base64 of every byte value in every place of a block, as the reference");
    for (std::size_t tail = 1; tail <= 5; ++tail) {
      std::string part = all.substr(0, all.size() - tail);
      std::string out(Base64Length(part.size()), '#');
      Base64Encode(reinterpret_cast<const unsigned char *>(part.data()), part.size(), out.data());
      CHECK_EQ(out, Base64Reference(part), "base64 of a length that is not a multiple of 3, as the reference");
    }
  }
  CHECK_EQ(Base64Length(0), std::size_t{0}, "Base64Length(0)");
  CHECK_EQ(Base64Length(1), std::size_t{4}, "Base64Length pads 1 byte to 4");
  CHECK_EQ(Base64Length(3), std::size_t{4}, "Base64Length of 3 bytes");
  CHECK_EQ(Base64Length(4), std::size_t{8}, "Base64Length of 4 bytes");

  // Microseconds since 2000-01-01 00:00:00 UTC (PostgreSQL's epoch).
  CHECK_EQ(Utc(0), std::string("2000-01-01T00:00:00.000000Z"), "FormatUtcMicros: PostgreSQL's epoch");
  CHECK_EQ(Utc(1), std::string("2000-01-01T00:00:00.000001Z"), "FormatUtcMicros: one microsecond after it");
  CHECK_EQ(Utc(-1), std::string("1999-12-31T23:59:59.999999Z"), "FormatUtcMicros: one microsecond before it");
  CHECK_EQ(Utc(-946684800000000LL), std::string("1970-01-01T00:00:00.000000Z"), "FormatUtcMicros: the Unix epoch");
  CHECK_EQ(Utc(-946684800000001LL), std::string("1969-12-31T23:59:59.999999Z"),
           "FormatUtcMicros: just before the Unix epoch");
  CHECK_EQ(Utc(-86400000000LL), std::string("1999-12-31T00:00:00.000000Z"), "FormatUtcMicros: exactly one day before");
  CHECK_EQ(Utc(762525296789012LL), std::string("2024-02-29T12:34:56.789012Z"), "FormatUtcMicros: a leap day");
  CHECK_EQ(Utc(-3150576000000000LL), std::string("1900-03-01T00:00:00.000000Z"),
           "FormatUtcMicros: 1900 is no leap year");
  CHECK_EQ(Utc(3160857600000000LL), std::string("2100-03-01T00:00:00.000000Z"), "FormatUtcMicros: nor is 2100");
  CHECK_EQ(Utc(-12617679476999996LL), std::string("1600-02-29T01:02:03.000004Z"),
           "FormatUtcMicros: 1600 is one (a 400-year era back)");
  CHECK_EQ(Utc(252455615999999999LL), std::string("9999-12-31T23:59:59.999999Z"), "FormatUtcMicros: year 9999");
  CHECK_EQ(Utc(252455616000000000LL), std::string("10000-01-01T00:00:00.000000Z"),
           "FormatUtcMicros: a year past 9999 has five digits (PostgreSQL allows it)");
  CHECK_EQ(Utc(-63082281600000000LL), std::string("0001-01-01T00:00:00.000000Z"),
           "FormatUtcMicros: year 1, four digits");
  CHECK_EQ(Utc(-63113904000000000LL), std::string("0000-01-01T00:00:00.000000Z"),
           "FormatUtcMicros: year 0 (a leap year)");

  const unsigned char counting[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const unsigned char high[16] = {0xff, 0xfe, 0xab, 0xcd, 0x12, 0x34, 0x40, 0x56,
                                  0x80, 0x9a, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x01};
  char uuid[40];
  std::memset(uuid, '#', sizeof uuid);
  FormatUuid(counting, uuid);
  CHECK_EQ(std::string(uuid), std::string("00010203-0405-0607-0809-0a0b0c0d0e0f"),
           "FormatUuid: 8-4-4-4-12 hex digits with dashes");
  CHECK_EQ(uuid[37], '#', "FormatUuid writes 37 bytes (36 and a NUL), no more");
  FormatUuid(high, uuid);
  CHECK_EQ(std::string(uuid), std::string("fffeabcd-1234-4056-809a-deadbeef0001"),
           "FormatUuid: lower-case hex for bytes >= 0x80");
  return unit::Done();
}
