// statesman._message(…): builds one statesman.state-change/v1 message as jsonb (docs/design.md §5).
//
// Built directly as a JsonbValue tree: jsonb_build_object would look up each argument's type
// category on every row, which dominated read_feed. This function holds no C++ object with a
// destructor, so the PostgreSQL calls below may ereport freely.
#include "statesman/pg/guard.hpp"

#include <string>

extern "C" {
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

PG_FUNCTION_INFO_V1(statesman_message);
PG_FUNCTION_INFO_V1(statesman_message_text);
}

#include "statesman/feed/message_format.hpp"

static_assert(statesman::store::kMaxMessageBytes == JENTRY_OFFLENMASK,
              "the append functions' size check must use jsonb's own limit");

namespace statesman::pg {
namespace {

// Argument positions of statesman._message.
enum MessageArg {
  kStore,
  kEpoch,
  kAddress,
  kRoot,
  kPath,
  kPartition,
  kRevision,
  kGlobalPosition,
  kOccurredAt,
  kOperation,
  kStatus,
  kValueType,
  kSchemaVersion,
  kSource,
  kFingerprint,
  kContentType,
  kSerializerId,
  kPayload,
  kCorrelationId,
  kCausationId,
  kMetadata,
  kError
};

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
};

void SetNull(Fields &f, Key key) { f.value[key].type = jbvNull; }

void SetString(Fields &f, Key key, char *data, int length) {
  f.value[key].type = jbvString;
  f.value[key].val.string.val = data;
  f.value[key].val.string.len = length;
}

// A text argument as a JSON string, or null.
void SetTextArg(Fields &f, Key key, FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno)) return SetNull(f, key);
  text *t = PG_GETARG_TEXT_PP(argno);
  SetString(f, key, VARDATA_ANY(t), static_cast<int>(VARSIZE_ANY_EXHDR(t)));
}

// An integer argument as an exact JSON number, or null.
void SetIntegerArg(Fields &f, Key key, FunctionCallInfo fcinfo, int argno, bool is_int4) {
  if (PG_ARGISNULL(argno)) return SetNull(f, key);
  f.value[key].type = jbvNumeric;
  f.value[key].val.numeric = int64_to_numeric(is_int4 ? PG_GETARG_INT32(argno) : PG_GETARG_INT64(argno));
}

}  // namespace
}  // namespace statesman::pg

namespace statesman::pg {
namespace {

// Fills f from the arguments of statesman._message (none of the required ones is NULL).
void GatherFields(FunctionCallInfo fcinfo, Fields &f) {
  namespace store = statesman::store;
  for (int k = 0; k < kKeyCount; ++k) {
    f.value[k].type = jbvNull;
    f.omit[k] = false;
  }

  SetString(f, kSchemaKey, const_cast<char *>(store::kMessageSchema), static_cast<int>(strlen(store::kMessageSchema)));

  // messageId = {store}/{address}#{revision}
  text *store_name = PG_GETARG_TEXT_PP(kStore);
  text *address = PG_GETARG_TEXT_PP(kAddress);
  int64 revision = PG_GETARG_INT64(kRevision);
  StringInfoData id;
  initStringInfo(&id);
  appendBinaryStringInfo(&id, VARDATA_ANY(store_name), static_cast<int>(VARSIZE_ANY_EXHDR(store_name)));
  appendStringInfoChar(&id, '/');
  appendBinaryStringInfo(&id, VARDATA_ANY(address), static_cast<int>(VARSIZE_ANY_EXHDR(address)));
  appendStringInfo(&id, "#" INT64_FORMAT, revision);
  SetString(f, kMessageIdKey, id.data, id.len);

  SetTextArg(f, kStoreKey, fcinfo, kStore);
  SetTextArg(f, kRootKey, fcinfo, kRoot);
  SetTextArg(f, kPathKey, fcinfo, kPath);
  SetTextArg(f, kPartitionKey, fcinfo, kPartition);
  SetTextArg(f, kAddressKey, fcinfo, kAddress);
  SetIntegerArg(f, kRevisionKey, fcinfo, kRevision, false);
  SetIntegerArg(f, kGlobalPositionKey, fcinfo, kGlobalPosition, false);

  char *epoch = static_cast<char *>(palloc(UUID_LEN * 2 + 5));
  store::FormatUuid(PG_GETARG_UUID_P(kEpoch)->data, epoch);
  SetString(f, kEpochKey, epoch, UUID_LEN * 2 + 4);

  if (!PG_ARGISNULL(kOccurredAt)) {
    char *occurred = static_cast<char *>(palloc(store::kUtcTextSize));
    store::FormatUtcMicros(PG_GETARG_TIMESTAMPTZ(kOccurredAt), occurred);
    SetString(f, kOccurredAtKey, occurred, static_cast<int>(strlen(occurred)));
  }

  SetTextArg(f, kOperationKey, fcinfo, kOperation);
  SetTextArg(f, kStatusKey, fcinfo, kStatus);
  SetTextArg(f, kValueTypeKey, fcinfo, kValueType);
  SetIntegerArg(f, kSchemaVersionKey, fcinfo, kSchemaVersion, true);
  SetTextArg(f, kSourceKey, fcinfo, kSource);
  SetTextArg(f, kFingerprintKey, fcinfo, kFingerprint);
  SetTextArg(f, kContentTypeKey, fcinfo, kContentType);
  SetTextArg(f, kSerializerIdKey, fcinfo, kSerializerId);
  f.omit[kSerializerIdKey] = PG_ARGISNULL(kSerializerId);  // serializerId is omitted when absent

  if (!PG_ARGISNULL(kPayload)) {
    bytea *payload = PG_GETARG_BYTEA_PP(kPayload);
    size_t length = VARSIZE_ANY_EXHDR(payload);
    size_t encoded = store::Base64Length(length);
    if (encoded > static_cast<size_t>(JENTRY_OFFLENMASK))
      ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                      errmsg("payload of %s is too large for a jsonb message", text_to_cstring(address))));
    char *b64 = static_cast<char *>(palloc(encoded + 1));
    store::Base64Encode(reinterpret_cast<const unsigned char *>(VARDATA_ANY(payload)), length, b64);
    SetString(f, kPayloadKey, b64, static_cast<int>(encoded));
  }

  SetTextArg(f, kCorrelationIdKey, fcinfo, kCorrelationId);
  SetTextArg(f, kCausationIdKey, fcinfo, kCausationId);
  if (!PG_ARGISNULL(kMetadata)) {
    Jsonb *metadata = PG_GETARG_JSONB_P(kMetadata);
    f.value[kMetadataKey].type = jbvBinary;
    f.value[kMetadataKey].val.binary.data = &metadata->root;
    f.value[kMetadataKey].val.binary.len = static_cast<int>(VARSIZE(metadata) - VARHDRSZ);
  }
  SetTextArg(f, kErrorKey, fcinfo, kError);
}

// A string as JSON, escaped exactly as PostgreSQL's escape_json does (so the text equals
// jsonb's output), from a buffer that need not be NUL-terminated.
void AppendJsonString(StringInfo buf, const char *data, int length) {
  appendStringInfoCharMacro(buf, '"');
  const char *run = data;  // the start of characters that need no escape
  const char *end = data + length;
  for (const char *p = data; p < end; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    appendBinaryStringInfo(buf, run, static_cast<int>(p - run));
    run = p + 1;
    switch (c) {
      case '\b': appendBinaryStringInfo(buf, "\\b", 2); break;
      case '\f': appendBinaryStringInfo(buf, "\\f", 2); break;
      case '\n': appendBinaryStringInfo(buf, "\\n", 2); break;
      case '\r': appendBinaryStringInfo(buf, "\\r", 2); break;
      case '\t': appendBinaryStringInfo(buf, "\\t", 2); break;
      case '"': appendBinaryStringInfo(buf, "\\\"", 2); break;
      case '\\': appendBinaryStringInfo(buf, "\\\\", 2); break;
      default: appendStringInfo(buf, "\\u%04x", static_cast<int>(c)); break;
    }
  }
  appendBinaryStringInfo(buf, run, static_cast<int>(end - run));
  appendStringInfoCharMacro(buf, '"');
}

}  // namespace
}  // namespace statesman::pg

// statesman._message(store, epoch, address, root, path, partition, revision, global_position,
//   occurred_at, operation, status, value_type, schema_version, source, fingerprint,
//   content_type, serializer_id, payload, correlation_id, causation_id, metadata, error) → jsonb
extern "C" Datum statesman_message(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  for (int required : {kStore, kEpoch, kAddress, kRevision})
    if (PG_ARGISNULL(required)) PG_RETURN_NULL();
  Fields f;
  GatherFields(fcinfo, f);

  JsonbParseState *state = nullptr;
  pushJsonbValue(&state, WJB_BEGIN_OBJECT, nullptr);
  for (int k = 0; k < kKeyCount; ++k) {
    if (f.omit[k]) continue;
    JsonbValue key;
    key.type = jbvString;
    key.val.string.val = const_cast<char *>(kKeyNames[k]);
    key.val.string.len = static_cast<int>(strlen(kKeyNames[k]));
    pushJsonbValue(&state, WJB_KEY, &key);
    pushJsonbValue(&state, WJB_VALUE, &f.value[k]);
  }
  JsonbValue *object = pushJsonbValue(&state, WJB_END_OBJECT, nullptr);
  PG_RETURN_JSONB_P(JsonbValueToJsonb(object));
}

// statesman._message_text(the same arguments) → text: the same message as JSON text, written
// directly, byte for byte what _message(…)::text gives, without building a jsonb first. For
// sinks outside the database, which send text.
extern "C" Datum statesman_message_text(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  for (int required : {kStore, kEpoch, kAddress, kRevision})
    if (PG_ARGISNULL(required)) PG_RETURN_NULL();
  Fields f;
  GatherFields(fcinfo, f);

  StringInfoData buf;
  initStringInfo(&buf);
  appendStringInfoCharMacro(&buf, '{');
  bool first = true;
  for (int k = 0; k < kKeyCount; ++k) {
    if (f.omit[k]) continue;
    if (!first) appendBinaryStringInfo(&buf, ", ", 2);
    first = false;
    AppendJsonString(&buf, kKeyNames[k], static_cast<int>(strlen(kKeyNames[k])));
    appendBinaryStringInfo(&buf, ": ", 2);
    const JsonbValue &v = f.value[k];
    switch (v.type) {
      case jbvString: AppendJsonString(&buf, v.val.string.val, v.val.string.len); break;
      case jbvNumeric:
        appendStringInfoString(&buf, DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric))));
        break;
      case jbvBinary: (void)JsonbToCString(&buf, v.val.binary.data, v.val.binary.len); break;
      default: appendBinaryStringInfo(&buf, "null", 4); break;
    }
  }
  appendStringInfoCharMacro(&buf, '}');
  PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}
