// Wire-format helpers of the state-change message (docs/design.md §5).
#include "statesman/feed/message_format.hpp"

#include <cstdio>
#include <cstring>

namespace statesman::store {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The two base64 characters of every 12-bit value: two lookups per 3 input bytes instead of four.
struct Base64Pairs {
  char pair[4096][2];
  constexpr Base64Pairs() : pair() {
    for (int i = 0; i < 4096; ++i) {
      pair[i][0] = kAlphabet[i >> 6];
      pair[i][1] = kAlphabet[i & 63];
    }
  }
};
constexpr Base64Pairs kPairs;

// Two decimal digits of 0..99.
inline char *TwoDigits(char *out, int64_t n) {
  *out++ = static_cast<char>('0' + n / 10);
  *out++ = static_cast<char>('0' + n % 10);
  return out;
}

}  // namespace

void Base64Encode(const unsigned char *data, std::size_t length, char *out) noexcept {
  std::size_t i = 0;
  for (; i + 2 < length; i += 3) {
    uint32_t n = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    std::memcpy(out, kPairs.pair[n >> 12], 2);
    std::memcpy(out + 2, kPairs.pair[n & 4095], 2);
    out += 4;
  }
  if (i < length) {
    uint32_t n = uint32_t{data[i]} << 16;
    if (i + 1 < length) n |= uint32_t{data[i + 1]} << 8;
    *out++ = kAlphabet[(n >> 18) & 63];
    *out++ = kAlphabet[(n >> 12) & 63];
    *out++ = i + 1 < length ? kAlphabet[(n >> 6) & 63] : '=';
    *out++ = '=';
  }
}

std::size_t FormatUtcMicros(int64_t micros, char *out) noexcept {
  constexpr int64_t kMicrosPerDay = 86400000000LL;
  int64_t days = micros / kMicrosPerDay;
  int64_t rest = micros % kMicrosPerDay;
  if (rest < 0) {
    rest += kMicrosPerDay;
    days -= 1;
  }
  // Civil date from a day count (Howard Hinnant's civil_from_days), days since 2000-01-01.
  int64_t z = days + 10957 + 719468;  // shift to days since 0000-03-01
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t year = yoe + era * 400;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t day = doy - (153 * mp + 2) / 5 + 1;
  int64_t month = mp < 10 ? mp + 3 : mp - 9;
  if (month <= 2) year += 1;

  int64_t seconds = rest / 1000000;
  int64_t fraction = rest % 1000000;
  if (year < 0 || year > 9999) {
    int n = std::snprintf(out, kUtcTextSize, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%06lldZ",
                          static_cast<long long>(year), static_cast<long long>(month), static_cast<long long>(day),
                          static_cast<long long>(seconds / 3600), static_cast<long long>(seconds / 60 % 60),
                          static_cast<long long>(seconds % 60), static_cast<long long>(fraction));
    return static_cast<std::size_t>(n);
  }
  // Every message carries one: written digit by digit (snprintf took a tenth of a page read).
  char *p = TwoDigits(out, year / 100);
  p = TwoDigits(p, year % 100);
  *p++ = '-';
  p = TwoDigits(p, month);
  *p++ = '-';
  p = TwoDigits(p, day);
  *p++ = 'T';
  p = TwoDigits(p, seconds / 3600);
  *p++ = ':';
  p = TwoDigits(p, seconds / 60 % 60);
  *p++ = ':';
  p = TwoDigits(p, seconds % 60);
  *p++ = '.';
  p = TwoDigits(p, fraction / 10000);
  p = TwoDigits(p, fraction / 100 % 100);
  p = TwoDigits(p, fraction % 100);
  *p++ = 'Z';
  *p = '\0';
  return static_cast<std::size_t>(p - out);
}

void FormatUuid(const unsigned char *bytes, char *out) noexcept {
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *out++ = '-';
    *out++ = kHex[bytes[i] >> 4];
    *out++ = kHex[bytes[i] & 15];
  }
  *out = '\0';
}

}  // namespace statesman::store
