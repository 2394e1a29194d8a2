// statesman._message(…): builds one statesman.state-change/v1 message as jsonb (SPEC §5).
//
// Built directly as a JsonbValue tree: jsonb_build_object would look up each argument's type
// category on every row, which dominated read_feed. This function holds no C++ object with a
// destructor, so the PostgreSQL calls below may ereport freely.
#include "statesman/pg/guard.hpp"

extern "C" {
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

PG_FUNCTION_INFO_V1(statesman_message);
}

#include "statesman/store/message.hpp"

namespace statesman::pg {
namespace {

// Argument positions of statesman._message.
enum MessageArg {
  kStore, kEpoch, kAddress, kRoot, kPath, kPartition, kRevision, kGlobalPosition, kOccurredAt,
  kOperation, kStatus, kValueType, kSchemaVersion, kSource, kFingerprint, kContentType,
  kSerializerId, kPayload, kCorrelationId, kCausationId, kMetadata, kError
};

void PushKey(JsonbParseState **state, const char *key) {
  JsonbValue k;
  k.type = jbvString;
  k.val.string.val = const_cast<char *>(key);
  k.val.string.len = static_cast<int>(strlen(key));
  pushJsonbValue(state, WJB_KEY, &k);
}

void PushNull(JsonbParseState **state) {
  JsonbValue v;
  v.type = jbvNull;
  pushJsonbValue(state, WJB_VALUE, &v);
}

void PushString(JsonbParseState **state, const char *key, char *data, int length) {
  PushKey(state, key);
  JsonbValue v;
  v.type = jbvString;
  v.val.string.val = data;
  v.val.string.len = length;
  pushJsonbValue(state, WJB_VALUE, &v);
}

// A text argument as a JSON string, or null.
void PushTextArg(JsonbParseState **state, const char *key, FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno)) {
    PushKey(state, key);
    PushNull(state);
    return;
  }
  text *t = PG_GETARG_TEXT_PP(argno);
  PushString(state, key, VARDATA_ANY(t), static_cast<int>(VARSIZE_ANY_EXHDR(t)));
}

// An integer argument as an exact JSON number, or null.
void PushIntegerArg(JsonbParseState **state, const char *key, FunctionCallInfo fcinfo, int argno,
                    bool is_int4) {
  PushKey(state, key);
  if (PG_ARGISNULL(argno)) {
    PushNull(state);
    return;
  }
  JsonbValue v;
  v.type = jbvNumeric;
  v.val.numeric = int64_to_numeric(is_int4 ? PG_GETARG_INT32(argno) : PG_GETARG_INT64(argno));
  pushJsonbValue(state, WJB_VALUE, &v);
}

}  // namespace
}  // namespace statesman::pg

// statesman._message(store, epoch, address, root, path, partition, revision, global_position,
//   occurred_at, operation, status, value_type, schema_version, source, fingerprint,
//   content_type, serializer_id, payload, correlation_id, causation_id, metadata, error) → jsonb
extern "C" Datum statesman_message(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  namespace store = statesman::store;
  for (int required : {kStore, kEpoch, kAddress, kRevision})
    if (PG_ARGISNULL(required)) PG_RETURN_NULL();

  JsonbParseState *state = nullptr;
  pushJsonbValue(&state, WJB_BEGIN_OBJECT, nullptr);

  PushString(&state, "schema", const_cast<char *>(store::kMessageSchema),
             static_cast<int>(strlen(store::kMessageSchema)));

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
  PushString(&state, "messageId", id.data, id.len);

  PushTextArg(&state, "store", fcinfo, kStore);
  PushTextArg(&state, "root", fcinfo, kRoot);
  PushTextArg(&state, "path", fcinfo, kPath);
  PushTextArg(&state, "partition", fcinfo, kPartition);
  PushTextArg(&state, "address", fcinfo, kAddress);
  PushIntegerArg(&state, "revision", fcinfo, kRevision, false);
  PushIntegerArg(&state, "globalPosition", fcinfo, kGlobalPosition, false);

  char *epoch = static_cast<char *>(palloc(UUID_LEN * 2 + 5));
  store::FormatUuid(PG_GETARG_UUID_P(kEpoch)->data, epoch);
  PushString(&state, "epoch", epoch, UUID_LEN * 2 + 4);

  if (PG_ARGISNULL(kOccurredAt)) {
    PushKey(&state, "occurredAt");
    PushNull(&state);
  } else {
    char *occurred = static_cast<char *>(palloc(store::kUtcTextSize));
    store::FormatUtcMicros(PG_GETARG_TIMESTAMPTZ(kOccurredAt), occurred);
    PushString(&state, "occurredAt", occurred, static_cast<int>(strlen(occurred)));
  }

  PushTextArg(&state, "operation", fcinfo, kOperation);
  PushTextArg(&state, "status", fcinfo, kStatus);
  PushTextArg(&state, "valueType", fcinfo, kValueType);
  PushIntegerArg(&state, "schemaVersion", fcinfo, kSchemaVersion, true);
  PushTextArg(&state, "source", fcinfo, kSource);
  PushTextArg(&state, "fingerprint", fcinfo, kFingerprint);
  PushTextArg(&state, "contentType", fcinfo, kContentType);
  if (!PG_ARGISNULL(kSerializerId)) PushTextArg(&state, "serializerId", fcinfo, kSerializerId);

  if (PG_ARGISNULL(kPayload)) {
    PushKey(&state, "payload");
    PushNull(&state);
  } else {
    bytea *payload = PG_GETARG_BYTEA_PP(kPayload);
    size_t length = VARSIZE_ANY_EXHDR(payload);
    size_t encoded = store::Base64Length(length);
    if (encoded > static_cast<size_t>(JENTRY_OFFLENMASK))
      ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                      errmsg("payload of %s is too large for a jsonb message", text_to_cstring(address))));
    char *b64 = static_cast<char *>(palloc(encoded + 1));
    store::Base64Encode(reinterpret_cast<const unsigned char *>(VARDATA_ANY(payload)), length, b64);
    PushString(&state, "payload", b64, static_cast<int>(encoded));
  }

  PushTextArg(&state, "correlationId", fcinfo, kCorrelationId);
  PushTextArg(&state, "causationId", fcinfo, kCausationId);
  PushKey(&state, "metadata");
  if (PG_ARGISNULL(kMetadata)) {
    PushNull(&state);
  } else {
    Jsonb *metadata = PG_GETARG_JSONB_P(kMetadata);
    JsonbValue v;
    v.type = jbvBinary;
    v.val.binary.data = &metadata->root;
    v.val.binary.len = static_cast<int>(VARSIZE(metadata) - VARHDRSZ);
    pushJsonbValue(&state, WJB_VALUE, &v);
  }
  PushTextArg(&state, "error", fcinfo, kError);

  JsonbValue *object = pushJsonbValue(&state, WJB_END_OBJECT, nullptr);
  PG_RETURN_JSONB_P(JsonbValueToJsonb(object));
}
