// jsonb's binary format read and written directly (see jsonb_format.hpp).
//
// The layout read here is jsonb's on-disk format (utils/jsonb.h): a container's header holds
// its count and kind; its JEntry array holds, per element (an object's keys first, then its
// values), either the element's length or, every JB_OFFSET_STRIDE entries, its end offset;
// the elements' data follow the array in the same order, numerics and nested containers each
// starting at the next 4-byte boundary of that data area. The text is that of
// JsonbToCString without indentation: ", " between elements, ": " after a key, a raw scalar
// (the scalar pseudo-array at the top) without brackets.
#include "statesman/pg/jsonb_format.hpp"

#include <cstring>

extern "C" {
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/numeric.h"
}

namespace statesman::pg {
namespace {

inline void Put(StringInfo buf, const char *data, int length) { PutBytes(buf, data, length); }

// Whether any of the 8 bytes of w needs an escape in a JSON string: a control character (below
// 0x20), '"' or '\\'. Exact for the word as a whole (the classic tests for a zero byte and for a
// byte below n, n <= 0x80): a byte of 0x80 or above, UTF-8, never counts.
inline bool AnyNeedsEscape(uint64 w) {
  constexpr uint64 kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  uint64 quote = w ^ (kOnes * '"');
  uint64 backslash = w ^ (kOnes * '\\');
  return (((w - kOnes * 0x20) & ~w) | ((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash)) & kHigh;
}

// numeric's on-disk short format (numeric.c): a uint16 header holding the sign, the display
// scale and the weight (the power of 10000 of the first digit), then the int16 base-10000 digits,
// without leading or trailing zero digits.
constexpr uint16 kNumericFlagMask = 0xC000, kNumericShort = 0x8000, kShortSign = 0x2000, kShortDscale = 0x1F80,
                 kShortWeightSign = 0x0040, kShortWeight = 0x003F;
constexpr int kNbase = 10000;

// A numeric as numeric_out writes it. An integer of up to 16 digits stored in the short format
// with no decimals (what a JSON integer such as an id or an amount in cents is) is written from
// its base-10000 digits here; any other goes to numeric_out. The layout read is numeric's
// short format above.
void PutNumeric(StringInfo buf, Numeric numeric) {
  const char *data = VARDATA_ANY(numeric);
  const int bytes = static_cast<int>(VARSIZE_ANY_EXHDR(numeric));
  uint16 header = 0;
  if (bytes >= static_cast<int>(sizeof(header))) memcpy(&header, data, sizeof(header));
  if (bytes >= static_cast<int>(sizeof(header)) && (header & kNumericFlagMask) == kNumericShort &&
      (header & kShortDscale) == 0 && (header & kShortWeightSign) == 0) {
    const int weight = header & kShortWeight;
    const int ndigits = (bytes - static_cast<int>(sizeof(header))) / static_cast<int>(sizeof(int16));
    const bool negative = (header & kShortSign) != 0;
    if (weight <= 3 && ndigits <= weight + 1 && !(ndigits == 0 && negative)) {
      int64 value = 0;
      bool digits_ok = true;
      for (int i = 0; i <= weight; ++i) {
        int16 digit = 0;
        if (i < ndigits) memcpy(&digit, data + sizeof(header) + i * sizeof(int16), sizeof(digit));
        digits_ok = digits_ok && digit >= 0 && digit < kNbase;
        value = value * kNbase + digit;
      }
      if (digits_ok) {
        char text[MAXINT8LEN + 1];
        int length = pg_lltoa(negative ? -value : value, text);
        Put(buf, text, length);
        return;
      }
    }
  }
  char *text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(numeric)));
  appendStringInfoString(buf, text);
  pfree(text);
}

// The elements of a container in order: where each one's data starts and its entry.
class Elements {
 public:
  // From the first element on, or from element `first` on (getJsonbOffset finds where its
  // data starts from the nearest stored offset).
  Elements(const JsonbContainer *c, int entries, int first = 0)
      : entries_(c->children), base_(reinterpret_cast<const char *>(&c->children[entries])),
        offset_(first == 0 ? 0 : getJsonbOffset(c, first)), index_(first) {}

  // The next element: its entry; *data points at its data (alignment padding included),
  // *length is the data's length.
  JEntry Next(const char **data, uint32 *length) {
    JEntry entry = entries_[index_++];
    uint32 field = JBE_OFFLENFLD(entry);
    uint32 end = JBE_HAS_OFF(entry) ? field : offset_ + field;
    *data = base_ + offset_;
    *length = end - offset_;
    offset_ = end;
    return entry;
  }
  const char *base() const { return base_; }

 private:
  const JEntry *entries_;
  const char *base_;
  uint32 offset_;
  int index_;
};

void AppendValue(StringInfo buf, JEntry entry, const char *base, const char *data, uint32 length);

void AppendContainer(StringInfo buf, const JsonbContainer *c) {
  check_stack_depth();  // nesting is bounded by what jsonb input accepted, and by this
  const uint32 count = JsonContainerSize(c);
  if (JsonContainerIsObject(c)) {
    // The keys' entries first, then the values' in the same order.
    Elements keys(c, static_cast<int>(count * 2));
    Elements values(c, static_cast<int>(count * 2), static_cast<int>(count));
    appendStringInfoCharMacro(buf, '{');
    for (uint32 i = 0; i < count; ++i) {
      if (i > 0) Put(buf, ", ", 2);
      const char *key;
      uint32 key_length;
      keys.Next(&key, &key_length);
      AppendJsonString(buf, key, static_cast<int>(key_length));
      Put(buf, ": ", 2);
      const char *data;
      uint32 length;
      JEntry entry = values.Next(&data, &length);
      AppendValue(buf, entry, values.base(), data, length);
    }
    appendStringInfoCharMacro(buf, '}');
    return;
  }
  Elements elements(c, static_cast<int>(count));
  const bool raw_scalar = JsonContainerIsScalar(c);
  if (!raw_scalar) appendStringInfoCharMacro(buf, '[');
  for (uint32 i = 0; i < count; ++i) {
    if (i > 0) Put(buf, ", ", 2);
    const char *data;
    uint32 length;
    JEntry entry = elements.Next(&data, &length);
    AppendValue(buf, entry, elements.base(), data, length);
  }
  if (!raw_scalar) appendStringInfoCharMacro(buf, ']');
}

// One value, its data at data (with the padding before an aligned value).
void AppendValue(StringInfo buf, JEntry entry, const char *base, const char *data, uint32 length) {
  const uint32 offset = static_cast<uint32>(data - base);
  switch (entry & JENTRY_TYPEMASK) {
    case JENTRY_ISSTRING: AppendJsonString(buf, data, static_cast<int>(length)); break;
    case JENTRY_ISNUMERIC:
      PutNumeric(buf, reinterpret_cast<Numeric>(const_cast<char *>(base + INTALIGN(offset))));
      break;
    case JENTRY_ISBOOL_FALSE: Put(buf, "false", 5); break;
    case JENTRY_ISBOOL_TRUE: Put(buf, "true", 4); break;
    case JENTRY_ISNULL: Put(buf, "null", 4); break;
    case JENTRY_ISCONTAINER:
      AppendContainer(buf, reinterpret_cast<const JsonbContainer *>(base + INTALIGN(offset)));
      break;
    default: elog(ERROR, "statesman: unknown jsonb entry type 0x%08x", static_cast<unsigned>(entry & JENTRY_TYPEMASK));
  }
}

}  // namespace

void AppendJsonString(StringInfo buf, const char *data, int length) {
  enlargeStringInfo(buf, length + 2);
  appendStringInfoCharMacro(buf, '"');
  const char *run = data;  // the start of characters that need no escape
  const char *end = data + length;
  for (const char *p = data; p < end;) {
    // Eight characters at a time while none of them needs an escape.
    if (end - p >= 8) {
      uint64 w;
      memcpy(&w, p, sizeof(w));
      if (!AnyNeedsEscape(w)) {
        p += 8;
        continue;
      }
    }
    unsigned char c = static_cast<unsigned char>(*p);
    if (c >= 0x20 && c != '"' && c != '\\') {
      ++p;
      continue;
    }
    Put(buf, run, static_cast<int>(p - run));
    run = ++p;
    switch (c) {
      case '\b': Put(buf, "\\b", 2); break;
      case '\f': Put(buf, "\\f", 2); break;
      case '\n': Put(buf, "\\n", 2); break;
      case '\r': Put(buf, "\\r", 2); break;
      case '\t': Put(buf, "\\t", 2); break;
      case '"': Put(buf, "\\\"", 2); break;
      case '\\': Put(buf, "\\\\", 2); break;
      default: appendStringInfo(buf, "\\u%04x", static_cast<int>(c)); break;
    }
  }
  Put(buf, run, static_cast<int>(end - run));
  appendStringInfoCharMacro(buf, '"');
}

void AppendJsonbText(StringInfo buf, const JsonbContainer *container) { AppendContainer(buf, container); }

int WriteIntNumeric(int64 n, char *out) {
  // The base-10000 digits, least significant first, without the trailing zero digits that
  // make_result strips (the weight keeps counting them).
  uint64 magnitude = n < 0 ? 0 - static_cast<uint64>(n) : static_cast<uint64>(n);
  int16 digits[5];
  int count = 0;          // digits kept
  int weight = -1;        // the power of kNbase of the most significant digit
  bool low_zeros = true;  // still among the least significant zero digits
  while (magnitude != 0) {
    int16 digit = static_cast<int16>(magnitude % kNbase);
    magnitude /= kNbase;
    ++weight;
    if (low_zeros && digit == 0) continue;
    low_zeros = false;
    digits[count++] = digit;
  }
  if (count == 0) weight = 0;  // zero: no digits, weight 0, positive
  uint16 header = kNumericShort | (n < 0 ? kShortSign : 0) | static_cast<uint16>(weight & kShortWeight);
  const int size = VARHDRSZ + static_cast<int>(sizeof(header)) + count * static_cast<int>(sizeof(int16));
  SET_VARSIZE(out, size);
  char *p = out + VARHDRSZ;
  memcpy(p, &header, sizeof(header));
  p += sizeof(header);
  for (int i = count - 1; i >= 0; --i) {  // most significant first
    memcpy(p, &digits[i], sizeof(int16));
    p += sizeof(int16);
  }
  return size;
}

}  // namespace statesman::pg
