// statesman._message(…): builds one statesman.state-change/v1 message as jsonb (docs/design.md §5).
//
// The jsonb is written in its binary form in one pass (BuildMessageJsonb); the JSON text the
// sinks outside the database send is written directly from the fields gathered as JsonbValues
// (AppendMessageText). jsonb_build_object would look up each argument's type category on every
// row, which once dominated read_feed. The same builders serve the page reader
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

// The message's keys, in the order jsonb stores an object's keys (shorter first, then
// bytewise): the order both writers put them in.
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

// Fills f from a message's fields (none of the required ones is NULL): AppendMessageText's input.
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
    text *id = MessageIdText(in);
    SetString(f, kMessageIdKey, VARDATA(id), static_cast<int>(VARSIZE(id) - VARHDRSZ));
  }

  SetTextField(f, kStoreKey, in, kStore);
  SetTextField(f, kRootKey, in, kRoot);
  SetTextField(f, kPathKey, in, kPath);
  SetTextField(f, kPartitionKey, in, kPartition);
  SetTextField(f, kAddressKey, in, kAddress);
  SetIntegerField(f, kRevisionKey, in, kRevision, false);
  SetIntegerField(f, kGlobalPositionKey, in, kGlobalPosition, false);

  if (in.epoch_text != nullptr) {
    SetPlainString(f, kEpochKey, const_cast<char *>(in.epoch_text), UUID_LEN * 2 + 4);
  } else {
    char *epoch = static_cast<char *>(palloc(UUID_LEN * 2 + 5));
    store::FormatUuid(DatumGetUUIDP(in.value[kEpoch])->data, epoch);
    SetPlainString(f, kEpochKey, epoch, UUID_LEN * 2 + 4);
  }

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

namespace {

// A text field's characters (len -1: NULL).
struct TextValue {
  const char *data;
  int len;
};

TextValue TextOf(const MessageInput &in, MessageField field) {
  if (in.isnull[field]) return {nullptr, -1};
  text *t = DatumGetTextPP(in.value[field]);
  return {VARDATA_ANY(t), static_cast<int>(VARSIZE_ANY_EXHDR(t))};
}

// messageId, "{store}/{address}#{revision}", into out (room for the store name, the address,
// two separators and MAXINT8LEN + 1 bytes); returns its length.
int WriteMessageId(const TextValue &store_name, const TextValue &address, int64 revision, char *out) {
  char *p = out;
  memcpy(p, store_name.data, store_name.len);
  p += store_name.len;
  *p++ = '/';
  memcpy(p, address.data, address.len);
  p += address.len;
  *p++ = '#';
  p += pg_lltoa(revision, p);  // writes a terminating NUL after the digits
  return static_cast<int>(p - out);
}

}  // namespace

text *MessageIdText(const MessageInput &in) {
  TextValue store_name = TextOf(in, kStore), address = TextOf(in, kAddress);
  text *id = static_cast<text *>(palloc(VARHDRSZ + store_name.len + address.len + 2 + MAXINT8LEN + 1));
  SET_VARSIZE(id, VARHDRSZ + WriteMessageId(store_name, address, DatumGetInt64(in.value[kRevision]), VARDATA(id)));
  return id;
}

namespace {

// The part of the message's jsonb that is the same in every message of a shape (with the
// serializerId key or without it): the object's header, the keys' JEntries and the key names.
// A key's JEntry is its length, except every JB_OFFSET_STRIDE-th element's, which holds the end
// offset of its data (convertJsonbObject's layout); with at most 24 keys only the first key's
// is such an offset among the keys.
struct KeySection {
  int count;                // keys
  uint32 header;            // count | JB_FOBJECT
  JEntry entry[kKeyCount];  // the keys' JEntries
  char names[256];          // the key names, concatenated
  int names_len;
  constexpr KeySection(bool serializer_id) : count(0), header(0), entry(), names(), names_len(0) {
    for (int k = 0; k < kKeyCount; ++k) {
      if (k == kSerializerIdKey && !serializer_id) continue;
      int len = 0;
      for (const char *c = kKeyNames[k]; *c != '\0'; ++c) names[names_len + len++] = *c;
      names_len += len;
      entry[count] =
          count % JB_OFFSET_STRIDE == 0 ? static_cast<JEntry>(names_len) | JENTRY_HAS_OFF : static_cast<JEntry>(len);
      ++count;
    }
    header = static_cast<uint32>(count) | JB_FOBJECT;
  }
};
constexpr KeySection kWithSerializerId(true);
constexpr KeySection kWithoutSerializerId(false);
static_assert(kWithSerializerId.names_len == 202 && kWithoutSerializerId.count == kKeyCount - 1,
              "the key sections must hold every key name");

// Writes the values of an object whose keys are written: each value's bytes at p and its
// JEntry, as convertJsonbObject lays them out (numerics and containers 4-byte aligned from the
// varlena's start).
struct ValueWriter {
  char *base;
  char *p;
  char *entries;  // the object's JEntries
  int index;      // the next value's element index (key count + value number)
  int totallen;   // the data's length so far (the key names and the values written)

  void Entry(JEntry meta) {
    totallen += static_cast<int>(JBE_OFFLENFLD(meta));
    if (index % JB_OFFSET_STRIDE == 0) meta = (meta & JENTRY_TYPEMASK) | static_cast<JEntry>(totallen) | JENTRY_HAS_OFF;
    memcpy(entries + index * static_cast<int>(sizeof(JEntry)), &meta, sizeof(JEntry));
    ++index;
  }
  void Null() { Entry(JENTRY_ISNULL); }
  void Bytes(const char *data, int len) {
    memcpy(p, data, len);
    p += len;
    Entry(static_cast<JEntry>(len));
  }
  void Text(const TextValue &t) { t.len < 0 ? Null() : Bytes(t.data, t.len); }
  // A string of `len` bytes already written at p.
  void Written(int len) {
    p += len;
    Entry(static_cast<JEntry>(len));
  }
  int Pad() {
    int at = static_cast<int>(p - base);
    int pad = static_cast<int>(INTALIGN(at)) - at;
    for (int i = 0; i < pad; ++i) *p++ = '\0';
    return pad;
  }
  void Integer(int64 n) {
    int pad = Pad();
    int len = WriteIntNumeric(n, p);
    p += len;
    Entry(JENTRY_ISNUMERIC | static_cast<JEntry>(pad + len));
  }
  void Scalar(const JsonbValue &v) {
    switch (v.type) {
      case jbvNull: return Null();
      case jbvString: return Bytes(v.val.string.val, v.val.string.len);
      case jbvBool: return Entry(v.val.boolean ? JENTRY_ISBOOL_TRUE : JENTRY_ISBOOL_FALSE);
      case jbvNumeric: {
        int pad = Pad();
        int len = static_cast<int>(VARSIZE_ANY(v.val.numeric));
        memcpy(p, v.val.numeric, len);
        p += len;
        return Entry(JENTRY_ISNUMERIC | static_cast<JEntry>(pad + len));
      }
      default: elog(ERROR, "statesman: unexpected jsonb value type %d in a message", static_cast<int>(v.type));
    }
  }
  void Container(const JsonbContainer *c, int len) {
    int pad = Pad();
    memcpy(p, c, len);
    p += len;
    Entry(JENTRY_ISCONTAINER | static_cast<JEntry>(pad + len));
  }
};

}  // namespace

// Written in jsonb's binary form directly, in one pass, byte for byte what pushJsonbValue and
// JsonbValueToJsonb make of the same object (convertJsonbObject in PostgreSQL's jsonb_util.c):
// the keys' part is the same for every message of a shape (KeySection), and each value is
// written in place in the keys' order, the strings the builder makes itself (the epoch, the
// occurrence time, the payload's base64, the message id) straight into the result. The metadata
// object is copied as it is stored (a jsonb container is canonical and aligned the same
// wherever it starts on a 4-byte boundary); a scalar metadata value is written as that scalar,
// as pushJsonbValue unpacks it. One allocation of the largest size the fields can take.
Jsonb *BuildMessageJsonb(const MessageInput &in) {
  namespace store = statesman::store;
  const KeySection &keys = in.isnull[kSerializerId] ? kWithoutSerializerId : kWithSerializerId;

  TextValue store_name = TextOf(in, kStore), address = TextOf(in, kAddress), root = TextOf(in, kRoot),
            path = TextOf(in, kPath), partition = TextOf(in, kPartition), operation = TextOf(in, kOperation),
            status = TextOf(in, kStatus), value_type = TextOf(in, kValueType), source = TextOf(in, kSource),
            fingerprint = TextOf(in, kFingerprint), content_type = TextOf(in, kContentType),
            serializer_id = TextOf(in, kSerializerId), correlation_id = TextOf(in, kCorrelationId),
            causation_id = TextOf(in, kCausationId), error = TextOf(in, kError);
  const bytea *payload = nullptr;
  size_t payload_len = 0;
  if (!in.isnull[kPayload]) {
    if (char *why = MessageUnbuildable(in))
      ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED), errmsg_internal("%s", why)));
    payload = DatumGetByteaPP(in.value[kPayload]);
    payload_len = VARSIZE_ANY_EXHDR(payload);
  }
  const JsonbContainer *metadata = nullptr;
  int metadata_len = 0;
  JsonbValue metadata_scalar;
  bool metadata_is_scalar = false;
  if (!in.isnull[kMetadata]) {
    Jsonb *m = DatumGetJsonbP(in.value[kMetadata]);
    metadata = &m->root;
    metadata_len = static_cast<int>(VARSIZE(m) - VARHDRSZ);
    if (JsonContainerIsScalar(metadata)) {
      if (!JsonbExtractScalar(&m->root, &metadata_scalar))
        elog(ERROR, "statesman: a scalar metadata value could not be read");
      metadata_is_scalar = true;
    }
  }
  const int id_len = in.message_id != nullptr ? in.message_id_len : store_name.len + address.len + 2 + MAXINT8LEN;

  // Every string's bytes, each value's alignment (3) and the largest numerics.
  Size bound = VARHDRSZ + sizeof(uint32) + 2 * sizeof(JEntry) * keys.count + keys.names_len;
  for (const TextValue *t : {&store_name, &address, &root, &path, &partition, &operation, &status, &value_type, &source,
                             &fingerprint, &content_type, &serializer_id, &correlation_id, &causation_id, &error})
    if (t->len > 0) bound += t->len;
  bound += strlen(store::kMessageSchema) + UUID_LEN * 2 + 4 + store::kUtcTextSize + id_len +
           store::Base64Length(payload_len) + metadata_len + 3 * (kMaxIntNumericBytes + 3) + 3 * kKeyCount;
  if (bound - VARHDRSZ > static_cast<Size>(JENTRY_OFFLENMASK) + 3 * kKeyCount + store::kUtcTextSize + MAXINT8LEN)
    ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                    errmsg("total size of jsonb object elements exceeds the maximum of %d bytes", JENTRY_OFFLENMASK)));

  char *base = static_cast<char *>(palloc(bound));
  char *p = base + VARHDRSZ;
  memcpy(p, &keys.header, sizeof(keys.header));
  p += sizeof(keys.header);
  memcpy(p, keys.entry, sizeof(JEntry) * keys.count);
  char *entries = p;
  p += 2 * sizeof(JEntry) * keys.count;
  memcpy(p, keys.names, keys.names_len);
  p += keys.names_len;
  ValueWriter w{base, p, entries, keys.count, keys.names_len};

  // The values in the keys' order (kKeyNames).
  w.Text(path);
  w.Text(root);
  if (in.epoch_text != nullptr) {
    w.Bytes(in.epoch_text, UUID_LEN * 2 + 4);
  } else {
    store::FormatUuid(DatumGetUUIDP(in.value[kEpoch])->data, w.p);
    w.Written(UUID_LEN * 2 + 4);
  }
  w.Text(error);
  w.Text(store_name);
  w.Bytes(store::kMessageSchema, static_cast<int>(strlen(store::kMessageSchema)));
  w.Text(source);
  w.Text(status);
  w.Text(address);
  if (payload == nullptr) {
    w.Null();
  } else {
    store::Base64Encode(reinterpret_cast<const unsigned char *>(VARDATA_ANY(payload)), payload_len, w.p);
    w.Written(static_cast<int>(store::Base64Length(payload_len)));
  }
  if (metadata == nullptr)
    w.Null();
  else if (metadata_is_scalar)
    w.Scalar(metadata_scalar);
  else
    w.Container(metadata, metadata_len);
  w.Integer(DatumGetInt64(in.value[kRevision]));
  if (in.message_id != nullptr) {
    w.Bytes(in.message_id, in.message_id_len);
  } else {
    w.Written(WriteMessageId(store_name, address, DatumGetInt64(in.value[kRevision]), w.p));
  }
  w.Text(operation);
  w.Text(partition);
  w.Text(value_type);
  if (in.isnull[kOccurredAt])
    w.Null();
  else
    w.Written(static_cast<int>(store::FormatUtcMicros(DatumGetTimestampTz(in.value[kOccurredAt]), w.p)));
  w.Text(causation_id);
  w.Text(content_type);
  w.Text(fingerprint);
  if (!in.isnull[kSerializerId]) w.Text(serializer_id);
  w.Text(correlation_id);
  if (in.isnull[kSchemaVersion])
    w.Null();
  else
    w.Integer(DatumGetInt32(in.value[kSchemaVersion]));
  if (in.isnull[kGlobalPosition])
    w.Null();
  else
    w.Integer(DatumGetInt64(in.value[kGlobalPosition]));

  int length = static_cast<int>(w.p - base);
  if (static_cast<Size>(length) > bound) elog(PANIC, "statesman: a message overran its buffer");
  if (w.totallen > static_cast<int>(JENTRY_OFFLENMASK) || length - VARHDRSZ > static_cast<int>(JENTRY_OFFLENMASK))
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
