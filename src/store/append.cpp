// SQL-callable functions of the store's write path: append, append_bytes, append_delete,
// address_of, and the transaction-block probe used by read_feed.
//
// Each entry reads its arguments in plain code (no C++ object alive), then runs its C++ body
// under pg::Invoke; every call into PostgreSQL from the body goes through pg::Call.
#include "statesman/worker/workers.hpp"
#include "statesman/pg/relations.hpp"

extern "C" {
#include "access/detoast.h"
#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "nodes/execnodes.h"
#include "nodes/makefuncs.h"
#include "nodes/primnodes.h"
#include "nodes/supportnodes.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_proc.h"
#include "utils/acl.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/xid8.h"
#include "storage/bufmgr.h"

PG_FUNCTION_INFO_V1(statesman_append);
PG_FUNCTION_INFO_V1(statesman_append_bytes);
PG_FUNCTION_INFO_V1(statesman_append_delete);
PG_FUNCTION_INFO_V1(statesman_append_support);
PG_FUNCTION_INFO_V1(statesman_append_row);
PG_FUNCTION_INFO_V1(statesman_append_bytes_row);
PG_FUNCTION_INFO_V1(statesman_append_delete_row);
PG_FUNCTION_INFO_V1(statesman_address_of);
PG_FUNCTION_INFO_V1(statesman_in_transaction_block);
PG_FUNCTION_INFO_V1(statesman_roots_changed);
}

#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <unordered_map>

#include "statesman/feed/message_format.hpp"
#include "statesman/feed/ticks.hpp"
#include "statesman/pg/jsonb_format.hpp"
#include "statesman/store/append.hpp"
#include "statesman/store/locks.hpp"
#include "statesman/store/names.hpp"

namespace statesman::pg {
namespace {

// Positions of the parameters of the INSERT below.
enum Param {
  kAddress,
  kRoot,
  kPath,
  kPartition,
  kOperation,
  kStatus,
  kValueType,
  kSchemaVersion,
  kSource,
  kPayload,
  kFingerprint,
  kContentType,
  kSerializerId,
  kCorrelationId,
  kCausationId,
  kErrorText,
  kMetadata,
  kFreshUntil,
  kServeUntil,
  kRevision,
  kTxid,
  kParamCount
};

const Oid kParamTypes[kParamCount] = {TEXTOID, TEXTOID, TEXTOID,  TEXTOID,        TEXTOID,        TEXTOID, TEXTOID,
                                      INT4OID, TEXTOID, BYTEAOID, TEXTOID,        TEXTOID,        TEXTOID, TEXTOID,
                                      TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, XID8OID};

// The statements below run with the caller's search_path (the append functions are not
// SECURITY DEFINER, see AppendRecord), so every relation, function and operator in them is
// schema-qualified: nothing a caller puts on its search_path can capture them.
//
// A plain VALUES insert: the revision and the envelope's fallbacks are looked up beforehand
// by direct index probes. The append runs it only when InsertDirect cannot write the row
// itself (the table has a trigger, a rule, another column shape, ...). $21 is
// the transaction's top-level id, taken before the INSERT draws the record's id (the ticks
// rely on that order, see statesman.sequence_feed).
constexpr const char *kInsertSql =
    "INSERT INTO statesman.history (address, root, path, partition, revision, occurred_at, operation, "
    "  status, value_type, schema_version, source, payload, fingerprint, content_type, serializer_id, "
    "  correlation_id, causation_id, error, metadata, fresh_until, serve_until, txid) "
    "VALUES ($1, $2, $3, $4, $20, pg_catalog.clock_timestamp(), $5, $6, $7, $8, $9, $10, "
    "  $11, $12, $13, $14, $15, $16, $17, $18, $19, $21)";

// Applies the root's retention to the address (statesman._prune): records that every enabled
// outbox has delivered go; the rest wait in statesman.prune_pending for the worker.
constexpr const char *kPruneSql = "SELECT statesman._prune($1, $2, $3)";
// (address, max_revisions, max_bytes)
const Oid kPruneTypes[3] = {TEXTOID, INT4OID, INT8OID};

// After a tick of this transaction's own (sequence_feed called after its appends), each
// further append gets a tick of its own (see statesman._tick_own_record).
constexpr const char *kTickOwnSql = "SELECT statesman._tick_own_record()";

SPIPlanPtr insert_plan = nullptr;
SPIPlanPtr prune_plan = nullptr;
SPIPlanPtr tick_own_plan = nullptr;

// Whether the installed extension is this library's version, as last checked in this backend.
// Only a match is remembered, and only until the catalog changes: every upgrade, DROP EXTENSION
// and CREATE EXTENSION replaces functions (a pg_proc invalidation) and tables (a relcache one),
// and either resets it. So an append reads pg_extension only after such a change, not each time.
bool installed_version_checked = false;
bool version_callbacks_registered = false;

// Where each parameter goes in statesman.history's rows, for the direct insert (see
// InsertRecord). Built from the catalog on first use; forgotten with the version check, at
// any change of a relation (ALTER TABLE, CREATE TRIGGER and DROP/CREATE EXTENSION all send one).
struct InsertShape {
  bool built = false;
  bool direct = false;  // the table has exactly the expected columns and no defaults to apply
  Oid history = InvalidOid;
  Oid id_sequence = InvalidOid;
  AttrNumber id_attno = 0;
  AttrNumber occurred_at_attno = 0;
  AttrNumber param_attno[kParamCount] = {};
  // Indexes no appended row enters (see NeverEntered): not opened by InsertDirect.
  static constexpr int kMaxSkipped = 4;
  Oid skipped_index[kMaxSkipped] = {};
  int skipped = 0;
};
InsertShape insert_shape;
// The ledger's catalog facts (Ledger, below), kept like the shape.
bool ledger_known = false;
// The append functions' result row type, (address, revision) as pg_proc declares it, registered
// (BlessTupleDesc) for the plain twins' composite values; in TopMemoryContext (AppendResultDesc).
TupleDesc result_desc = nullptr;
// For each append function (in the order of kAppendShapes): its plain twin, as the planner's
// support last looked it up (see PlainTwin), and, for a twin, the declared function whose
// EXECUTE privilege it checks (see CheckDeclaredPrivilege). InvalidOid: not looked up yet.
constexpr int kAppendFunctions = 3;
Oid plain_twin[kAppendFunctions] = {};
bool plain_twin_known[kAppendFunctions] = {};
Oid declared_function[kAppendFunctions] = {};
// The roots' declarations as this session last read them (see CachedRoot), kept like the shape
// and also forgotten when statesman.roots changes (its trigger, statesman._roots_changed,
// invalidates the table in every session at commit, and in this one at once).
struct CachedRoot {
  std::optional<std::string> fingerprint, content_type;
  std::optional<int32> max_revisions;
  std::optional<int64> max_bytes;
};
std::unordered_map<std::string, CachedRoot> *root_cache = nullptr;
constexpr size_t kRootCacheSize = 1024;  // distinct roots kept; then the cache starts over

void ForgetCatalogFacts() {
  installed_version_checked = false;
  insert_shape = InsertShape{};
  ledger_known = false;
  if (root_cache != nullptr) root_cache->clear();
  if (result_desc != nullptr) FreeTupleDesc(result_desc);
  result_desc = nullptr;
  for (int i = 0; i < kAppendFunctions; ++i) {
    plain_twin[i] = InvalidOid;
    plain_twin_known[i] = false;
    declared_function[i] = InvalidOid;
  }
}
void ForgetVersionCheck(Datum, int, uint32) { ForgetCatalogFacts(); }
void ForgetVersionCheckRel(Datum, Oid) { ForgetCatalogFacts(); }

// extversion of statesman in pg_extension (palloc'd), or nullptr when it is not installed.
// Plain PostgreSQL code: run it under pg::Call.
char *InstalledVersion() {
  Relation rel = table_open(ExtensionRelationId, AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ, CStringGetDatum("statesman"));
  SysScanDesc scan = systable_beginscan(rel, ExtensionNameIndexId, true, nullptr, 1, &key);
  HeapTuple tuple = systable_getnext(scan);
  char *version = nullptr;
  if (HeapTupleIsValid(tuple)) {
    bool isnull = true;
    Datum value = heap_getattr(tuple, Anum_pg_extension_extversion, RelationGetDescr(rel), &isnull);
    if (!isnull) version = text_to_cstring(DatumGetTextPP(value));
  }
  systable_endscan(scan);
  table_close(rel, AccessShareLock);
  return version;
}

// Has every catalog fact above forgotten at any change of a function or a relation. Plain
// PostgreSQL code: run it under pg::Call.
void RegisterForgetting() {
  if (version_callbacks_registered) return;
  CacheRegisterSyscacheCallback(PROCOID, ForgetVersionCheck, static_cast<Datum>(0));
  CacheRegisterRelcacheCallback(ForgetVersionCheckRel, static_cast<Datum>(0));
  version_callbacks_registered = true;
}

// The library appends only to the SQL objects of its own version (the statements below and
// statesman._prune are this version's). On an older version's objects, between installing a new
// build and ALTER EXTENSION statesman UPDATE, an append fails before it writes anything.
void CheckInstalledVersion() {
  if (installed_version_checked) return;
  char *installed = Call([] {
    RegisterForgetting();
    return InstalledVersion();
  });
  if (installed != nullptr && IsLibraryVersion(installed)) {
    installed_version_checked = true;
    return;
  }
  throw Error(sqlstate::kObjectNotInPrerequisiteState,
              VersionMismatch(installed != nullptr ? installed : "(none)") + "; cannot append",
              "Run ALTER EXTENSION statesman UPDATE in this database.");
}

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

// The defaults of partition, operation and status, as every append function declares them.
constexpr const char *kDroppedPartition = "";
constexpr const char *kDroppedOperation = "put";
constexpr const char *kDroppedStatus = "ok";

// How each append function declares its arguments: how many, how many are required, and where
// the arguments all three share begin (partition, [operation,] status, value_type, …,
// serve_until; see ReadCommonArgs). Every optional argument other than partition, operation and
// status defaults to NULL.
struct AppendShape {
  const char *name;
  int declared;
  int required;
  int first_common;
  bool has_operation;
  const char *plain_twin;  // its plain twin (see SimplifiedCall)
};
constexpr AppendShape kAppend{"append", 15, 3, 3, true, "_append_row"};
constexpr AppendShape kAppendBytes{"append_bytes", 17, 4, 5, true, "_append_bytes_row"};
constexpr AppendShape kAppendDelete{"append_delete", 13, 2, 2, false, "_append_delete_row"};

// Whether the call has no argument argno: the planner dropped the trailing arguments that held
// the values an append function reads for them (statesman_append_support): NULL, or for
// partition, operation and status their defaults ('', 'put', 'ok').
bool Dropped(FunctionCallInfo fcinfo, int argno) { return argno >= PG_NARGS(); }

void SetArg(AppendRequest &req, Param param, FunctionCallInfo fcinfo, int argno) {
  if (Dropped(fcinfo, argno) || PG_ARGISNULL(argno)) {
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

// A text argument that is both validated (as a cstring) and inserted as it came (the Datum).
const char *TextParamArg(AppendRequest &req, Param param, FunctionCallInfo fcinfo, int argno) {
  SetArg(req, param, fcinfo, argno);
  return TextArg(fcinfo, argno);
}

// SetArg for a text argument whose default the planner may have dropped (see Dropped).
void SetTextArgOr(AppendRequest &req, Param param, FunctionCallInfo fcinfo, int argno, const char *dropped) {
  if (!Dropped(fcinfo, argno)) {
    SetArg(req, param, fcinfo, argno);
    return;
  }
  req.values[param] = CStringGetTextDatum(dropped);
  req.nulls[param] = ' ';
}

// TextParamArg for a text argument whose default the planner may have dropped.
const char *TextParamArgOr(AppendRequest &req, Param param, FunctionCallInfo fcinfo, int argno, const char *dropped) {
  SetTextArgOr(req, param, fcinfo, argno, dropped);
  return Dropped(fcinfo, argno) ? dropped : TextArg(fcinfo, argno);
}

// The ledger's catalog facts: kept between appends, looked up again after any change of a
// relation or a function (DROP/CREATE EXTENSION, ALTER EXTENSION UPDATE, an owner change).
struct Ledger {
  Oid history;
  Oid primary_key;
  Oid roots;
  Oid roots_key;
  Oid owner;
  AttrNumber address_attno;
  AttrNumber revision_attno;
};

// A root's declaration (docs/design.md §2): envelope fallbacks and retention limits.
struct RootDeclaration {
  Datum fingerprint;  // text, or 0 with the matching null flag
  Datum content_type;
  bool fingerprint_null = true;
  bool content_type_null = true;
  bool has_max_revisions = false;
  bool has_max_bytes = false;
  int32 max_revisions = 0;
  int64 max_bytes = 0;
};

Ledger LookupLedgerInCatalog();

// The ledger's facts, from the catalog after any change of a relation or function (see
// ForgetCatalogFacts), else as last looked up. Plain PostgreSQL code: run it under pg::Call.
Ledger LookupLedger() {
  static Ledger known;
  if (!ledger_known) {
    known = LookupLedgerInCatalog();
    ledger_known = true;
  }
  return known;
}

Ledger LookupLedgerInCatalog() {
  Oid schema = get_namespace_oid("statesman", false);
  Ledger ledger{};
  ledger.history = get_relname_relid("history", schema);
  ledger.primary_key = get_relname_relid("history_pkey", schema);
  ledger.roots = get_relname_relid("roots", schema);
  ledger.roots_key = get_relname_relid("roots_pkey", schema);
  if (!OidIsValid(ledger.history) || !OidIsValid(ledger.primary_key) || !OidIsValid(ledger.roots) ||
      !OidIsValid(ledger.roots_key))
    elog(ERROR, "statesman: the tables statesman.history and statesman.roots or their keys are missing");
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(ledger.history));
  if (!HeapTupleIsValid(tuple)) elog(ERROR, "statesman: cache lookup failed for statesman.history");
  ledger.owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
  ReleaseSysCache(tuple);
  ledger.address_attno = get_attnum(ledger.history, "address");
  ledger.revision_attno = get_attnum(ledger.history, "revision");
  return ledger;
}

// Probes the leading text key of an index and hands the first row visible to `snapshot`,
// scanning in `direction`, to `use` (which copies what it needs). Returns whether a row was
// found. Plain PostgreSQL code: run it under pg::Call.
// With `at_least`, only rows whose second index column (a bigint) is at least that are probed.
// Both relations are locked in `mode`: the append probes the ledger in the mode its insert
// takes next (RowExclusiveLock), so that each relation is locked once, not in two modes.
template <typename Use>
bool ProbeTextKey(Oid table_oid, Oid index_oid, LOCKMODE mode, Snapshot snapshot, Datum key_value,
                  ScanDirection direction, Use &&use, const int64 *at_least = nullptr) {
  Relation heap = table_open(table_oid, mode);
  Relation index = index_open(index_oid, mode);
  ScanKeyData keys[2];
  ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[0], F_TEXTEQ,
                         key_value);
  int nkeys = 1;
  if (at_least != nullptr)
    ScanKeyEntryInitialize(&keys[nkeys++], 0, 2, BTGreaterEqualStrategyNumber, InvalidOid, InvalidOid, F_INT8GE,
                           Int64GetDatum(*at_least));
  IndexScanDesc scan = index_beginscan(heap, index, snapshot, nkeys, 0);
  index_rescan(scan, keys, nkeys, nullptr, 0);
  TupleTableSlot *slot = table_slot_create(heap, nullptr);
  bool found = index_getnext_slot(scan, direction, slot);
  if (found) use(slot);
  ExecDropSingleTupleTableSlot(slot);
  index_endscan(scan);
  index_close(index, NoLock);
  table_close(heap, NoLock);
  return found;
}

// The address's latest revision visible to `snapshot` (0 when none): a backward probe of the
// primary key (address, revision). A backward scan reads every entry of the address on the
// leaf page it lands on before it returns the first, so with a hint (the revision last appended
// to the address, by any session when the hints are shared; 0 for none) it first probes only
// the revisions from the hint up, usually one or two entries; when none of those is visible
// (the hint's transaction rolled back, or it is another address's) it probes them all. Either
// way the answer is the highest visible revision: the hint only bounds where to look first.
// Plain PostgreSQL code: run it under pg::Call.
int64 LatestRevision(const Ledger &ledger, Snapshot snapshot, Datum address, int64 hint) {
  int64 latest = 0;
  auto take = [&](TupleTableSlot *slot) {
    bool isnull = false;
    Datum revision = slot_getattr(slot, ledger.revision_attno, &isnull);
    if (!isnull) latest = DatumGetInt64(revision);
  };
  if (hint > 0 && ProbeTextKey(ledger.history, ledger.primary_key, RowExclusiveLock, snapshot, address,
                               BackwardScanDirection, take, &hint))
    return latest;
  ProbeTextKey(ledger.history, ledger.primary_key, RowExclusiveLock, snapshot, address, BackwardScanDirection, take);
  return latest;
}

// The scope of the ledger's revision hints: the database and the ledger's storage, which a
// TRUNCATE, VACUUM FULL or a new ledger (the extension dropped and created again) replaces.
uint64 HintScope(Relation history) {
  return (static_cast<uint64>(MyDatabaseId) << 32) | static_cast<uint64>(history->rd_node.relNode);
}

// A row's tuple id packed into a hint (never 0: offsets start at 1), and back.
uint64 PackRow(const ItemPointerData &tid) {
  return (static_cast<uint64>(ItemPointerGetBlockNumberNoCheck(&tid)) << 16) | ItemPointerGetOffsetNumberNoCheck(&tid);
}

// Whether block is within the table, the caller holding a lock on it. Asking the kernel
// (RelationGetNumberOfBlocks, an lseek) on every append was a system call that neither a bare
// INSERT nor PgQ's insert makes, so the size this process last learnt is asked first: its smgr
// entry keeps it (smgrnblocks stores what it finds, this process's own extensions add to it), and
// it can be stale only by being too small, as other processes extend the table. The table only
// shrinks by a truncation (VACUUM's, under AccessExclusiveLock), and smgrtruncate sends the
// shared invalidation that closes every process's smgr entry of the table, the remembered size
// with it, before it touches the file; a process takes in that invalidation when it next locks
// the table, before it reads it again. This is what heap inserts rely on for the insertion target
// block that the same entry keeps. A block at or past the remembered size asks the kernel, which
// also remembers the answer.
bool BlockWithin(Relation rel, BlockNumber block) {
  const BlockNumber known = RelationGetSmgr(rel)->smgr_cached_nblocks[MAIN_FORKNUM];
  if (known != InvalidBlockNumber && block < known) return true;
  return block < RelationGetNumberOfBlocks(rel);
}

// Whether the row that `hint` names is the address's row at the hint's revision and visible to
// `snapshot` (read under the address lock, after it was granted). Then that revision is the
// latest (docs/design.md §2.4): every append notes its revision and row in the address's slot
// before it commits, while it holds the address lock, so the slot holds the last revision
// committed unless a third address of the bucket took the slot since (then it holds no row of
// this address) or the last writer rolled back (then its row is not visible). Plain PostgreSQL
// code: run it under pg::Call.
bool HintHolds(Relation history, const Ledger &ledger, Snapshot snapshot, Datum address,
               const store::RevisionHints::Hint &hint) {
  if (hint.revision <= 0 || hint.where == 0) return false;
  const BlockNumber block = static_cast<BlockNumber>(hint.where >> 16);
  const OffsetNumber offset = static_cast<OffsetNumber>(hint.where & 0xFFFF);
  // A VACUUM can have cut the table short since (after the row was deleted).
  if (!BlockWithin(history, block)) return false;
  HeapTupleData tuple;
  ItemPointerSet(&tuple.t_self, block, offset);
  Buffer buffer = InvalidBuffer;
  if (!heap_fetch(history, snapshot, &tuple, &buffer, false)) return false;
  TupleDesc desc = RelationGetDescr(history);
  bool isnull = true;
  Datum revision = heap_getattr(&tuple, ledger.revision_attno, desc, &isnull);
  bool holds = !isnull && DatumGetInt64(revision) == hint.revision;
  if (holds) {
    Datum stored = heap_getattr(&tuple, ledger.address_attno, desc, &isnull);
    holds = !isnull;
    if (holds) {
      const text *a = DatumGetTextPP(stored);
      const text *b = DatumGetTextPP(address);
      holds = VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
              memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b)) == 0;
    }
  }
  ReleaseBuffer(buffer);
  return holds;
}

// The root's declaration, or an empty one (KeepAll, no envelope) when it has none.
RootDeclaration LookupRoot(const Ledger &ledger, Snapshot snapshot, Datum root) {
  RootDeclaration decl;
  ProbeTextKey(ledger.roots, ledger.roots_key, AccessShareLock, snapshot, root, ForwardScanDirection,
               [&](TupleTableSlot *slot) {
                 TupleDesc desc = slot->tts_tupleDescriptor;
                 slot_getallattrs(slot);
                 for (int i = 0; i < desc->natts; ++i) {
                   Form_pg_attribute attr = TupleDescAttr(desc, i);
                   if (attr->attisdropped || slot->tts_isnull[i]) continue;
                   const char *name = NameStr(attr->attname);
                   Datum value = slot->tts_values[i];
                   if (strcmp(name, "fingerprint") == 0) {
                     decl.fingerprint = datumCopy(value, false, -1);
                     decl.fingerprint_null = false;
                   } else if (strcmp(name, "content_type") == 0) {
                     decl.content_type = datumCopy(value, false, -1);
                     decl.content_type_null = false;
                   } else if (strcmp(name, "max_revisions") == 0) {
                     decl.max_revisions = DatumGetInt32(value);
                     decl.has_max_revisions = true;
                   } else if (strcmp(name, "max_bytes") == 0) {
                     decl.max_bytes = DatumGetInt64(value);
                     decl.has_max_bytes = true;
                   }
                 }
               });
  return decl;
}

// The column of statesman.history that each parameter fills.
constexpr const char *kParamColumns[kParamCount] = {
    "address",        "root",   "path",     "partition",   "operation",    "status",        "value_type",
    "schema_version", "source", "payload",  "fingerprint", "content_type", "serializer_id", "correlation_id",
    "causation_id",   "error",  "metadata", "fresh_until", "serve_until",  "revision",      "txid"};

// Whether no row the append writes can enter this index: a partial index whose predicate is
// only `column IS NOT NULL` for the column the append always leaves NULL (legacy_position; the
// index of the positions from before 0.4.0 is such an index). ExecInsertIndexTuples would
// compile and evaluate that predicate for every record and find it false.
bool NeverEntered(Relation index, AttrNumber null_attno) {
  if (null_attno == 0 || RelationGetForm(index)->relam != BTREE_AM_OID) return false;
  List *predicate = RelationGetIndexPredicate(index);
  if (list_length(predicate) != 1 || !IsA(linitial(predicate), NullTest)) return false;
  const NullTest *test = static_cast<const NullTest *>(linitial(predicate));
  if (test->nulltesttype != IS_NOT_NULL || test->argisrow || test->arg == nullptr || !IsA(test->arg, Var)) return false;
  const Var *var = reinterpret_cast<const Var *>(test->arg);
  return var->varattno == null_attno;
}

// Reads statesman.history's columns: the direct insert applies only when every column is one
// it fills (a parameter, the identity `id`, `occurred_at`, or `legacy_position`, left NULL), of
// the type it passes, with no default or generated value it would have to compute; and the
// indexes it need not open (NeverEntered). Plain PostgreSQL code: run it under pg::Call.
InsertShape BuildInsertShape(Relation rel) {
  InsertShape shape;
  shape.built = true;
  AttrNumber legacy_attno = 0;
  shape.history = RelationGetRelid(rel);
  TupleDesc desc = RelationGetDescr(rel);
  bool ok = true;
  for (int i = 0; i < desc->natts && ok; ++i) {
    Form_pg_attribute attr = TupleDescAttr(desc, i);
    if (attr->attisdropped) continue;
    const char *name = NameStr(attr->attname);
    if (attr->attgenerated != '\0') {
      ok = false;
    } else if (strcmp(name, "id") == 0) {
      ok = attr->atttypid == INT8OID && attr->attidentity == ATTRIBUTE_IDENTITY_ALWAYS;
      shape.id_attno = attr->attnum;
    } else if (strcmp(name, "occurred_at") == 0) {
      ok = attr->atttypid == TIMESTAMPTZOID;
      shape.occurred_at_attno = attr->attnum;
    } else if (strcmp(name, "legacy_position") == 0) {
      ok = !attr->attnotnull && !attr->atthasdef;
      legacy_attno = attr->attnum;
    } else {
      int found = -1;
      for (int p = 0; p < kParamCount; ++p)
        if (strcmp(name, kParamColumns[p]) == 0) found = p;
      // A parameter's column: a default does not apply, the INSERT names every one of them.
      ok = found >= 0 && attr->atttypid == kParamTypes[found];
      if (ok) shape.param_attno[found] = attr->attnum;
    }
  }
  for (int p = 0; p < kParamCount && ok; ++p) ok = shape.param_attno[p] != 0;
  ok = ok && shape.id_attno != 0 && shape.occurred_at_attno != 0;
  if (ok) shape.id_sequence = getIdentitySequence(shape.history, shape.id_attno, true);
  shape.direct = ok && OidIsValid(shape.id_sequence);
  if (shape.direct) {
    List *indexes = RelationGetIndexList(rel);
    ListCell *cell;
    foreach (cell, indexes) {
      if (shape.skipped == InsertShape::kMaxSkipped) break;
      Relation index = index_open(lfirst_oid(cell), AccessShareLock);
      if (NeverEntered(index, legacy_attno)) shape.skipped_index[shape.skipped++] = RelationGetRelid(index);
      index_close(index, AccessShareLock);
    }
    list_free(indexes);
  }
  return shape;
}

// ExecOpenIndices without the indexes the shape found no appended row enters: each of the others
// opened with RowExclusiveLock and its IndexInfo built, for ExecInsertIndexTuples and
// ExecCloseIndices.
void OpenIndices(ResultRelInfo *result_rel, const InsertShape &shape) {
  Relation rel = result_rel->ri_RelationDesc;
  result_rel->ri_NumIndices = 0;
  if (!RelationGetForm(rel)->relhasindex) return;
  List *indexes = RelationGetIndexList(rel);
  int count = list_length(indexes);
  if (count == 0) {
    list_free(indexes);
    return;
  }
  result_rel->ri_IndexRelationDescs = static_cast<RelationPtr>(palloc(count * sizeof(Relation)));
  result_rel->ri_IndexRelationInfo = static_cast<IndexInfo **>(palloc(count * sizeof(IndexInfo *)));
  int n = 0;
  ListCell *cell;
  foreach (cell, indexes) {
    Oid oid = lfirst_oid(cell);
    bool skip = false;
    for (int i = 0; i < shape.skipped && !skip; ++i) skip = shape.skipped_index[i] == oid;
    if (skip) continue;
    Relation index = index_open(oid, RowExclusiveLock);
    result_rel->ri_IndexRelationDescs[n] = index;
    result_rel->ri_IndexRelationInfo[n] = BuildIndexInfo(index);
    ++n;
  }
  result_rel->ri_NumIndices = n;
  list_free(indexes);
}

// Inserts the record into statesman.history the way the INSERT statement kInsertSql would,
// without planning or initialising an executor for it: the identity's next value, the row,
// its NOT NULL checks and its entry in every index it belongs to (unique checks included; a
// partial index that no appended row enters is not even opened, see NeverEntered), then the
// command counter moves on so that the rest of the transaction sees the row. Returns false, having
// done nothing, when the table has something only the executor applies (a trigger, a rule, a
// CHECK constraint, row security, another column shape): the caller then runs the INSERT.
// Where the row went is stored in `written`.
// The transaction id parameter must be set already; ids are drawn after it. Plain PostgreSQL
// code: run it under pg::Call.
bool InsertDirect(const Ledger &ledger, AppendRequest &req, ItemPointer written) {
  Relation rel = table_open(ledger.history, RowExclusiveLock);
  if (!insert_shape.built || insert_shape.history != ledger.history) insert_shape = BuildInsertShape(rel);
  // A copy: the lock taken by the index opens below takes in other sessions' invalidations,
  // whose callback resets insert_shape (ForgetCatalogFacts). The relation is locked, so its
  // columns cannot change under this copy.
  const InsertShape shape = insert_shape;
  TupleConstr *constr = RelationGetDescr(rel)->constr;
  bool direct = shape.direct && rel->rd_rel->relkind == RELKIND_RELATION && rel->trigdesc == nullptr &&
                !rel->rd_rel->relhasrules && !rel->rd_rel->relrowsecurity &&
                (constr == nullptr || constr->num_check == 0);
  if (!direct) {
    table_close(rel, NoLock);
    return false;
  }
  // As SPI does around a statement: what this transaction did before is visible to it.
  CommandCounterIncrement();
  InsertRowDirectly(
      rel, constr != nullptr && constr->has_not_null,
      [&](ResultRelInfo *result_rel) { OpenIndices(result_rel, shape); },
      [&](Datum *row, bool *isnull) {
        for (int p = 0; p < kParamCount; ++p) {
          int index = shape.param_attno[p] - 1;
          isnull[index] = req.nulls[p] == 'n';
          if (req.nulls[p] != 'n') row[index] = req.values[p];
        }
        row[shape.occurred_at_attno - 1] = TimestampTzGetDatum(GetCurrentTimestamp());
        isnull[shape.occurred_at_attno - 1] = false;
        row[shape.id_attno - 1] = Int64GetDatum(nextval_internal(shape.id_sequence, false));
        isnull[shape.id_attno - 1] = false;
      },
      written);
  table_close(rel, NoLock);
  CommandCounterIncrement();
  return true;
}

// The root's declaration for this append. Under READ COMMITTED from the session's copy when it
// has one (after taking in the invalidations other sessions' commits sent, so a declaration
// committed before this statement began is seen), else read with `snapshot` and kept. Under
// REPEATABLE READ or SERIALIZABLE always read with the transaction's snapshot, and not kept.
// C++ (the copies are std::strings): every PostgreSQL call in it goes through pg::Call.
RootDeclaration RootFor(const Ledger &ledger, Snapshot snapshot, Datum root, const std::string &root_name) {
  if (IsolationUsesXactSnapshot()) return Call([&] { return LookupRoot(ledger, snapshot, root); });
  Call([] { AcceptInvalidationMessages(); });
  if (root_cache == nullptr) root_cache = new std::unordered_map<std::string, CachedRoot>();
  auto found = root_cache->find(root_name);
  if (found == root_cache->end()) {
    RootDeclaration decl = Call([&] { return LookupRoot(ledger, snapshot, root); });
    auto bytes = [](Datum value) {
      const text *t = Call([&] { return DatumGetTextPP(value); });
      return std::string(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
    };
    CachedRoot c;
    if (!decl.fingerprint_null) c.fingerprint = bytes(decl.fingerprint);
    if (!decl.content_type_null) c.content_type = bytes(decl.content_type);
    if (decl.has_max_revisions) c.max_revisions = decl.max_revisions;
    if (decl.has_max_bytes) c.max_bytes = decl.max_bytes;
    if (root_cache->size() >= kRootCacheSize) root_cache->clear();
    root_cache->emplace(root_name, std::move(c));
    return decl;
  }
  const CachedRoot &c = found->second;
  auto text_datum = [](const std::string &value) {
    return Call(
        [&] { return PointerGetDatum(cstring_to_text_with_len(value.data(), static_cast<int>(value.size()))); });
  };
  RootDeclaration decl;
  if (c.fingerprint) {
    decl.fingerprint = text_datum(*c.fingerprint);
    decl.fingerprint_null = false;
  }
  if (c.content_type) {
    decl.content_type = text_datum(*c.content_type);
    decl.content_type_null = false;
  }
  decl.has_max_revisions = c.max_revisions.has_value();
  decl.max_revisions = c.max_revisions.value_or(0);
  decl.has_max_bytes = c.max_bytes.has_value();
  decl.max_bytes = c.max_bytes.value_or(0);
  return decl;
}

// Runs as the ledger's owner between construction and destruction, the way PostgreSQL's own
// RI triggers act on a table: the append functions are SECURITY INVOKER (no per-call GUC
// save/restore), and only these fixed, schema-qualified statements get the owner's rights.
// An error that escapes is cleaned up by (sub)transaction abort, which restores the user too.
class OwnerScope {
 public:
  explicit OwnerScope(Oid owner) {
    GetUserIdAndSecContext(&saved_user_, &saved_context_);
    SetUserIdAndSecContext(owner, saved_context_ | SECURITY_LOCAL_USERID_CHANGE);
  }
  ~OwnerScope() { SetUserIdAndSecContext(saved_user_, saved_context_); }
  OwnerScope(const OwnerScope &) = delete;
  OwnerScope &operator=(const OwnerScope &) = delete;

 private:
  Oid saved_user_ = InvalidOid;
  int saved_context_ = 0;
};

// Refuses (54000) a record whose feed message could not be built (see MessageFits): once
// committed, it would fail every read of the feed over its position. A length comparison: the
// sizes come from the values' headers (toast_raw_datum_size), nothing is detoasted.
void CheckMessageSize(const AppendRequest &req) {
  namespace store = statesman::store;
  store::MessageFieldBytes f;
  Call([&] {
    auto bytes = [&](Param p) -> size_t {
      return req.nulls[p] == 'n' ? 0 : toast_raw_datum_size(req.values[p]) - VARHDRSZ;
    };
    auto envelope = [&](Param p) { return req.nulls[p] == 'n' ? store::kMaxEnvelopeBytes : bytes(p); };
    f.verbatim = 2 * bytes(kAddress) + bytes(kRoot) + bytes(kPath) + bytes(kPartition) + bytes(kOperation) +
                 bytes(kStatus) + bytes(kValueType) + bytes(kSource) + bytes(kSerializerId) + bytes(kCorrelationId) +
                 bytes(kCausationId) + bytes(kErrorText) + bytes(kMetadata) + envelope(kFingerprint) +
                 envelope(kContentType);
    f.payload = bytes(kPayload);
  });
  if (store::MessageFits(f)) return;
  std::string limit = std::to_string(store::kMaxMessageBytes);
  size_t max_payload = store::MaxPayloadBytes(f.verbatim);
  if (f.payload > 0 && max_payload > 0)
    throw Error(sqlstate::kProgramLimitExceeded,
                "payload of " + std::to_string(f.payload) +
                    " bytes is too large for the feed: with this record's "
                    "other fields a message can carry at most " +
                    std::to_string(max_payload) + " payload bytes",
                "A feed message is one jsonb value of at most " + limit +
                    " bytes, with the payload in base64 (4 bytes for every 3). Store larger objects elsewhere "
                    "and append a reference to them.");
  throw Error(sqlstate::kProgramLimitExceeded,
              "the record is too large for the feed: its fields other than the payload (metadata, error, "
              "source, ...) take " +
                  std::to_string(f.verbatim) + " bytes of a message",
              "A feed message is one jsonb value of at most " + limit + " bytes.");
}

// Appends one record under its address lock and applies the root's retention.
AppendResult AppendRecord(AppendRequest &req) {
  CheckInstalledVersion();
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
  });
  req.nulls[kAddress] = req.nulls[kRoot] = ' ';

  // Serialise writers of this address until commit: revision r+1 is only ever written after
  // revision r's transaction has ended, which is what keeps the feed in per-address order.
  store::LockKey key = store::AddressLockKey(address);
  Call([&] { DirectFunctionCall2(pg_advisory_xact_lock_int4, Int32GetDatum(key.space), Int32GetDatum(key.id)); });

  Ledger ledger = Call(LookupLedger);
  // One snapshot for both probes. The caller holds the address lock, so under READ COMMITTED
  // this snapshot, taken after the lock was granted, sees the revision that the previous holder
  // committed. Under REPEATABLE READ it is the transaction's snapshot; a revision committed after
  // it makes the INSERT fail, which is reported as 40001 below.
  // The address's slot of the revision hints gives the latest revision when the row it names
  // holds (HintHolds): only with the shared hints, which every append notes into, and only under
  // READ COMMITTED, where the snapshot is taken after the lock. Otherwise, or when it does not
  // hold, the primary key is probed, from the hint's revision up first.
  int64 latest = 0;
  RootDeclaration root_decl;
  store::RevisionHints &hints = RevisionHintTable();
  const bool trust_hint = RevisionHintsShared() && !IsolationUsesXactSnapshot();
  bool from_hint = false;
  uint64 scope = 0;
  store::RevisionHints::Hint hint;
  Snapshot snapshot = Call([&] {
    Snapshot s = RegisterSnapshot(GetTransactionSnapshot());
    Relation history = table_open(ledger.history, RowExclusiveLock);
    scope = HintScope(history);
    hint = hints.Find(scope, address);
    from_hint = trust_hint && HintHolds(history, ledger, s, req.values[kAddress], hint);
    latest = from_hint ? hint.revision : LatestRevision(ledger, s, req.values[kAddress], hint.revision);
    table_close(history, NoLock);
    return s;
  });
  root_decl = RootFor(ledger, snapshot, req.values[kRoot], root);  // (an error leaves the snapshot to the abort)
  Call([&] { UnregisterSnapshot(snapshot); });
  req.values[kRevision] = Int64GetDatum(latest + 1);
  req.nulls[kRevision] = ' ';
  // The envelope: from the call, else from the root's declaration.
  if (req.nulls[kFingerprint] == 'n' && !root_decl.fingerprint_null) {
    req.values[kFingerprint] = root_decl.fingerprint;
    req.nulls[kFingerprint] = ' ';
  }
  if (req.nulls[kContentType] == 'n' && !root_decl.content_type_null) {
    req.values[kContentType] = root_decl.content_type;
    req.nulls[kContentType] = ' ';
  }

  CheckMessageSize(req);

  OwnerScope as_owner(ledger.owner);
  // SPI only for what the direct insert does not do (the INSERT statement, a tick of the
  // record's own, retention): connected on first need, which most appends never have.
  bool spi_connected = false;
  auto connect_spi = [&spi_connected] {
    if (spi_connected) return;
    Call([] {
      if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "statesman: SPI_connect failed");
    });
    spi_connected = true;
  };
  // The top-level transaction id before the record's id is drawn (by the INSERT's identity):
  // a tick that read the identity's last value before this xid existed sees only larger ids.
  Call([&] { req.values[kTxid] = FullTransactionIdGetDatum(GetTopFullTransactionId()); });
  req.nulls[kTxid] = ' ';
  ItemPointerData written;
  ItemPointerSetInvalid(&written);
  try {
    if (!Call([&] { return InsertDirect(ledger, req, &written); })) {
      connect_spi();
      SPIPlanPtr insert = PreparedPlan(&insert_plan, kInsertSql, kParamCount, kParamTypes);
      Call([&] {
        int rc = SPI_execute_plan(insert, req.values, req.nulls, false, 0);
        if (rc != SPI_OK_INSERT || SPI_processed != 1)
          elog(ERROR, "statesman: append insert failed: %s", SPI_result_code_string(rc));
      });
    }
  } catch (const PgError &e) {
    if (e.Data()->sqlerrcode != ERRCODE_UNIQUE_VIOLATION) throw;
    // Under REPEATABLE READ / SERIALIZABLE the snapshot can predate the previous revision's
    // commit, so the same revision is computed twice: that is a serialization failure.
    if (IsolationUsesXactSnapshot())
      throw Error("40001", "could not serialize access due to a concurrent append to address " + address,
                  "Retry the transaction.");
    // From the hint, the revision after it exists: a row written into statesman.history other
    // than by an append (which notes its revision). The hint is forgotten, so the next append
    // to the address probes the primary key.
    if (from_hint) {
      hints.Forget(scope, address);
      throw Error(sqlstate::kUniqueViolation,
                  "revision " + std::to_string(latest + 1) + " of address " + address +
                      " is already in statesman.history, written there other than by an append",
                  "Retry the append: it takes the revision after the latest one.");
    }
    throw;
  }

  if (feed::TickedInThisTransaction()) {
    connect_spi();
    SPIPlanPtr tick = PreparedPlan(&tick_own_plan, kTickOwnSql, 0, nullptr);
    Call([&] {
      int rc = SPI_execute_plan(tick, nullptr, nullptr, false, 0);
      if (rc != SPI_OK_SELECT) elog(ERROR, "statesman: the record's own tick failed: %s", SPI_result_code_string(rc));
    });
  }

  if (root_decl.has_max_revisions || root_decl.has_max_bytes) {
    connect_spi();
    SPIPlanPtr prune = PreparedPlan(&prune_plan, kPruneSql, 3, kPruneTypes);
    Datum prune_values[3] = {req.values[kAddress], Int32GetDatum(root_decl.max_revisions),
                             Int64GetDatum(root_decl.max_bytes)};
    char prune_nulls[3] = {' ', root_decl.has_max_revisions ? ' ' : 'n', root_decl.has_max_bytes ? ' ' : 'n'};
    Call([&] {
      int rc = SPI_execute_plan(prune, prune_values, prune_nulls, false, 0);
      if (rc != SPI_OK_SELECT) elog(ERROR, "statesman: retention failed: %s", SPI_result_code_string(rc));
    });
  }
  NoteAppend();
  hints.Note(scope, address, latest + 1, ItemPointerIsValid(&written) ? PackRow(written) : 0,
             GetCurrentStatementStartTimestamp());

  return Call([&] {
    if (spi_connected) SPI_finish();
    MemoryContextSwitchTo(caller_context);
    return AppendResult{pnstrdup(address.data(), address.size()), latest + 1};
  });
}

// The result row type of the append function (or plain twin) called: built from pg_proc once,
// not at every call (and again after any change of a function, see ForgetVersionCheck). The
// three functions and their twins declare the same OUT columns. Plain PostgreSQL code.
TupleDesc AppendResultDesc(FunctionCallInfo fcinfo) {
  if (result_desc == nullptr) {
    TupleDesc desc = nullptr;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
      elog(ERROR, "statesman: an append function must return a row type");
    MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
    result_desc = BlessTupleDesc(CreateTupleDescCopy(desc));
    MemoryContextSwitchTo(old);
  }
  return result_desc;
}

// Returns the one (address, revision) row of an append as a materialized set. What
// InitMaterializedSRF does, without building the result's row type from pg_proc on every call.
Datum ReturnAppendResult(FunctionCallInfo fcinfo, AppendResult result) {
  ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
  if (rsinfo == nullptr || !IsA(rsinfo, ReturnSetInfo) || (rsinfo->allowedModes & SFRM_Materialize) == 0 ||
      rsinfo->expectedDesc == nullptr) {
    InitMaterializedSRF(fcinfo, 0);  // raises the error that fits
  } else {
    TupleDesc desc = AppendResultDesc(fcinfo);
    MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
    rsinfo->returnMode = SFRM_Materialize;
    rsinfo->setResult = tuplestore_begin_heap((rsinfo->allowedModes & SFRM_Materialize_Random) != 0, false, work_mem);
    rsinfo->setDesc = CreateTupleDescCopy(desc);
    MemoryContextSwitchTo(old);
  }
  Datum values[2] = {CStringGetTextDatum(result.address), Int64GetDatum(result.revision)};
  bool nulls[2] = {false, false};
  tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
  return static_cast<Datum>(0);
}

// The (address, revision) row of an append as one composite value, for the plain twins. Plain
// PostgreSQL code.
Datum ReturnAppendRow(FunctionCallInfo fcinfo, AppendResult result) {
  Datum values[2] = {CStringGetTextDatum(result.address), Int64GetDatum(result.revision)};
  bool nulls[2] = {false, false};
  return HeapTupleGetDatum(heap_form_tuple(AppendResultDesc(fcinfo), values, nulls));
}

// Serialises a jsonb payload as its UTF-8 text, stored as bytes.
Datum JsonbPayloadBytes(Datum jsonb_datum) {
  Jsonb *jb = DatumGetJsonbP(jsonb_datum);
  StringInfoData out;
  initStringInfo(&out);
  AppendJsonbText(&out, &jb->root);
  return PointerGetDatum(cstring_to_text_with_len(out.data, out.len));
}

// Reads the arguments shared by the three append functions, from the shape's first_common on
// (partition, [operation,] status, value_type, schema_version, source, correlation_id,
// causation_id, metadata, error, fresh_until, serve_until).
void ReadCommonArgs(AppendRequest &req, FunctionCallInfo fcinfo, const AppendShape &shape) {
  int argno = shape.first_common;
  req.partition = TextParamArgOr(req, kPartition, fcinfo, argno++, kDroppedPartition);
  if (shape.has_operation) req.operation = TextParamArgOr(req, kOperation, fcinfo, argno++, kDroppedOperation);
  SetTextArgOr(req, kStatus, fcinfo, argno++, kDroppedStatus);
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

// ---- The planner's support (statesman._append_support) ----------------------------------------
//
// PostgreSQL fills in every default argument of a call when it plans the statement, and then
// sets each argument's expression up again at every execution: for an append called with its
// required arguments alone, a dozen constants each time. At planning, the support function drops
// the trailing arguments that hold what the function reads for a missing one (see Dropped);
// an argument that is not such a constant (a parameter, an expression, another value) stays,
// and so does every argument before it.
//
// The append functions are declared RETURNS TABLE, so PostgreSQL runs a call in a select list as
// a set: a ProjectSet node, the row type rebuilt from pg_proc's argument arrays at every
// execution, a result set of one row. An append always returns exactly one row, so where that
// cannot change what the statement does (see PlainCallIsSafe), the support function also turns
// the call into one of the function's plain twin (statesman._append_row, _append_bytes_row,
// _append_delete_row): the same C code, the same arguments, one composite value returned. The
// executor checks EXECUTE on the twin, which is open to PUBLIC; the twin checks EXECUTE on the
// declared function itself, at each execution as the executor would (CheckDeclaredPrivilege), so
// a plan that outlives a REVOKE or a SET ROLE still refuses whom the declared function would.

constexpr const AppendShape *kAppendShapes[] = {&kAppend, &kAppendBytes, &kAppendDelete};
static_assert(std::size(kAppendShapes) == kAppendFunctions);

// The place of an append function's shape in kAppendShapes (and in the caches that follow it).
int ShapeIndex(const AppendShape &shape) {
  int k = 0;
  while (kAppendShapes[k] != &shape) ++k;
  return k;
}

// Whether arg is the constant that the function reads when argument argno is missing.
bool HoldsDropped(const AppendShape &shape, int argno, Node *arg) {
  if (!IsA(arg, Const)) return false;
  const Const *c = reinterpret_cast<const Const *>(arg);
  // Counted from partition, as if every function had an operation: 0 partition, 1 operation, 2 status.
  int k = argno - shape.first_common;
  if (!shape.has_operation && k >= 1) ++k;
  const char *dropped = k == 0 ? kDroppedPartition : k == 1 ? kDroppedOperation : k == 2 ? kDroppedStatus : nullptr;
  if (dropped == nullptr) return c->constisnull;
  if (c->constisnull || c->consttype != TEXTOID) return false;
  const text *t = DatumGetTextPP(c->constvalue);
  size_t len = VARSIZE_ANY_EXHDR(t);
  return len == std::strlen(dropped) && std::memcmp(VARDATA_ANY(t), dropped, len) == 0;
}

// statesman.<name> with the argument types of function fn, or InvalidOid. Plain PostgreSQL code.
Oid SameArgsFunction(Oid fn, const char *name) {
  HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
  if (!HeapTupleIsValid(tuple)) return InvalidOid;
  const Form_pg_proc proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tuple));
  List *qualified = list_make2(makeString(pstrdup("statesman")), makeString(pstrdup(name)));
  Oid found = LookupFuncName(qualified, proc->pronargs, proc->proargtypes.values, true);
  ReleaseSysCache(tuple);
  return found;
}

// The plain twin of an append function (fn, of that shape), or InvalidOid when the installed SQL
// has none. Plain PostgreSQL code.
Oid PlainTwin(const AppendShape &shape, Oid fn) {
  int k = ShapeIndex(shape);
  if (!plain_twin_known[k]) {
    RegisterForgetting();
    plain_twin[k] = SameArgsFunction(fn, shape.plain_twin);
    plain_twin_known[k] = true;
  }
  return plain_twin[k];
}

// Counts the set-returning expressions of a tree, and among them the calls of one function. A
// subquery is not entered: it is planned on its own, with its own count.
struct SetCalls {
  Oid fn;
  int sets = 0;
  int calls = 0;
};

bool CountSetCalls(Node *node, void *context) {
  if (node == nullptr || IsA(node, Query)) return false;
  SetCalls *count = static_cast<SetCalls *>(context);
  if (IsA(node, FuncExpr) && reinterpret_cast<FuncExpr *>(node)->funcretset) {
    ++count->sets;
    if (reinterpret_cast<FuncExpr *>(node)->funcid == count->fn) ++count->calls;
  } else if (IsA(node, OpExpr) && reinterpret_cast<OpExpr *>(node)->opretset) {
    ++count->sets;
  }
  // PostgreSQL 15 declares the walker without its parameters, as C allows.
  return expression_tree_walker(node, reinterpret_cast<bool (*)()>(reinterpret_cast<void (*)()>(CountSetCalls)),
                                context);
}

// Whether the call of fn being planned may run as a plain call without changing what the
// statement does: it is a SELECT whose select list holds exactly one set-returning expression,
// a call of fn, and fn is not also called in its FROM list (so the call being planned is that
// one). Two calls of one set-returning function that are equal run once (PostgreSQL's ProjectSet
// evaluates equal expressions once, which `(statesman.append(…)).*` relies on), and next to
// another set-returning function an append's row is on the first row only: both keep the set.
// In FROM, a set and a plain call are the same function scan, so nothing is gained there.
// Plain PostgreSQL code.
bool PlainCallIsSafe(const PlannerInfo *root, Oid fn) {
  if (root == nullptr || root->parse == nullptr || root->parse->commandType != CMD_SELECT) return false;
  const Query *query = root->parse;
  SetCalls in_list{fn};
  CountSetCalls(reinterpret_cast<Node *>(query->targetList), &in_list);
  if (in_list.sets != 1 || in_list.calls != 1) return false;
  ListCell *cell;
  foreach (cell, query->rtable) {
    RangeTblEntry *rte = static_cast<RangeTblEntry *>(lfirst(cell));
    if (rte->rtekind != RTE_FUNCTION) continue;
    SetCalls in_from{fn};
    CountSetCalls(reinterpret_cast<Node *>(rte->functions), &in_from);
    if (in_from.calls != 0) return false;
  }
  return true;
}

// The call as the planner should run it (see the top of this section): without its trailing
// arguments that hold what the function reads for a missing one, and as a call of its plain
// twin where that is safe; or nullptr to keep it as it is. Plain PostgreSQL code: run it under
// pg::Call.
Node *SimplifiedCall(const PlannerInfo *root, const FuncExpr *call) {
  if (get_func_namespace(call->funcid) != get_namespace_oid("statesman", true)) return nullptr;
  const char *name = get_func_name(call->funcid);
  const AppendShape *found = nullptr;
  for (const AppendShape *s : kAppendShapes)
    if (name != nullptr && std::strcmp(s->name, name) == 0) found = s;
  if (found == nullptr) return nullptr;
  const AppendShape &shape = *found;
  int nargs = list_length(call->args);
  if (nargs != shape.declared) return nullptr;
  int keep = nargs;
  while (keep > shape.required && HoldsDropped(shape, keep - 1, static_cast<Node *>(list_nth(call->args, keep - 1))))
    --keep;
  Oid twin = call->funcretset && PlainCallIsSafe(root, call->funcid) ? PlainTwin(shape, call->funcid) : InvalidOid;
  if (keep == nargs && !OidIsValid(twin)) return nullptr;
  FuncExpr *simpler =
      makeFuncExpr(OidIsValid(twin) ? twin : call->funcid, call->funcresulttype,
                   list_truncate(list_copy(call->args), keep), call->funccollid, call->inputcollid, call->funcformat);
  simpler->funcretset = OidIsValid(twin) ? false : call->funcretset;
  simpler->funcvariadic = call->funcvariadic;
  simpler->location = call->location;
  return reinterpret_cast<Node *>(simpler);
}

// For the plain twin of an append function (of that shape): the caller's EXECUTE privilege on the
// declared function, as the executor checks it for a call of that function: once each time the
// call is set up for an execution (its FmgrInfo is new then; fn_extra marks it checked), with the
// same error (42501). Plain PostgreSQL code.
void CheckDeclaredPrivilege(FunctionCallInfo fcinfo, const AppendShape &shape) {
  static char checked;
  if (fcinfo->flinfo->fn_extra == &checked) return;
  int k = ShapeIndex(shape);
  if (!OidIsValid(declared_function[k])) {
    RegisterForgetting();
    Oid fn = SameArgsFunction(fcinfo->flinfo->fn_oid, shape.name);
    if (!OidIsValid(fn)) elog(ERROR, "statesman: %s has no declared function", shape.plain_twin);
    declared_function[k] = fn;
  }
  AclResult allowed = pg_proc_aclcheck(declared_function[k], GetUserId(), ACL_EXECUTE);
  if (allowed != ACLCHECK_OK) aclcheck_error(allowed, OBJECT_FUNCTION, get_func_name(declared_function[k]));
  InvokeFunctionExecuteHook(declared_function[k]);
  fcinfo->flinfo->fn_extra = &checked;
}

}  // namespace

int64 AppendCaptured(const CapturedRecord &record) {
  AppendRequest req;
  for (int p = 0; p < kParamCount; ++p) req.nulls[p] = 'n';
  req.root = record.root;
  req.path = record.path;
  req.partition = record.partition;
  req.operation = record.tombstone ? "delete" : "put";
  Call([&] {
    auto set_text = [&](Param p, const char *value) {
      req.values[p] = CStringGetTextDatum(value);
      req.nulls[p] = ' ';
    };
    set_text(kPath, record.path);
    set_text(kPartition, record.partition);
    set_text(kOperation, req.operation);
    set_text(kStatus, "ok");
    if (!record.tombstone) {
      set_text(kContentType, "application/json");
      req.values[kPayload] = record.payload;
      req.nulls[kPayload] = ' ';
    }
    req.values[kMetadata] = record.metadata;
    req.nulls[kMetadata] = ' ';
  });
  return AppendRecord(req).revision;
}

}  // namespace statesman::pg

using statesman::pg::AppendRequest;
using statesman::pg::AppendResult;

namespace {

// The appends of the three functions from their arguments. Plain code: their arguments are
// read with no C++ object alive, the append itself runs under pg::Invoke.

// statesman.append(root, path, payload jsonb, partition, operation, status, value_type,
//   schema_version, source, correlation_id, causation_id, metadata, error, fresh_until,
//   serve_until) → (address, revision)
AppendResult AppendJsonb(FunctionCallInfo fcinfo) {
  AppendRequest req;
  req.root = statesman::pg::TextArg(fcinfo, 0);
  req.path = statesman::pg::TextParamArg(req, statesman::pg::kPath, fcinfo, 1);
  req.nulls[statesman::pg::kPayload] = 'n';
  if (!PG_ARGISNULL(2)) {
    req.values[statesman::pg::kPayload] = statesman::pg::JsonbPayloadBytes(PG_GETARG_DATUM(2));
    req.nulls[statesman::pg::kPayload] = ' ';
  }
  req.values[statesman::pg::kContentType] = CStringGetTextDatum("application/json");
  req.nulls[statesman::pg::kContentType] = ' ';
  req.nulls[statesman::pg::kSerializerId] = 'n';
  statesman::pg::ReadCommonArgs(req, fcinfo, statesman::pg::kAppend);
  return statesman::pg::Invoke([&] { return statesman::pg::AppendRecord(req); });
}

// statesman.append_bytes(root, path, payload bytea, content_type, serializer_id, partition,
//   operation, status, …, serve_until) → (address, revision)
AppendResult AppendBytes(FunctionCallInfo fcinfo) {
  AppendRequest req;
  req.root = statesman::pg::TextArg(fcinfo, 0);
  req.path = statesman::pg::TextParamArg(req, statesman::pg::kPath, fcinfo, 1);
  statesman::pg::SetArg(req, statesman::pg::kPayload, fcinfo, 2);
  statesman::pg::SetArg(req, statesman::pg::kContentType, fcinfo, 3);
  statesman::pg::SetArg(req, statesman::pg::kSerializerId, fcinfo, 4);
  statesman::pg::ReadCommonArgs(req, fcinfo, statesman::pg::kAppendBytes);
  return statesman::pg::Invoke([&] { return statesman::pg::AppendRecord(req); });
}

// statesman.append_delete(root, path, partition, status, …, serve_until) → (address, revision)
AppendResult AppendDelete(FunctionCallInfo fcinfo) {
  AppendRequest req;
  req.root = statesman::pg::TextArg(fcinfo, 0);
  req.path = statesman::pg::TextParamArg(req, statesman::pg::kPath, fcinfo, 1);
  req.operation = "delete";
  req.values[statesman::pg::kOperation] = CStringGetTextDatum("delete");
  req.nulls[statesman::pg::kOperation] = ' ';
  req.nulls[statesman::pg::kPayload] = 'n';
  req.nulls[statesman::pg::kContentType] = 'n';
  req.nulls[statesman::pg::kSerializerId] = 'n';
  statesman::pg::ReadCommonArgs(req, fcinfo, statesman::pg::kAppendDelete);
  return statesman::pg::Invoke([&] { return statesman::pg::AppendRecord(req); });
}

}  // namespace

extern "C" Datum statesman_append(PG_FUNCTION_ARGS) {
  return statesman::pg::ReturnAppendResult(fcinfo, AppendJsonb(fcinfo));
}

extern "C" Datum statesman_append_bytes(PG_FUNCTION_ARGS) {
  return statesman::pg::ReturnAppendResult(fcinfo, AppendBytes(fcinfo));
}

extern "C" Datum statesman_append_delete(PG_FUNCTION_ARGS) {
  return statesman::pg::ReturnAppendResult(fcinfo, AppendDelete(fcinfo));
}

// statesman._append_row, _append_bytes_row, _append_delete_row: the plain twins of the three
// (the planner's support turns a call into one where that is safe; see SimplifiedCall). The
// same arguments; the (address, revision) row as one value.
extern "C" Datum statesman_append_row(PG_FUNCTION_ARGS) {
  statesman::pg::CheckDeclaredPrivilege(fcinfo, statesman::pg::kAppend);
  return statesman::pg::ReturnAppendRow(fcinfo, AppendJsonb(fcinfo));
}

extern "C" Datum statesman_append_bytes_row(PG_FUNCTION_ARGS) {
  statesman::pg::CheckDeclaredPrivilege(fcinfo, statesman::pg::kAppendBytes);
  return statesman::pg::ReturnAppendRow(fcinfo, AppendBytes(fcinfo));
}

extern "C" Datum statesman_append_delete_row(PG_FUNCTION_ARGS) {
  statesman::pg::CheckDeclaredPrivilege(fcinfo, statesman::pg::kAppendDelete);
  return statesman::pg::ReturnAppendRow(fcinfo, AppendDelete(fcinfo));
}

// statesman._append_support(internal) → internal: the append functions' SUPPORT function. To a
// SupportRequestSimplify, the call without its dropped trailing arguments, and as a call of the
// plain twin where that is safe (see SimplifiedCall); to any other request, NULL (nothing to say).
extern "C" Datum statesman_append_support(PG_FUNCTION_ARGS) {
  Node *request = reinterpret_cast<Node *>(PG_GETARG_POINTER(0));
  if (!IsA(request, SupportRequestSimplify)) PG_RETURN_POINTER(nullptr);
  const SupportRequestSimplify *simplify = reinterpret_cast<SupportRequestSimplify *>(request);
  Node *simpler = statesman::pg::Invoke([&] {
    return statesman::pg::Call([&] { return statesman::pg::SimplifiedCall(simplify->root, simplify->fcall); });
  });
  PG_RETURN_POINTER(simpler);
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
extern "C" Datum statesman_in_transaction_block(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(IsTransactionBlock()); }

// statesman._roots_changed(): the statement trigger of statesman.roots. Invalidates the table's
// relation cache entry, which reaches every session at commit (and this one at its next command)
// and makes each forget its copies of the declarations (ForgetCatalogFacts).
extern "C" Datum statesman_roots_changed(PG_FUNCTION_ARGS) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("statesman._roots_changed() must be called as a trigger")));
  CacheInvalidateRelcache(reinterpret_cast<TriggerData *>(fcinfo->context)->tg_relation);
  return PointerGetDatum(nullptr);
}
