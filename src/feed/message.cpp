// statesman._message(…): builds one statesman.state-change/v1 message as jsonb (docs/design.md §5).
//
// Built directly as a JsonbValue tree: jsonb_build_object would look up each argument's type
// category on every row, which dominated read_feed. The same builders serve the page reader
// (src/feed/page.cpp), from the rows of statesman._feed_page. Nothing here holds a C++ object
// with a destructor, so the PostgreSQL calls below may ereport freely.
#include "statesman/feed/message.hpp"

#include <algorithm>
#include <string>

extern "C" {
#include "access/detoast.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

PG_FUNCTION_INFO_V1(statesman_message);
PG_FUNCTION_INFO_V1(statesman_message_text);
}

#include "statesman/feed/message_format.hpp"
#include "statesman/pg/jsonb_format.hpp"

static_assert(statesman::store::kMaxMessageBytes == JENTRY_OFFLENMASK,
              "the append functions' size check must use jsonb's own limit");

namespace statesman::pg {
namespace {

// The message's keys. jsonb stores object keys sorted (shorter first, then bytewise) and sorts
// whatever it is given; handing them over already in that order makes its sort a single pass.
enum Key {
  kPathKey,
  kRootKey,
  kEpochKey,
  kErrorKey,
  kStoreKey,
  kSchemaKey,
  kSourceKey,
  kStatusKey,
  kAddressKey,
  kPayloadKey,
  kMetadataKey,
  kRevisionKey,
  kMessageIdKey,
  kOperationKey,
  kPartitionKey,
  kValueTypeKey,
  kOccurredAtKey,
  kCausationIdKey,
  kContentTypeKey,
  kFingerprintKey,
  kSerializerIdKey,
  kCorrelationIdKey,
  kSchemaVersionKey,
  kGlobalPositionKey,
  kKeyCount
};
constexpr const char *kKeyNames[kKeyCount] = {
    "path",        "root",        "epoch",        "error",         "store",         "schema",
    "source",      "status",      "address",      "payload",       "metadata",      "revision",
    "messageId",   "operation",   "partition",    "valueType",     "occurredAt",    "causationId",
    "contentType", "fingerprint", "serializerId", "correlationId", "schemaVersion", "globalPosition"};

// kMessageFixedBytes (message_format.hpp) counts 24 keys of 202 bytes in all.
constexpr std::size_t KeyNameBytes() {
  std::size_t n = 0;
  for (const char *k : kKeyNames) n += std::char_traits<char>::length(k);
  return n;
}
static_assert(kKeyCount == 24 && KeyNameBytes() == 202, "update kMessageFixedBytes in message_format.hpp");

// The value of each key; type jbvNull until set. A key left unset with `omit` is not written.
struct Fields {
  JsonbValue value[kKeyCount];
  bool omit[kKeyCount];
  bool integer[kKeyCount];  // an exact number, in `number` (value.val.numeric stays NULL)
  int64 number[kKeyCount];
  bool plain[kKeyCount];  // a string of characters that JSON text never escapes (SetPlainString)
};

void SetNull(Fields &f, Key key) { f.value[key].type = jbvNull; }

void SetString(Fields &f, Key key, char *data, int length) {
  f.value[key].type = jbvString;
  f.value[key].val.string.val = data;
  f.value[key].val.string.len = length;
}

// A string that the message builder wrote itself, of characters that need no escape in JSON
// text (the schema's name, the epoch, the occurrence time, the payload's base64).
void SetPlainString(Fields &f, Key key, char *data, int length) {
  SetString(f, key, data, length);
  f.plain[key] = true;
}

// A text field as a JSON string, or null.
void SetTextField(Fields &f, Key key, const MessageInput &in, MessageField field) {
  if (in.isnull[field]) return SetNull(f, key);
  text *t = DatumGetTextPP(in.value[field]);
  SetString(f, key, VARDATA_ANY(t), static_cast<int>(VARSIZE_ANY_EXHDR(t)));
}

// An integer field as an exact JSON number, or null.
void SetIntegerField(Fields &f, Key key, const MessageInput &in, MessageField field, bool is_int4) {
  if (in.isnull[field]) return SetNull(f, key);
  int64 n = is_int4 ? DatumGetInt32(in.value[field]) : DatumGetInt64(in.value[field]);
  f.integer[key] = true;
  f.number[key] = n;
  f.value[key].type = jbvNumeric;
  f.value[key].val.numeric = nullptr;  // written from `number` (WriteIntNumeric, AppendMessageText)
}

}  // namespace
}  // namespace statesman::pg

namespace statesman::pg {
namespace {

// Fills f from a message's fields (none of the required ones is NULL).
void GatherFields(const MessageInput &in, Fields &f) {
  namespace store = statesman::store;
  for (int k = 0; k < kKeyCount; ++k) {
    f.value[k].type = jbvNull;
    f.omit[k] = false;
    f.integer[k] = false;
    f.plain[k] = false;
  }

  SetPlainString(f, kSchemaKey, const_cast<char *>(store::kMessageSchema),
                 static_cast<int>(strlen(store::kMessageSchema)));

  // messageId = {store}/{address}#{revision}
  if (in.message_id != nullptr) {
    SetString(f, kMessageIdKey, const_cast<char *>(in.message_id), in.message_id_len);
  } else {
    StringInfoData id;
    initStringInfo(&id);
    AppendMessageId(&id, in);
    SetString(f, kMessageIdKey, id.data, id.len);
  }

  SetTextField(f, kStoreKey, in, kStore);
  SetTextField(f, kRootKey, in, kRoot);
  SetTextField(f, kPathKey, in, kPath);
  SetTextField(f, kPartitionKey, in, kPartition);
  SetTextField(f, kAddressKey, in, kAddress);
  SetIntegerField(f, kRevisionKey, in, kRevision, false);
  SetIntegerField(f, kGlobalPositionKey, in, kGlobalPosition, false);

  char *epoch = static_cast<char *>(palloc(UUID_LEN * 2 + 5));
  store::FormatUuid(DatumGetUUIDP(in.value[kEpoch])->data, epoch);
  SetPlainString(f, kEpochKey, epoch, UUID_LEN * 2 + 4);

  if (!in.isnull[kOccurredAt]) {
    char *occurred = static_cast<char *>(palloc(store::kUtcTextSize));
    std::size_t length = store::FormatUtcMicros(DatumGetTimestampTz(in.value[kOccurredAt]), occurred);
    SetPlainString(f, kOccurredAtKey, occurred, static_cast<int>(length));
  }

  SetTextField(f, kOperationKey, in, kOperation);
  SetTextField(f, kStatusKey, in, kStatus);
  SetTextField(f, kValueTypeKey, in, kValueType);
  SetIntegerField(f, kSchemaVersionKey, in, kSchemaVersion, true);
  SetTextField(f, kSourceKey, in, kSource);
  SetTextField(f, kFingerprintKey, in, kFingerprint);
  SetTextField(f, kContentTypeKey, in, kContentType);
  SetTextField(f, kSerializerIdKey, in, kSerializerId);
  f.omit[kSerializerIdKey] = in.isnull[kSerializerId];  // serializerId is omitted when absent

  if (!in.isnull[kPayload]) {
    if (char *error = MessageUnbuildable(in))
      ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED), errmsg_internal("%s", error)));
    bytea *payload = DatumGetByteaPP(in.value[kPayload]);
    size_t length = VARSIZE_ANY_EXHDR(payload);
    size_t encoded = store::Base64Length(length);
    char *b64 = static_cast<char *>(palloc(encoded + 1));
    store::Base64Encode(reinterpret_cast<const unsigned char *>(VARDATA_ANY(payload)), length, b64);
    SetPlainString(f, kPayloadKey, b64, static_cast<int>(encoded));
  }

  SetTextField(f, kCorrelationIdKey, in, kCorrelationId);
  SetTextField(f, kCausationIdKey, in, kCausationId);
  if (!in.isnull[kMetadata]) {
    Jsonb *metadata = DatumGetJsonbP(in.value[kMetadata]);
    f.value[kMetadataKey].type = jbvBinary;
    f.value[kMetadataKey].val.binary.data = &metadata->root;
    f.value[kMetadataKey].val.binary.len = static_cast<int>(VARSIZE(metadata) - VARHDRSZ);
  }
  SetTextField(f, kErrorKey, in, kError);
}

}  // namespace

char *MessageUnbuildable(const MessageInput &in) {
  if (in.isnull[kPayload]) return nullptr;
  // The payload's size without detoasting it.
  size_t length = toast_raw_datum_size(in.value[kPayload]) - VARHDRSZ;
  if (store::Base64Length(length) <= static_cast<size_t>(JENTRY_OFFLENMASK)) return nullptr;
  return psprintf("payload of %s is too large for a jsonb message", TextDatumGetCString(in.value[kAddress]));
}

void AppendMessageId(StringInfo buf, const MessageInput &in) {
  text *store_name = DatumGetTextPP(in.value[kStore]);
  text *address = DatumGetTextPP(in.value[kAddress]);
  appendBinaryStringInfo(buf, VARDATA_ANY(store_name), static_cast<int>(VARSIZE_ANY_EXHDR(store_name)));
  appendStringInfoChar(buf, '/');
  appendBinaryStringInfo(buf, VARDATA_ANY(address), static_cast<int>(VARSIZE_ANY_EXHDR(address)));
  char digits[MAXINT8LEN + 1];
  int n = pg_lltoa(DatumGetInt64(in.value[kRevision]), digits);
  appendStringInfoChar(buf, '#');
  appendBinaryStringInfo(buf, digits, n);
}

namespace {

// The length of each key name.
struct KeyLengths {
  int len[kKeyCount];
  constexpr KeyLengths() : len() {
    for (int k = 0; k < kKeyCount; ++k) len[k] = static_cast<int>(std::char_traits<char>::length(kKeyNames[k]));
  }
};
constexpr KeyLengths kKeyLen;

// Writes the JEntry of element `index` at entries[index]: its length, turned into an end offset
// every JB_OFFSET_STRIDE entries, as convertJsonbObject writes them.
void PutEntry(char *entries, int index, JEntry meta, int *totallen) {
  *totallen += JBE_OFFLENFLD(meta);
  if (*totallen > static_cast<int>(JENTRY_OFFLENMASK))
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("total size of jsonb object elements exceeds the maximum of %d bytes", JENTRY_OFFLENMASK)));
  if (index % JB_OFFSET_STRIDE == 0) meta = (meta & JENTRY_TYPEMASK) | *totallen | JENTRY_HAS_OFF;
  memcpy(entries + index * static_cast<int>(sizeof(JEntry)), &meta, sizeof(JEntry));
}

// Zero bytes from p up to the next multiple of 4 from base (jsonb aligns numerics and
// containers so, counted from the varlena's start); returns how many.
int PadToInt(char *base, char *&p) {
  int at = static_cast<int>(p - base);
  int pad = static_cast<int>(INTALIGN(at)) - at;
  for (int i = 0; i < pad; ++i) *p++ = '\0';
  return pad;
}

}  // namespace

// Written in jsonb's binary form directly, byte for byte what pushJsonbValue and
// JsonbValueToJsonb make of the same object (convertJsonbObject in PostgreSQL's jsonb_util.c):
// the keys are already in jsonb's order (kKeyNames), so there is nothing to sort, and no value
// tree is built and walked. The metadata object is copied as it is stored (a jsonb container is
// canonical and aligned the same wherever it starts on a 4-byte boundary); a scalar metadata
// value is written as that scalar, as pushJsonbValue unpacks it. One allocation of the largest
// size the fields can take, written in place.
Jsonb *BuildMessageJsonb(const MessageInput &in) {
  Fields f;
  GatherFields(in, f);
  if (f.value[kMetadataKey].type == jbvBinary && JsonContainerIsScalar(f.value[kMetadataKey].val.binary.data)) {
    JsonbValue scalar;
    if (!JsonbExtractScalar(f.value[kMetadataKey].val.binary.data, &scalar))
      elog(ERROR, "statesman: a scalar metadata value could not be read");
    f.value[kMetadataKey] = scalar;
  }
  int keys[kKeyCount];
  int n = 0;
  Size bound = VARHDRSZ + sizeof(uint32);
  for (int k = 0; k < kKeyCount; ++k) {
    if (f.omit[k]) continue;
    keys[n++] = k;
    bound += 2 * sizeof(JEntry) + kKeyLen.len[k];
    const JsonbValue &v = f.value[k];
    switch (v.type) {
      case jbvString: bound += v.val.string.len; break;
      case jbvNumeric: bound += 3 + (f.integer[k] ? kMaxIntNumericBytes : VARSIZE_ANY(v.val.numeric)); break;
      case jbvBinary: bound += 3 + v.val.binary.len; break;
      default: break;
    }
  }
  if (bound - VARHDRSZ > static_cast<Size>(JENTRY_OFFLENMASK) + 3 * kKeyCount)
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("total size of jsonb object elements exceeds the maximum of %d bytes", JENTRY_OFFLENMASK)));

  char *base = static_cast<char *>(palloc(bound));
  char *p = base + VARHDRSZ;
  uint32 header = static_cast<uint32>(n) | JB_FOBJECT;
  memcpy(p, &header, sizeof(header));
  p += sizeof(header);
  char *entries = p;
  p += sizeof(JEntry) * 2 * n;

  int totallen = 0;
  for (int i = 0; i < n; ++i) {
    int len = kKeyLen.len[keys[i]];
    memcpy(p, kKeyNames[keys[i]], len);
    p += len;
    PutEntry(entries, i, static_cast<JEntry>(len), &totallen);
  }
  for (int i = 0; i < n; ++i) {
    const JsonbValue &v = f.value[keys[i]];
    JEntry meta = 0;
    switch (v.type) {
      case jbvNull: meta = JENTRY_ISNULL; break;
      case jbvString:
        memcpy(p, v.val.string.val, v.val.string.len);
        p += v.val.string.len;
        meta = static_cast<JEntry>(v.val.string.len);
        break;
      case jbvNumeric: {
        // The message's own numbers are integers (SetIntegerField), written in place; a scalar
        // metadata number is copied as stored.
        int pad = PadToInt(base, p);
        int numlen = 0;
        if (f.integer[keys[i]]) {
          numlen = WriteIntNumeric(f.number[keys[i]], p);
        } else {
          numlen = static_cast<int>(VARSIZE_ANY(v.val.numeric));
          memcpy(p, v.val.numeric, numlen);
        }
        p += numlen;
        meta = JENTRY_ISNUMERIC | static_cast<JEntry>(pad + numlen);
        break;
      }
      case jbvBool: meta = v.val.boolean ? JENTRY_ISBOOL_TRUE : JENTRY_ISBOOL_FALSE; break;
      case jbvBinary: {
        int pad = PadToInt(base, p);
        memcpy(p, v.val.binary.data, v.val.binary.len);
        p += v.val.binary.len;
        meta = JENTRY_ISCONTAINER | static_cast<JEntry>(pad + v.val.binary.len);
        break;
      }
      default: elog(ERROR, "statesman: unexpected jsonb value type %d in a message", static_cast<int>(v.type));
    }
    PutEntry(entries, i + n, meta, &totallen);
  }
  int length = static_cast<int>(p - base);
  if (length - VARHDRSZ > static_cast<int>(JENTRY_OFFLENMASK))
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("total size of jsonb object elements exceeds the maximum of %d bytes", JENTRY_OFFLENMASK)));
  Jsonb *result = reinterpret_cast<Jsonb *>(base);
  SET_VARSIZE(result, length);
  return result;
}

namespace {

// Each key as JSON text starts it in an object: `"key": `.
struct KeyPrefixes {
  char text[kKeyCount][24];
  int len[kKeyCount];
  constexpr KeyPrefixes() : text(), len() {
    for (int k = 0; k < kKeyCount; ++k) {
      int n = 0;
      text[k][n++] = '"';
      for (const char *c = kKeyNames[k]; *c != '\0'; ++c) text[k][n++] = *c;
      text[k][n++] = '"';
      text[k][n++] = ':';
      text[k][n++] = ' ';
      len[k] = n;
    }
  }
};
constexpr KeyPrefixes kKeyPrefix;
constexpr std::size_t LongestKeyName() {
  std::size_t n = 0;
  for (const char *k : kKeyNames) n = std::max(n, std::char_traits<char>::length(k));
  return n;
}
static_assert(LongestKeyName() + 4 <= sizeof(kKeyPrefix.text[0]), "a key, its quotes, the colon and the space");

}  // namespace

void AppendMessageText(StringInfo buf, const MessageInput &in) {
  Fields f;
  GatherFields(in, f);
  // Room for the whole text when nothing in it is escaped, the usual case: every write below
  // is then a copy without a call.
  int bound = 2;
  for (int k = 0; k < kKeyCount; ++k) {
    if (f.omit[k]) continue;
    bound += 2 + kKeyPrefix.len[k];
    const JsonbValue &v = f.value[k];
    switch (v.type) {
      case jbvString: bound += v.val.string.len + 2; break;
      case jbvNumeric: bound += MAXINT8LEN + 1; break;
      case jbvBinary: bound += v.val.binary.len; break;
      default: bound += 4; break;
    }
  }
  enlargeStringInfo(buf, bound);
  appendStringInfoCharMacro(buf, '{');
  bool first = true;
  for (int k = 0; k < kKeyCount; ++k) {
    if (f.omit[k]) continue;
    if (!first) PutBytes(buf, ", ", 2);
    first = false;
    PutBytes(buf, kKeyPrefix.text[k], kKeyPrefix.len[k]);  // the key names need no escape
    const JsonbValue &v = f.value[k];
    switch (v.type) {
      case jbvString:
        if (f.plain[k]) {
          appendStringInfoCharMacro(buf, '"');
          PutBytes(buf, v.val.string.val, v.val.string.len);
          appendStringInfoCharMacro(buf, '"');
        } else {
          AppendJsonString(buf, v.val.string.val, v.val.string.len);
        }
        break;
      case jbvNumeric: {
        // An integer numeric prints as its decimal digits: what numeric_out would write.
        char digits[MAXINT8LEN + 1];
        int n = pg_lltoa(f.number[k], digits);
        PutBytes(buf, digits, n);
        break;
      }
      case jbvBinary: AppendJsonbText(buf, v.val.binary.data); break;
      default: PutBytes(buf, "null", 4); break;
    }
  }
  appendStringInfoCharMacro(buf, '}');
}

}  // namespace statesman::pg

namespace {

// The arguments of statesman._message / _message_text as a message's fields.
void ArgsToInput(FunctionCallInfo fcinfo, statesman::pg::MessageInput &in) {
  for (int i = 0; i < statesman::pg::kMessageFieldCount; ++i) {
    in.isnull[i] = PG_ARGISNULL(i);
    in.value[i] = in.isnull[i] ? static_cast<Datum>(0) : PG_GETARG_DATUM(i);
  }
}

}  // namespace

// statesman._message(store, epoch, address, root, path, partition, revision, global_position,
//   occurred_at, operation, status, value_type, schema_version, source, fingerprint,
//   content_type, serializer_id, payload, correlation_id, causation_id, metadata, error) → jsonb
extern "C" Datum statesman_message(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  for (int required : {kStore, kEpoch, kAddress, kRevision})
    if (PG_ARGISNULL(required)) PG_RETURN_NULL();
  MessageInput in;
  ArgsToInput(fcinfo, in);
  PG_RETURN_JSONB_P(BuildMessageJsonb(in));
}

// statesman._message_text(the same arguments) → text: the same message as JSON text, written
// directly, byte for byte what _message(…)::text gives, without building a jsonb first. For
// sinks outside the database, which send text.
extern "C" Datum statesman_message_text(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  for (int required : {kStore, kEpoch, kAddress, kRevision})
    if (PG_ARGISNULL(required)) PG_RETURN_NULL();
  MessageInput in;
  ArgsToInput(fcinfo, in);
  StringInfoData buf;
  initStringInfo(&buf);
  AppendMessageText(&buf, in);
  PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}
