// Wire-format helpers of the state-change message (docs/design.md §5).
#include "statesman/feed/message_format.hpp"

#include <cstdio>

namespace statesman::store {

void Base64Encode(const unsigned char *data, std::size_t length, char *out) noexcept {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::size_t i = 0;
  for (; i + 2 < length; i += 3) {
    uint32_t n = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    *out++ = kAlphabet[(n >> 18) & 63];
    *out++ = kAlphabet[(n >> 12) & 63];
    *out++ = kAlphabet[(n >> 6) & 63];
    *out++ = kAlphabet[n & 63];
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

void FormatUtcMicros(int64_t micros, char *out) noexcept {
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
  std::snprintf(out, kUtcTextSize, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%06lldZ", static_cast<long long>(year),
                static_cast<long long>(month), static_cast<long long>(day), static_cast<long long>(seconds / 3600),
                static_cast<long long>(seconds / 60 % 60), static_cast<long long>(seconds % 60),
                static_cast<long long>(rest % 1000000));
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
