// SQL-callable functions of the store's write path: append, append_bytes, append_delete,
// address_of, and the transaction-block probe used by read_feed.
//
// Each entry reads its arguments in plain code (no C++ object alive), then runs its C++ body
// under pg::Invoke; every call into PostgreSQL from the body goes through pg::Call.
#include "statesman/pg/guard.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(statesman_append);
PG_FUNCTION_INFO_V1(statesman_append_bytes);
PG_FUNCTION_INFO_V1(statesman_append_delete);
PG_FUNCTION_INFO_V1(statesman_address_of);
PG_FUNCTION_INFO_V1(statesman_in_transaction_block);
}

#include <cstring>
#include <string>

#include "statesman/store/locks.hpp"
#include "statesman/store/names.hpp"

namespace statesman::pg {
namespace {

// Positions of the parameters of the INSERT below.
enum Param {
  kAddress, kRoot, kPath, kPartition, kOperation, kStatus, kValueType, kSchemaVersion, kSource,
  kPayload, kFingerprint, kContentType, kSerializerId, kCorrelationId, kCausationId, kErrorText,
  kMetadata, kFreshUntil, kServeUntil, kParamCount
};

const Oid kParamTypes[kParamCount] = {
    TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, BYTEAOID,
    TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

// The revision is the address's latest + 1. The caller holds the address lock, and under READ
// COMMITTED this statement's snapshot is taken after the lock was granted, so the previous
// revision (committed by the last holder) is visible. The envelope falls back to the root's
// declaration; the root's retention limits come back with the new revision.
constexpr const char *kInsertSql =
    "INSERT INTO statesman.history (address, root, path, partition, revision, occurred_at, operation, "
    "  status, value_type, schema_version, source, payload, fingerprint, content_type, serializer_id, "
    "  correlation_id, causation_id, error, metadata, fresh_until, serve_until) "
    "SELECT $1, $2, $3, $4, "
    "  COALESCE((SELECT h.revision FROM statesman.history h WHERE h.address = $1 "
    "            ORDER BY h.revision DESC LIMIT 1), 0) + 1, "
    "  pg_catalog.clock_timestamp(), $5, $6, $7, $8, $9, $10, "
    "  COALESCE($11, r.fingerprint), COALESCE($12, r.content_type), $13, $14, $15, $16, $17, $18, $19 "
    "FROM (VALUES (1)) AS one(x) LEFT JOIN statesman.roots r ON r.root = $2 "
    "RETURNING revision, "
    "  (SELECT d.max_revisions FROM statesman.roots d WHERE d.root = $2), "
    "  (SELECT d.max_bytes FROM statesman.roots d WHERE d.root = $2)";

// Prunes an address down to its root's limits. Only records that already have a feed position
// are pruned: a record leaves history and feed together, and a record is never pruned before
// it reached the feed. Over-limit records that are not yet sequenced go at a later append.
constexpr const char *kPruneSql =
    "DELETE FROM statesman.history h "
    "USING (SELECT x.revision FROM ("
    "         SELECT k.revision, pg_catalog.row_number() OVER w AS rn, "
    "                pg_catalog.sum(COALESCE(pg_catalog.octet_length(k.payload), 0)) OVER w AS bytes "
    "         FROM statesman.history k WHERE k.address = $1 "
    "         WINDOW w AS (ORDER BY k.revision DESC)) x "
    "       WHERE x.rn > 1 AND (x.rn > $2 OR x.bytes > $3)) doomed "
    "WHERE h.address = $1 AND h.revision = doomed.revision AND h.global_position IS NOT NULL";

const Oid kPruneTypes[3] = {TEXTOID, INT4OID, INT8OID};

SPIPlanPtr insert_plan = nullptr;
SPIPlanPtr prune_plan = nullptr;

SPIPlanPtr PreparedPlan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *types) {
  if (*slot == nullptr) {
    *slot = Call([&] {
      SPIPlanPtr plan = SPI_prepare(sql, nargs, const_cast<Oid *>(types));
      if (plan == nullptr) elog(ERROR, "statesman: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
      SPI_keepplan(plan);
      return plan;
    });
  }
  return *slot;
}

// One record to append, as read from the SQL arguments.
struct AppendRequest {
  const char *root = nullptr;
  const char *path = nullptr;
  const char *partition = nullptr;
  const char *operation = nullptr;
  Datum values[kParamCount] = {};
  char nulls[kParamCount] = {};  // SPI convention: 'n' null, ' ' not null
};

struct AppendResult {
  char *address;  // palloc'd in the caller's context
  int64 revision;
};

void SetArg(AppendRequest &req, Param param, FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno)) {
    req.nulls[param] = 'n';
  } else {
    req.values[param] = PG_GETARG_DATUM(argno);
    req.nulls[param] = ' ';
  }
}

// cstring of a text argument, or nullptr for SQL NULL. Plain code: may ereport.
const char *TextArg(FunctionCallInfo fcinfo, int argno) {
  return PG_ARGISNULL(argno) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

// Appends one record under its address lock and applies the root's retention.
AppendResult AppendRecord(AppendRequest &req) {
  std::string address = store::CanonicalAddress(req.root, req.path, req.partition);
  store::CheckOperation(req.operation);
  bool tombstone = std::strcmp(req.operation, "delete") == 0;
  if (tombstone && req.nulls[kPayload] != 'n')
    throw Error(sqlstate::kInvalidParameterValue, "a 'delete' record carries no payload",
                "Use statesman.append_delete(root, path), or pass payload => NULL.");
  if (!tombstone && req.nulls[kPayload] == 'n')
    throw Error(sqlstate::kNullValueNotAllowed, "payload must not be NULL for a 'put' record",
                "Use statesman.append_delete(root, path) to record a deletion.");
  std::string root = store::LowerName(req.root);
  // A tombstone has no payload, so no content type of its own: the root's declaration applies,
  // whichever function wrote it.
  if (tombstone) req.nulls[kContentType] = 'n';

  MemoryContext caller_context = CurrentMemoryContext;
  Call([&] {
    req.values[kAddress] = PointerGetDatum(cstring_to_text_with_len(address.data(), address.size()));
    req.values[kRoot] = PointerGetDatum(cstring_to_text_with_len(root.data(), root.size()));
    req.values[kPath] = CStringGetTextDatum(req.path);
    req.values[kPartition] = CStringGetTextDatum(req.partition);
    req.values[kOperation] = CStringGetTextDatum(req.operation);
  });
  req.nulls[kAddress] = req.nulls[kRoot] = req.nulls[kPath] = req.nulls[kPartition] = req.nulls[kOperation] = ' ';

  // Serialise writers of this address until commit: revision r+1 is only ever written after
  // revision r's transaction has ended, which is what keeps the feed in per-address order.
  store::LockKey key = store::AddressLockKey(address);
  Call([&] {
    DirectFunctionCall2(pg_advisory_xact_lock_int4, Int32GetDatum(key.space), Int32GetDatum(key.id));
  });

  Call([] {
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "statesman: SPI_connect failed");
  });
  SPIPlanPtr insert = PreparedPlan(&insert_plan, kInsertSql, kParamCount, kParamTypes);
  int64 revision = 0;
  bool has_limits = false;
  Datum limits[2] = {0, 0};
  char limit_nulls[2] = {'n', 'n'};
  try {
    Call([&] {
      int rc = SPI_execute_plan(insert, req.values, req.nulls, false, 0);
      if (rc != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
        elog(ERROR, "statesman: append insert failed: %s", SPI_result_code_string(rc));
      HeapTuple row = SPI_tuptable->vals[0];
      TupleDesc desc = SPI_tuptable->tupdesc;
      bool isnull = false;
      revision = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
      for (int i = 0; i < 2; ++i) {
        Datum value = SPI_getbinval(row, desc, i + 2, &isnull);
        if (!isnull) {
          limits[i] = value;  // int4 / int8: by value on 64-bit builds
          limit_nulls[i] = ' ';
          has_limits = true;
        }
      }
    });
  } catch (const PgError &e) {
    // Under REPEATABLE READ / SERIALIZABLE the snapshot can predate the previous revision's
    // commit, so the same revision is computed twice: that is a serialization failure.
    if (e.Data()->sqlerrcode == ERRCODE_UNIQUE_VIOLATION && IsolationUsesXactSnapshot())
      throw Error("40001", "could not serialize access due to a concurrent append to address " + address,
                  "Retry the transaction.");
    throw;
  }

  if (has_limits) {
    SPIPlanPtr prune = PreparedPlan(&prune_plan, kPruneSql, 3, kPruneTypes);
    Datum prune_values[3] = {req.values[kAddress], limits[0], limits[1]};
    char prune_nulls[3] = {' ', limit_nulls[0], limit_nulls[1]};
    Call([&] {
      int rc = SPI_execute_plan(prune, prune_values, prune_nulls, false, 0);
      if (rc != SPI_OK_DELETE) elog(ERROR, "statesman: retention failed: %s", SPI_result_code_string(rc));
    });
  }

  return Call([&] {
    SPI_finish();
    MemoryContextSwitchTo(caller_context);
    return AppendResult{pnstrdup(address.data(), address.size()), revision};
  });
}

// Returns the one (address, revision) row of an append as a materialized set.
Datum ReturnAppendResult(FunctionCallInfo fcinfo, AppendResult result) {
  InitMaterializedSRF(fcinfo, 0);
  ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
  Datum values[2] = {CStringGetTextDatum(result.address), Int64GetDatum(result.revision)};
  bool nulls[2] = {false, false};
  tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
  return static_cast<Datum>(0);
}

// Serialises a jsonb payload as its UTF-8 text, stored as bytes.
Datum JsonbPayloadBytes(Datum jsonb_datum) {
  Jsonb *jb = DatumGetJsonbP(jsonb_datum);
  StringInfoData out;
  initStringInfo(&out);
  JsonbToCString(&out, &jb->root, VARSIZE(jb));
  return PointerGetDatum(cstring_to_text_with_len(out.data, out.len));
}

// Reads the arguments shared by the three append functions, starting at first_common
// (partition, [operation,] status, value_type, schema_version, source, correlation_id,
// causation_id, metadata, error, fresh_until, serve_until).
void ReadCommonArgs(AppendRequest &req, FunctionCallInfo fcinfo, int argno, bool has_operation) {
  req.partition = TextArg(fcinfo, argno++);
  if (has_operation) req.operation = TextArg(fcinfo, argno++);
  SetArg(req, kStatus, fcinfo, argno++);
  SetArg(req, kValueType, fcinfo, argno++);
  SetArg(req, kSchemaVersion, fcinfo, argno++);
  SetArg(req, kSource, fcinfo, argno++);
  SetArg(req, kCorrelationId, fcinfo, argno++);
  SetArg(req, kCausationId, fcinfo, argno++);
  SetArg(req, kMetadata, fcinfo, argno++);
  SetArg(req, kErrorText, fcinfo, argno++);
  SetArg(req, kFreshUntil, fcinfo, argno++);
  SetArg(req, kServeUntil, fcinfo, argno++);
  req.nulls[kFingerprint] = 'n';  // the envelope's fingerprint comes from the root declaration
}

}  // namespace
}  // namespace statesman::pg

using statesman::pg::AppendRequest;
using statesman::pg::AppendResult;

// statesman.append(root, path, payload jsonb, partition, operation, status, value_type,
//   schema_version, source, correlation_id, causation_id, metadata, error, fresh_until,
//   serve_until) → (address, revision)
extern "C" Datum statesman_append(PG_FUNCTION_ARGS) {
  AppendRequest req;
  req.root = statesman::pg::TextArg(fcinfo, 0);
  req.path = statesman::pg::TextArg(fcinfo, 1);
  req.nulls[statesman::pg::kPayload] = 'n';
  if (!PG_ARGISNULL(2)) {
    req.values[statesman::pg::kPayload] = statesman::pg::JsonbPayloadBytes(PG_GETARG_DATUM(2));
    req.nulls[statesman::pg::kPayload] = ' ';
  }
  req.values[statesman::pg::kContentType] = CStringGetTextDatum("application/json");
  req.nulls[statesman::pg::kContentType] = ' ';
  req.nulls[statesman::pg::kSerializerId] = 'n';
  statesman::pg::ReadCommonArgs(req, fcinfo, 3, true);
  AppendResult result = statesman::pg::Invoke([&] { return statesman::pg::AppendRecord(req); });
  return statesman::pg::ReturnAppendResult(fcinfo, result);
}

// statesman.append_bytes(root, path, payload bytea, content_type, serializer_id, partition,
//   operation, status, …, serve_until) → (address, revision)
extern "C" Datum statesman_append_bytes(PG_FUNCTION_ARGS) {
  AppendRequest req;
  req.root = statesman::pg::TextArg(fcinfo, 0);
  req.path = statesman::pg::TextArg(fcinfo, 1);
  statesman::pg::SetArg(req, statesman::pg::kPayload, fcinfo, 2);
  statesman::pg::SetArg(req, statesman::pg::kContentType, fcinfo, 3);
  statesman::pg::SetArg(req, statesman::pg::kSerializerId, fcinfo, 4);
  statesman::pg::ReadCommonArgs(req, fcinfo, 5, true);
  AppendResult result = statesman::pg::Invoke([&] { return statesman::pg::AppendRecord(req); });
  return statesman::pg::ReturnAppendResult(fcinfo, result);
}

// statesman.append_delete(root, path, partition, status, …, serve_until) → (address, revision)
extern "C" Datum statesman_append_delete(PG_FUNCTION_ARGS) {
  AppendRequest req;
  req.root = statesman::pg::TextArg(fcinfo, 0);
  req.path = statesman::pg::TextArg(fcinfo, 1);
  req.operation = "delete";
  req.nulls[statesman::pg::kPayload] = 'n';
  req.nulls[statesman::pg::kContentType] = 'n';
  req.nulls[statesman::pg::kSerializerId] = 'n';
  statesman::pg::ReadCommonArgs(req, fcinfo, 2, false);
  AppendResult result = statesman::pg::Invoke([&] { return statesman::pg::AppendRecord(req); });
  return statesman::pg::ReturnAppendResult(fcinfo, result);
}

// statesman.address_of(root, path, partition) → the canonical address, validating each part.
extern "C" Datum statesman_address_of(PG_FUNCTION_ARGS) {
  const char *root = statesman::pg::TextArg(fcinfo, 0);
  const char *path = statesman::pg::TextArg(fcinfo, 1);
  const char *partition = statesman::pg::TextArg(fcinfo, 2);
  char *address = statesman::pg::Invoke([&] {
    std::string canonical = statesman::store::CanonicalAddress(root, path, partition);
    return statesman::pg::Call([&] { return pnstrdup(canonical.data(), canonical.size()); });
  });
  PG_RETURN_TEXT_P(cstring_to_text(address));
}

// statesman._in_transaction_block() → true inside BEGIN … COMMIT.
extern "C" Datum statesman_in_transaction_block(PG_FUNCTION_ARGS) {
  PG_RETURN_BOOL(IsTransactionBlock());
}
