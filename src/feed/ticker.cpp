// The ticker, statesman._tick(max_records, durable): one tick per call that finds records
// (sql/install/07_sequencer.sql gives the invariant argument; docs/feed.md the design). It reads
// the ticks and the new records straight from their indexes under one snapshot, as the page
// reader does (src/feed/page.cpp), and writes the tick's row and index entries itself (through
// a kept INSERT plan when the table has something only the executor applies): no statement is
// planned or started per step. The database worker calls Tick directly; sequence_feed and the
// worker of an older version's objects call it through SQL.
//
// The order of a tick: the sequencer's lock (one ticker at a time, held until the transaction
// ends); the identity's last value L; then the snapshot S (every statement that follows sees at
// least what it saw); the newest tick, the newest stored snapshot P and the scan bound; the
// records with id above the bound whose transaction S sees and P does not; then, only when there
// are any, the tick's own xid X (assigned after L was read) and its row.
#include "statesman/feed/ticks.hpp"

#include <cstring>
#include <vector>

#include "statesman/feed/stored_snapshot.hpp"
#include "statesman/pg/guard.hpp"
#include "statesman/pg/relations.hpp"
#include "statesman/pg/work.hpp"
#include "statesman/store/locks.hpp"

extern "C" {
#include "access/genam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"

PG_FUNCTION_INFO_V1(statesman_tick);
PG_FUNCTION_INFO_V1(statesman_tick_snapshot);
}

namespace statesman::feed {
namespace {

using pg::Column;
using pg::StatesmanRelation;

// The INSERT of a tick, prepared once per process. created_at takes its default.
constexpr const char *kInsertTickSql =
    "INSERT INTO statesman.ticks (tick_id, base, lo, hi, last_id, xid, snap, prev_snap, system_id) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
SPIPlanPtr insert_tick_plan = nullptr;

// The largest xid8: the X of a tick whose transaction had an xid before L was read (it never
// serves as a scan bound).
constexpr uint64 kNoBoundXid = PG_INT64_MAX;

// What a tick reads: the ticks by tick_id, the ledger by id (and by legacy position, for the
// head of a feed whose ticks hold no record yet).
struct TickerRelations {
  Relation ticks, ticks_pkey, history, history_id, history_legacy;
  Oid id_sequence;
  AttrNumber tick_id, base, lo, hi, last_id, xid, snap, system_id;  // of ticks
  AttrNumber id, txid, legacy_position;                             // of history
};

// Whether the current user may do what the ticker's statements would need: read the ticks
// and the ledger, insert into the ticks (the sequence's privilege is checked by
// pg_sequence_last_value). Reading from the indexes and writing the row directly skips the
// executor's checks. The ticker's callers pass them: sequence_feed runs as the extension's
// owner (SECURITY DEFINER), the database worker as the bootstrap superuser.
void CheckPrivileges(Oid ticks, Oid history) {
  const struct {
    Oid table;
    AclMode mode;
  } needed[] = {{ticks, ACL_SELECT}, {ticks, ACL_INSERT}, {history, ACL_SELECT}};
  for (const auto &n : needed) {
    AclResult result = pg_class_aclcheck(n.table, GetUserId(), n.mode);
    if (result != ACLCHECK_OK) aclcheck_error(result, OBJECT_TABLE, get_rel_name(n.table));
  }
}

TickerRelations OpenTickerRelations() {
  Oid schema = get_namespace_oid("statesman", false);
  TickerRelations r;
  Oid ticks = StatesmanRelation(schema, "ticks"), history = StatesmanRelation(schema, "history");
  CheckPrivileges(ticks, history);
  r.ticks = table_open(ticks, AccessShareLock);
  r.ticks_pkey = index_open(StatesmanRelation(schema, "ticks_pkey"), AccessShareLock);
  r.history = table_open(history, AccessShareLock);
  r.history_id = index_open(StatesmanRelation(schema, "history_id"), AccessShareLock);
  r.history_legacy = index_open(StatesmanRelation(schema, "history_legacy_position"), AccessShareLock);
  r.id_sequence = StatesmanRelation(schema, "history_id_seq");
  r.tick_id = Column(r.ticks, "tick_id");
  r.base = Column(r.ticks, "base");
  r.lo = Column(r.ticks, "lo");
  r.hi = Column(r.ticks, "hi");
  r.last_id = Column(r.ticks, "last_id");
  r.xid = Column(r.ticks, "xid");
  r.snap = Column(r.ticks, "snap");
  r.system_id = Column(r.ticks, "system_id");
  r.id = Column(r.history, "id");
  r.txid = Column(r.history, "txid");
  r.legacy_position = Column(r.history, "legacy_position");
  return r;
}

void CloseTickerRelations(TickerRelations &r) {
  index_close(r.history_legacy, NoLock);
  index_close(r.history_id, NoLock);
  table_close(r.history, NoLock);
  index_close(r.ticks_pkey, NoLock);
  table_close(r.ticks, NoLock);
}

// A row of statesman.ticks, its snapshot copied out of the buffer when asked for (nullptr when
// NULL).
struct TickRow {
  int64 tick_id, base, lo, hi, last_id, system_id;
  FullTransactionId xid;
  StoredSnapshot *snap;
};

TickRow ReadTick(const TickerRelations &r, TupleTableSlot *slot, bool with_snap) {
  slot_getallattrs(slot);
  TickRow t;
  t.tick_id = DatumGetInt64(slot->tts_values[r.tick_id - 1]);
  t.base = DatumGetInt64(slot->tts_values[r.base - 1]);
  t.lo = DatumGetInt64(slot->tts_values[r.lo - 1]);
  t.hi = DatumGetInt64(slot->tts_values[r.hi - 1]);
  t.last_id = DatumGetInt64(slot->tts_values[r.last_id - 1]);
  t.system_id = DatumGetInt64(slot->tts_values[r.system_id - 1]);
  t.xid = DatumGetFullTransactionId(slot->tts_values[r.xid - 1]);
  t.snap = !with_snap || slot->tts_isnull[r.snap - 1]
               ? nullptr
               : reinterpret_cast<StoredSnapshot *>(PG_DETOAST_DATUM_COPY(slot->tts_values[r.snap - 1]));
  return t;
}

// The ticks from the newest back, each handed to visit (with its snapshot when with_snap) until
// it returns true; returns whether one did.
template <typename Visit>
bool NewestTicks(const TickerRelations &r, Snapshot snapshot, bool with_snap, Visit &&visit) {
  TupleTableSlot *slot = table_slot_create(r.ticks, nullptr);
  IndexScanDesc scan = index_beginscan(r.ticks, r.ticks_pkey, snapshot, 0, 0);
  index_rescan(scan, nullptr, 0, nullptr, 0);
  bool found = false;
  while (!found && index_getnext_slot(scan, BackwardScanDirection, slot)) found = visit(ReadTick(r, slot, with_snap));
  index_endscan(scan);
  ExecDropSingleTupleTableSlot(slot);
  return found;
}

// The head as statesman._head() gives it: the last position of the newest tick that holds
// records, else the largest position from before 0.4.0; false when there is neither.
bool HeadPosition(const TickerRelations &r, Snapshot snapshot, int64 *head) {
  if (NewestTicks(r, snapshot, false, [&](const TickRow &t) {
        if (t.hi < t.lo) return false;
        *head = t.base + (t.hi - t.lo);
        return true;
      }))
    return true;
  TupleTableSlot *slot = table_slot_create(r.history, nullptr);
  IndexScanDesc scan = index_beginscan(r.history, r.history_legacy, snapshot, 0, 0);
  index_rescan(scan, nullptr, 0, nullptr, 0);
  bool found = false;
  while (!found && index_getnext_slot(scan, BackwardScanDirection, slot)) {
    bool isnull = true;
    Datum position = slot_getattr(slot, r.legacy_position, &isnull);
    if (isnull) continue;
    *head = DatumGetInt64(position);
    found = true;
  }
  index_endscan(scan);
  ExecDropSingleTupleTableSlot(slot);
  return found;
}

// pg_sequence_last_value(seq), 0 before its first nextval.
int64 SequenceLastValue(Oid seq) {
  LOCAL_FCINFO(fcinfo, 1);
  InitFunctionCallInfoData(*fcinfo, nullptr, 1, InvalidOid, nullptr, nullptr);
  fcinfo->args[0].value = ObjectIdGetDatum(seq);
  fcinfo->args[0].isnull = false;
  Datum value = pg_sequence_last_value(fcinfo);
  return fcinfo->isnull ? 0 : DatumGetInt64(value);
}

// The snapshot a tick stores (also statesman._tick_snapshot(), for the ticks written in SQL):
// pg_current_snapshot() of `snapshot`, except that this transaction, when it has an xid, counts as ended in it. A
// snapshot never lists its own transaction as running, so it counts as ended already when its
// xid is below xmax; at or above it, xmax moves past it and the xids from the old xmax up to it
// are listed as running (none of them had ended when the snapshot was taken).
StoredSnapshot *TickSnapshot(Snapshot snapshot, FullTransactionId own) {
  PushActiveSnapshot(snapshot);
  LOCAL_FCINFO(fcinfo, 0);
  InitFunctionCallInfoData(*fcinfo, nullptr, 0, InvalidOid, nullptr, nullptr);
  StoredSnapshot *snap = reinterpret_cast<StoredSnapshot *>(DatumGetPointer(pg_current_snapshot(fcinfo)));
  PopActiveSnapshot();
  if (!FullTransactionIdIsValid(own) || VisibleInSnapshot(own, snap)) return snap;
  uint64 from = U64FromFullTransactionId(snap->xmax), to = U64FromFullTransactionId(own);
  uint32 nxip = snap->nxip + static_cast<uint32>(to - from);
  Size size = offsetof(StoredSnapshot, xip) + sizeof(FullTransactionId) * nxip;
  StoredSnapshot *counted = static_cast<StoredSnapshot *>(palloc(size));
  SET_VARSIZE(counted, size);
  counted->nxip = nxip;
  counted->xmin = snap->xmin;
  counted->xmax = FullTransactionIdFromU64(to + 1);
  // The listed ones are all below the old xmax: the range follows them, sorted as they are.
  memcpy(counted->xip, snap->xip, sizeof(FullTransactionId) * snap->nxip);
  for (uint64 x = from; x < to; ++x) counted->xip[snap->nxip + (x - from)] = FullTransactionIdFromU64(x);
  return counted;
}

// The smallest id and the largest of the records with id above `bound` whose transaction
// `cur` sees and `prev` does not; false when there is none. (A record without a txid is in
// no tick with a snapshot: pg_visible_in_snapshot of NULL is NULL.)
bool NewRecords(const TickerRelations &r, Snapshot snapshot, int64 bound, const StoredSnapshot *cur,
                const StoredSnapshot *prev, int64 *lo, int64 *hi) {
  TupleTableSlot *slot = table_slot_create(r.history, nullptr);
  ScanKeyData key;
  ScanKeyInit(&key, 1, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(bound));
  IndexScanDesc scan = index_beginscan(r.history, r.history_id, snapshot, 1, 0);
  index_rescan(scan, &key, 1, nullptr, 0);
  bool found = false;
  while (index_getnext_slot(scan, ForwardScanDirection, slot)) {
    bool isnull = true;
    Datum txid = slot_getattr(slot, r.txid, &isnull);
    if (isnull) continue;
    FullTransactionId xid = DatumGetFullTransactionId(txid);
    if (!VisibleInSnapshot(xid, cur) || VisibleInSnapshot(xid, prev)) continue;
    int64 id = DatumGetInt64(slot_getattr(slot, r.id, &isnull));
    if (!found) *lo = id;
    *hi = id;
    found = true;
  }
  index_endscan(scan);
  ExecDropSingleTupleTableSlot(slot);
  return found;
}

// The columns of statesman.ticks, in the order in which InsertTick takes their values.
constexpr int kTickColumns = 10;
constexpr const char *kTickColumnNames[kTickColumns] = {"tick_id", "base", "lo",        "hi",        "last_id",
                                                        "xid",     "snap", "prev_snap", "system_id", "created_at"};
constexpr Oid kTickColumnTypes[kTickColumns] = {INT8OID, INT8OID,        INT8OID,        INT8OID, INT8OID,
                                                XID8OID, PG_SNAPSHOTOID, PG_SNAPSHOTOID, INT8OID, TIMESTAMPTZOID};

// Whether the tick can be written into rel directly: its columns are the ten above (of those
// types, none generated), it has no rule and no row security, and its one trigger is the
// restore trigger, which fires for tick 0 only (statesman._ticks_restore). Where each column
// goes into attno.
bool DirectTickShape(Relation rel, AttrNumber *attno) {
  if (rel->rd_rel->relhasrules || rel->rd_rel->relrowsecurity) return false;
  if (rel->trigdesc != nullptr)
    for (int i = 0; i < rel->trigdesc->numtriggers; ++i)
      if (strcmp(rel->trigdesc->triggers[i].tgname, "ticks_restore") != 0) return false;
  for (int c = 0; c < kTickColumns; ++c) attno[c] = 0;
  TupleDesc desc = RelationGetDescr(rel);
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute attr = TupleDescAttr(desc, i);
    if (attr->attisdropped) continue;
    int found = -1;
    for (int c = 0; c < kTickColumns; ++c)
      if (strcmp(NameStr(attr->attname), kTickColumnNames[c]) == 0) found = c;
    if (found < 0 || attr->atttypid != kTickColumnTypes[found] || attr->attgenerated != '\0') return false;
    attno[found] = attr->attnum;
  }
  for (int c = 0; c < kTickColumns; ++c)
    if (attno[c] == 0) return false;
  return true;
}

// Whether the table's constraints are those of the install: NOT NULL, which every value of a
// tick is, and ticks_check, hi >= lo - 1, which a tick that holds records (lo <= hi) meets.
// Compiling the CHECK for every tick was an eighth of the ticker's work.
bool OnlyOwnCheck(const TupleConstr *constr) {
  if (constr == nullptr || constr->num_check == 0) return true;
  return constr->num_check == 1 && strcmp(constr->check[0].ccname, "ticks_check") == 0;
}

// Stores the tick (values in the order of kTickColumnNames but created_at, which is now(), the
// column's default). Written the way its INSERT would be: the row, its NOT NULL and CHECK
// constraints, its entry in every index; through the INSERT itself (a kept plan) when the table
// has something only the executor applies (DirectTickShape). The caller has checked that the
// transaction may write.
void InsertTick(Relation ticks, const Datum *values, const bool *nulls) {
  Relation rel = table_open(RelationGetRelid(ticks), RowExclusiveLock);
  AttrNumber attno[kTickColumns];
  if (!DirectTickShape(rel, attno)) {
    table_close(rel, NoLock);
    if (insert_tick_plan == nullptr) insert_tick_plan = pg::PrepareAndKeep(kInsertTickSql, 9, kTickColumnTypes);
    char spi_nulls[9];
    for (int c = 0; c < 9; ++c) spi_nulls[c] = nulls[c] ? 'n' : ' ';
    int rc = SPI_execute_plan(insert_tick_plan, const_cast<Datum *>(values), spi_nulls, false, 0);
    if (rc != SPI_OK_INSERT) elog(ERROR, "statesman: storing a tick failed: %s", SPI_result_code_string(rc));
    return;
  }
  pg::InsertRowDirectly(
      rel, !OnlyOwnCheck(RelationGetDescr(rel)->constr),
      [](ResultRelInfo *result_rel) { ExecOpenIndices(result_rel, false); },
      [&](Datum *row, bool *isnull) {
        for (int c = 0; c < 9; ++c) {
          row[attno[c] - 1] = values[c];
          isnull[attno[c] - 1] = nulls[c];
        }
        row[attno[9] - 1] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
        isnull[attno[9] - 1] = false;
      });
  table_close(rel, NoLock);
  // As after a statement: the rest of the transaction sees the tick.
  CommandCounterIncrement();
}

// The scan bound for the records new in `cur` since the snapshot `since`: m is the smaller of
// since's xmax and the smallest xid of its running list that has ended by cur (the list is
// sorted); the bound is the L of the newest tick whose X is below m, 0 when none is.
int64 ScanBound(const TickerRelations &r, Snapshot snapshot, const StoredSnapshot *since, const StoredSnapshot *cur) {
  FullTransactionId m = since->xmax;
  for (uint32 i = 0; i < since->nxip; ++i)
    if (VisibleInSnapshot(since->xip[i], cur)) {
      if (FullTransactionIdPrecedes(since->xip[i], m)) m = since->xip[i];
      break;
    }
  int64 bound = 0;
  NewestTicks(r, snapshot, false, [&](const TickRow &t) {
    if (!FullTransactionIdPrecedes(t.xid, m)) return false;
    bound = t.last_id;
    return true;
  });
  return bound;
}

// What this process's last scan that found nothing new established: no record exists of a
// transaction that had ended by that scan's snapshot S and not by the stored snapshot P it
// compared with. That stays true (an ended transaction adds no records, an id is never drawn
// twice), and every later snapshot sees what S saw, so the records new since P in a later
// snapshot are exactly those new since S, and their scan starts at the bound S gives. Without
// it, every idle poll after a tick of a million records would read that million again for
// their transaction ids. Kept in the process's own memory across transactions, for the same P
// only (the newest tick's id and P's bytes, in the same relations), and never from or for a
// scan that counted its own transaction as ended (it may append after).
class EmptyScan {
 public:
  const StoredSnapshot *Since(const TickerRelations &r, int64 tick_id, const StoredSnapshot *prev) const {
    if (seen_.empty() || ticks_ != RelationGetRelid(r.ticks) || history_ != RelationGetRelid(r.history) ||
        tick_id_ != tick_id || prev_.size() != VARSIZE(prev) || memcmp(prev_.data(), prev, prev_.size()) != 0)
      return nullptr;
    return reinterpret_cast<const StoredSnapshot *>(seen_.data());
  }

  void Remember(const TickerRelations &r, int64 tick_id, const StoredSnapshot *prev, const StoredSnapshot *seen) {
    ticks_ = RelationGetRelid(r.ticks);
    history_ = RelationGetRelid(r.history);
    tick_id_ = tick_id;
    prev_ = Bytes(prev);
    seen_ = Bytes(seen);
  }

 private:
  static std::vector<char> Bytes(const StoredSnapshot *s) {
    const char *p = reinterpret_cast<const char *>(s);
    return std::vector<char>(p, p + VARSIZE(s));
  }

  Oid ticks_ = InvalidOid, history_ = InvalidOid;
  int64 tick_id_ = -1;
  std::vector<char> prev_, seen_;  // operator new's alignment suits the snapshot's 8-byte xids
};

EmptyScan empty_scan;

void SetSynchronousCommit(bool durable) {
  set_config_option("synchronous_commit", durable ? "on" : "off", superuser() ? PGC_SUSET : PGC_USERSET, PGC_S_SESSION,
                    GUC_ACTION_LOCAL, true, 0, false);
}

// The body of Tick, with the relations open and an SPI connection.
bool TickWith(const TickerRelations &r, bool durable, int64 *head) {
  FullTransactionId own = GetTopFullTransactionIdIfAny();
  // First L, then the snapshot (what this transaction did before is visible to it, as to a
  // statement), then X.
  int64 last_id = SequenceLastValue(r.id_sequence);
  CommandCounterIncrement();
  Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
  TickRow last{};
  StoredSnapshot *last_snap = nullptr;
  bool have_last = false;
  // The newest tick, and the snapshot of the newest tick that has one (range ticks have none).
  NewestTicks(r, snapshot, true, [&](const TickRow &t) {
    if (!have_last) last = t;
    have_last = true;
    last_snap = t.snap;
    return last_snap != nullptr;
  });
  if (!have_last) elog(ERROR, "statesman: statesman.ticks has no tick");
  if (static_cast<uint64>(last.system_id) != GetSystemIdentifier()) {
    // Restored into another cluster: a new chain (statesman._restart_ticks).
    UnregisterSnapshot(snapshot);
    int rc = SPI_execute("SELECT statesman._restart_ticks()", false, 0);
    if (rc != SPI_OK_SELECT) elog(ERROR, "statesman: restarting the ticks failed: %s", SPI_result_code_string(rc));
    SetSynchronousCommit(durable);
    CommandCounterIncrement();
    snapshot = RegisterSnapshot(GetTransactionSnapshot());
    bool found = HeadPosition(r, snapshot, head);
    UnregisterSnapshot(snapshot);
    return found;
  }
  StoredSnapshot *cur = TickSnapshot(snapshot, own);
  int64 lo = 0, hi = 0;
  bool found = false;
  // With no stored snapshot, no record is new in one (the SQL conditions would be NULL).
  if (last_snap != nullptr) {
    // The records new in cur since the last stored snapshot P, or, when this process's last
    // scan against P found none, those new since that scan's snapshot: the same set.
    bool unowned = !FullTransactionIdIsValid(own);
    const StoredSnapshot *since = unowned ? empty_scan.Since(r, last.tick_id, last_snap) : nullptr;
    if (since == nullptr) since = last_snap;
    found = NewRecords(r, snapshot, ScanBound(r, snapshot, since, cur), cur, since, &lo, &hi);
    if (!found && unowned) empty_scan.Remember(r, last.tick_id, last_snap, cur);
  }
  if (!found) {
    // Nothing new: no tick, the last one stays the reference.
    found = HeadPosition(r, snapshot, head);
    UnregisterSnapshot(snapshot);
    return found;
  }
  UnregisterSnapshot(snapshot);
  // X must be an xid assigned after L was read. A transaction that had one before cannot say
  // so: its tick never serves as a scan bound (X = the largest xid8), which only makes the next
  // scans start lower.
  PreventCommandDuringRecovery("statesman.sequence_feed()");
  PreventCommandIfReadOnly("INSERT");  // as the tick's INSERT would be refused
  FullTransactionId xid =
      FullTransactionIdIsValid(own) ? FullTransactionIdFromU64(kNoBoundXid) : GetTopFullTransactionId();
  int64 base = last.base + (last.hi - last.lo + 1);
  Datum values[9] = {Int64GetDatum(last.tick_id + 1),
                     Int64GetDatum(base),
                     Int64GetDatum(lo),
                     Int64GetDatum(hi),
                     Int64GetDatum(last_id),
                     FullTransactionIdGetDatum(xid),
                     PointerGetDatum(cur),
                     PointerGetDatum(last_snap),
                     Int64GetDatum(last.system_id)};
  bool nulls[9] = {false, false, false, false, false, false, false, false, false};
  InsertTick(r.ticks, values, nulls);
  // This tick counts this transaction as ended: its later appends get ticks of their own.
  if (FullTransactionIdIsValid(own)) NoteOwnTick();
  // Readers flush before they act on a position (statesman._feed_page): no flush per tick for
  // the database worker. Other callers (sequence_feed: read_feed, dispatch_once, a dispatcher's
  // poll, a session) may hand on positions of this tick before their transaction's commit is on
  // disk, so for them it is synchronous.
  SetSynchronousCommit(durable);
  *head = base + (hi - lo);
  // A wake-up hint for whoever listens; sent by the ticker, never by appends.
  char text[32];
  snprintf(text, sizeof(text), INT64_FORMAT, *head);
  Async_Notify("statesman", text);
  return true;
}

}  // namespace

bool Tick(int32_t max_records, bool durable, int64_t *head) {
  if (max_records < 1)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("max_records must be at least 1")));
  // Under REPEATABLE READ or SERIALIZABLE the snapshot predates the lock: the scan would miss
  // records of transactions that the tick's snapshot sees as committed.
  if (XactIsoLevel != XACT_READ_COMMITTED)
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("statesman.sequence_feed() must run at READ COMMITTED isolation")));
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "statesman: SPI_connect failed");
  TickerRelations r = OpenTickerRelations();
  bool found;
  if (DatumGetBool(DirectFunctionCall2(pg_try_advisory_xact_lock_int4, Int32GetDatum(store::kSequencerLockSpace),
                                       Int32GetDatum(0)))) {
    found = TickWith(r, durable, head);
  } else {
    // Another session is ticking right now.
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    found = HeadPosition(r, snapshot, head);
    UnregisterSnapshot(snapshot);
  }
  CloseTickerRelations(r);
  SPI_finish();
  return found;
}

}  // namespace statesman::feed

extern "C" Datum statesman_tick(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  if (PG_ARGISNULL(0))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("max_records must not be NULL")));
  int32 max_records = PG_GETARG_INT32(0);
  bool durable = !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
  int64 head = 0;
  bool found = Invoke([&] { return Call([&] { return statesman::feed::Tick(max_records, durable, &head); }); });
  if (!found) PG_RETURN_NULL();
  PG_RETURN_INT64(head);
}

// statesman._tick_snapshot(): the snapshot a statement of this transaction would take now, with
// this transaction counted as ended when it has an xid.
extern "C" Datum statesman_tick_snapshot(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  Datum snap = Invoke([] {
    return Call([] {
      return PointerGetDatum(statesman::feed::TickSnapshot(GetTransactionSnapshot(), GetTopFullTransactionIdIfAny()));
    });
  });
  PG_RETURN_DATUM(snap);
}
