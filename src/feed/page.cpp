// The page reader (include/statesman/feed/page.hpp): one statesman._feed_page call per page,
// its rows handed to a DestReceiver that builds each message straight from the row's Datums.
// No per-row SQL function call and no second materialization of the page: the rows go from
// _feed_page's executor to the message builder (feed/message.hpp) and from there to where they
// are wanted (read_feed's result set, a sink's page, the `table` sink's insert).
//
// The receiver runs inside the executor, inside pg::Call: it never throws; the C++ allocations
// it makes (a sink's page) are caught there and reported as an ERROR.
#include "statesman/feed/page.hpp"

#include "statesman/feed/message.hpp"
#include "statesman/feed/message_format.hpp"
#include "statesman/pg/bulk_insert.hpp"
#include "statesman/feed/stored_snapshot.hpp"
#include "statesman/pg/relations.hpp"
#include "statesman/feed/ticks.hpp"

extern "C" {
#include "access/genam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "tcop/dest.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/uuid.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"

PG_FUNCTION_INFO_V1(statesman_read_feed);
PG_FUNCTION_INFO_V1(statesman_deliver_table_page);
PG_FUNCTION_INFO_V1(statesman_insert_sink_rows);
}

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

namespace statesman::pg {
namespace {

using feed::StoredSnapshot;
using feed::VisibleInSnapshot;

// ---- Kept plans -----------------------------------------------------------------------------

// statesman._feed_page's columns, in the order of the contract: the row source below hands each
// row to the receiver in this layout.
enum FeedColumn {
  cPosition,
  cId,
  cAddress,
  cRoot,
  cPath,
  cPartition,
  cRevision,
  cOccurredAt,
  cOperation,
  cStatus,
  cValueType,
  cSchemaVersion,
  cSource,
  cPayload,
  cFingerprint,
  cContentType,
  cSerializerId,
  cCorrelationId,
  cCausationId,
  cError,
  cMetadata,
  cFeedColumns
};

constexpr const char *kStoreSql =
    "SELECT COALESCE(s.store_name, pg_catalog.current_database()), s.epoch FROM statesman.store s";
// Only the roots that declare a fallback matter.
constexpr const char *kRootsSql =
    "SELECT r.root, r.fingerprint, r.content_type FROM statesman.roots r "
    "WHERE r.fingerprint IS NOT NULL OR r.content_type IS NOT NULL";

SPIPlanPtr store_plan = nullptr;
SPIPlanPtr roots_plan = nullptr;
SPIPlanPtr head_position_plan = nullptr;
SPIPlanPtr sequence_plan = nullptr;

// A plan prepared once per session and kept (PostgreSQL re-plans it when what it uses changes).
// Under Call.
SPIPlanPtr KeptPlan(SPIPlanPtr &plan, const char *sql, int nargs, const Oid *types) {
  if (plan == nullptr) plan = PrepareAndKeep(sql, nargs, types);
  return plan;
}

// Runs a plan with these parameters, its rows to dest (nullptr: SPI_tuptable). Under Call.
void RunPlan(SPIPlanPtr plan, int nargs, const Datum *values, const bool *nulls, DestReceiver *dest) {
  ParamListInfo params = nullptr;
  if (nargs > 0) {
    params = makeParamList(nargs);
    for (int i = 0; i < nargs; ++i) {
      params->params[i].value = values[i];
      params->params[i].isnull = nulls[i];
      params->params[i].pflags = PARAM_FLAG_CONST;
      params->params[i].ptype = SPI_getargtypeid(plan, i);
    }
  }
  SPIExecuteOptions options;
  memset(&options, 0, sizeof(options));
  options.params = params;
  options.read_only = false;  // a snapshot of its own, as a VOLATILE function's statement
  options.dest = dest;
  int rc = SPI_execute_plan_extended(plan, &options);
  if (rc < 0) elog(ERROR, "statesman: a page query failed: %s", SPI_result_code_string(rc));
}

// ---- The envelope: store, epoch, the roots' fallbacks ----------------------------------------

constexpr int kRootKeyBytes = 64;  // root names are at most 63 bytes (statesman._check_name)

struct RootFallback {
  char root[kRootKeyBytes];
  bool fingerprint_null, content_type_null;
  Datum fingerprint, content_type;
};

struct Envelope {
  Datum store = 0, epoch = 0;
  char epoch_text[UUID_LEN * 2 + 5];  // the epoch as the message writes it
  HTAB *roots = nullptr;              // root → its fallbacks; nullptr when no root declares one
  bool outbox_fingerprint_null = true, outbox_content_type_null = true;
  Datum outbox_fingerprint = 0, outbox_content_type = 0;
};

// Reads the store's name and epoch and the roots' fallbacks into cxt, once per call. Under Call.
void LoadEnvelope(Envelope &e, MemoryContext cxt) {
  RunPlan(KeptPlan(store_plan, kStoreSql, 0, nullptr), 0, nullptr, nullptr, nullptr);
  if (SPI_processed != 1) elog(ERROR, "statesman: statesman.store must hold one row");
  bool isnull = false;
  Datum store = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  Datum epoch = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
  MemoryContext old = MemoryContextSwitchTo(cxt);
  e.store = datumCopy(store, false, -1);
  e.epoch = datumCopy(epoch, false, UUID_LEN);
  MemoryContextSwitchTo(old);
  statesman::store::FormatUuid(DatumGetUUIDP(e.epoch)->data, e.epoch_text);
  SPI_freetuptable(SPI_tuptable);

  RunPlan(KeptPlan(roots_plan, kRootsSql, 0, nullptr), 0, nullptr, nullptr, nullptr);
  if (SPI_processed > 0) {
    HASHCTL ctl;
    memset(&ctl, 0, sizeof(ctl));
    ctl.keysize = kRootKeyBytes;
    ctl.entrysize = sizeof(RootFallback);
    ctl.hcxt = cxt;
    e.roots =
        hash_create("statesman roots", static_cast<long>(SPI_processed), &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
    for (uint64 i = 0; i < SPI_processed; ++i) {
      HeapTuple t = SPI_tuptable->vals[i];
      char *root = SPI_getvalue(t, SPI_tuptable->tupdesc, 1);
      if (root == nullptr || strlen(root) >= static_cast<size_t>(kRootKeyBytes)) continue;
      bool found = false;
      RootFallback *r = static_cast<RootFallback *>(hash_search(e.roots, root, HASH_ENTER, &found));
      Datum fp = SPI_getbinval(t, SPI_tuptable->tupdesc, 2, &r->fingerprint_null);
      Datum ct = SPI_getbinval(t, SPI_tuptable->tupdesc, 3, &r->content_type_null);
      old = MemoryContextSwitchTo(cxt);
      r->fingerprint = r->fingerprint_null ? 0 : datumCopy(fp, false, -1);
      r->content_type = r->content_type_null ? 0 : datumCopy(ct, false, -1);
      MemoryContextSwitchTo(old);
    }
  }
  SPI_freetuptable(SPI_tuptable);
}

// An outbox's fallbacks (text, or nullopt) into e, in cxt. Under Call.
void SetOutboxFallbacks(Envelope &e, const Value &fingerprint, const Value &content_type, MemoryContext cxt) {
  MemoryContext old = MemoryContextSwitchTo(cxt);
  e.outbox_fingerprint_null = !fingerprint.has_value();
  if (fingerprint)
    e.outbox_fingerprint =
        PointerGetDatum(cstring_to_text_with_len(fingerprint->data(), static_cast<int>(fingerprint->size())));
  e.outbox_content_type_null = !content_type.has_value();
  if (content_type)
    e.outbox_content_type =
        PointerGetDatum(cstring_to_text_with_len(content_type->data(), static_cast<int>(content_type->size())));
  MemoryContextSwitchTo(old);
}

// ---- The receiver -------------------------------------------------------------------------

enum class Form {
  kReadFeed,  // read_feed's rows, into a tuplestore
  kText,      // a sink's page: sink::Message, JSON text
  kTable,     // the `table` sink's page: arrays of message ids, positions and jsonb messages
};

struct PageReceiver {
  DestReceiver pub;
  Form form;
  const Envelope *envelope;
  // Messages only for records of this root (an outbox's filter); nullptr: every record.
  const char *publish_root;
  int publish_root_len;
  MemoryContext row_cxt;   // reset after each row
  MemoryContext page_cxt;  // what outlives the row (kTable's arrays)
  int64 read, matching, last_position;
  char *unbuilt;  // why a message of the page cannot be built (kText, kTable), in page_cxt
  // the last root looked up in envelope->roots
  int last_root_len;
  char last_root[kRootKeyBytes];
  const RootFallback *last_fallback;
  // kReadFeed
  Tuplestorestate *tuplestore;
  TupleDesc tupdesc;
  // kText
  std::vector<sink::Message> *messages;
  // kTable
  Datum *ids, *positions, *jsons;
  int count, capacity;
};

const RootFallback *FindRoot(PageReceiver *r, Datum root) {
  text *t = DatumGetTextPP(root);
  int len = static_cast<int>(VARSIZE_ANY_EXHDR(t));
  if (len >= kRootKeyBytes) return nullptr;
  if (len == r->last_root_len && memcmp(r->last_root, VARDATA_ANY(t), len) == 0) return r->last_fallback;
  memcpy(r->last_root, VARDATA_ANY(t), len);
  r->last_root[len] = '\0';
  r->last_root_len = len;
  r->last_fallback =
      static_cast<const RootFallback *>(hash_search(r->envelope->roots, r->last_root, HASH_FIND, nullptr));
  return r->last_fallback;
}

// A row of _feed_page as a message's fields, with the envelope fallbacks: the record's own,
// else the outbox's, else the root's.
void FillInput(PageReceiver *r, const Datum *v, const bool *isnull, MessageInput &in) {
  static constexpr struct {
    MessageField field;
    FeedColumn column;
  } kMap[] = {{kAddress, cAddress},
              {kRoot, cRoot},
              {kPath, cPath},
              {kPartition, cPartition},
              {kRevision, cRevision},
              {kGlobalPosition, cPosition},
              {kOccurredAt, cOccurredAt},
              {kOperation, cOperation},
              {kStatus, cStatus},
              {kValueType, cValueType},
              {kSchemaVersion, cSchemaVersion},
              {kSource, cSource},
              {kFingerprint, cFingerprint},
              {kContentType, cContentType},
              {kSerializerId, cSerializerId},
              {kPayload, cPayload},
              {kCorrelationId, cCorrelationId},
              {kCausationId, cCausationId},
              {kMetadata, cMetadata},
              {kError, cError}};
  const Envelope &e = *r->envelope;
  in.value[kStore] = e.store;
  in.isnull[kStore] = false;
  in.value[kEpoch] = e.epoch;
  in.isnull[kEpoch] = false;
  in.epoch_text = e.epoch_text;
  for (const auto &m : kMap) {
    in.value[m.field] = v[m.column];
    in.isnull[m.field] = isnull[m.column];
  }
  if (in.isnull[kFingerprint] && !e.outbox_fingerprint_null) {
    in.value[kFingerprint] = e.outbox_fingerprint;
    in.isnull[kFingerprint] = false;
  }
  if (in.isnull[kContentType] && !e.outbox_content_type_null) {
    in.value[kContentType] = e.outbox_content_type;
    in.isnull[kContentType] = false;
  }
  if ((in.isnull[kFingerprint] || in.isnull[kContentType]) && e.roots != nullptr && !isnull[cRoot]) {
    if (const RootFallback *f = FindRoot(r, v[cRoot])) {
      if (in.isnull[kFingerprint] && !f->fingerprint_null) {
        in.value[kFingerprint] = f->fingerprint;
        in.isnull[kFingerprint] = false;
      }
      if (in.isnull[kContentType] && !f->content_type_null) {
        in.value[kContentType] = f->content_type;
        in.isnull[kContentType] = false;
      }
    }
  }
}

// One row of the page (the columns of FeedColumn) into the receiver's form.
bool ReceiveValues(PageReceiver *r, const Datum *v, const bool *isnull) {
  if (isnull[cPosition] || isnull[cAddress] || isnull[cRevision])
    elog(ERROR, "statesman: statesman._feed_page returned a row without a position, address or revision");
  ++r->read;
  r->last_position = DatumGetInt64(v[cPosition]);
  if (r->publish_root != nullptr) {
    if (isnull[cRoot]) return true;
    text *root = DatumGetTextPP(v[cRoot]);
    if (static_cast<int>(VARSIZE_ANY_EXHDR(root)) != r->publish_root_len ||
        memcmp(VARDATA_ANY(root), r->publish_root, r->publish_root_len) != 0)
      return true;
  }
  ++r->matching;
  if (r->unbuilt != nullptr) return true;  // the page fails anyway: count the rest only

  MemoryContext old = MemoryContextSwitchTo(r->row_cxt);
  MessageInput in;
  FillInput(r, v, isnull, in);
  if (r->form != Form::kReadFeed) {
    if (char *why = MessageUnbuildable(in)) {
      r->unbuilt = MemoryContextStrdup(r->page_cxt, why);
      MemoryContextSwitchTo(old);
      MemoryContextReset(r->row_cxt);
      return true;
    }
  }
  text *id = MessageIdText(in);
  in.message_id = VARDATA(id);
  in.message_id_len = static_cast<int>(VARSIZE(id) - VARHDRSZ);
  switch (r->form) {
    case Form::kReadFeed: {
      Datum out[5] = {v[cPosition], PointerGetDatum(id), v[cAddress], v[cRevision],
                      JsonbPGetDatum(BuildMessageJsonb(in))};
      bool out_null[5] = {false, false, false, false, false};
      tuplestore_putvalues(r->tuplestore, r->tupdesc, out, out_null);
      break;
    }
    case Form::kText: {
      StringInfoData json;
      initStringInfo(&json);
      AppendMessageText(&json, in);
      bool failed = false;
      try {
        sink::Message m;
        m.position = r->last_position;
        m.id.assign(in.message_id, in.message_id_len);
        m.json.assign(json.data, json.len);
        r->messages->push_back(std::move(m));
      } catch (...) {
        failed = true;
      }
      if (failed) ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory building a page")));
      break;
    }
    case Form::kTable: {
      // Built in the row's context; only the message and its id are kept, in the page's.
      Jsonb *message = BuildMessageJsonb(in);
      MemoryContextSwitchTo(r->page_cxt);
      if (r->count == r->capacity) {
        r->capacity = r->capacity == 0 ? 256 : r->capacity * 2;
        Size bytes = sizeof(Datum) * r->capacity;
        r->ids = static_cast<Datum *>(r->ids == nullptr ? palloc(bytes) : repalloc(r->ids, bytes));
        r->positions = static_cast<Datum *>(r->positions == nullptr ? palloc(bytes) : repalloc(r->positions, bytes));
        r->jsons = static_cast<Datum *>(r->jsons == nullptr ? palloc(bytes) : repalloc(r->jsons, bytes));
      }
      text *kept_id = static_cast<text *>(palloc(VARSIZE(id)));
      memcpy(kept_id, id, VARSIZE(id));
      r->ids[r->count] = PointerGetDatum(kept_id);
      r->positions[r->count] = v[cPosition];
      Jsonb *kept = static_cast<Jsonb *>(palloc(VARSIZE(message)));
      memcpy(kept, message, VARSIZE(message));
      r->jsons[r->count] = JsonbPGetDatum(kept);
      ++r->count;
      break;
    }
  }
  MemoryContextSwitchTo(old);
  MemoryContextReset(r->row_cxt);
  return true;
}

bool ReceiveRow(TupleTableSlot *slot, DestReceiver *self) {
  slot_getallattrs(slot);
  return ReceiveValues(reinterpret_cast<PageReceiver *>(self), slot->tts_values, slot->tts_isnull);
}

void ReceiverStartup(DestReceiver *, int, TupleDesc) {}
void ReceiverShutdown(DestReceiver *) {}
void ReceiverDestroy(DestReceiver *) {}

// A receiver of one form. Under Call (palloc).
PageReceiver *NewReceiver(Form form, const Envelope *envelope, MemoryContext page_cxt) {
  PageReceiver *r = static_cast<PageReceiver *>(MemoryContextAllocZero(page_cxt, sizeof(PageReceiver)));
  r->pub.receiveSlot = ReceiveRow;
  r->pub.rStartup = ReceiverStartup;
  r->pub.rShutdown = ReceiverShutdown;
  r->pub.rDestroy = ReceiverDestroy;
  r->pub.mydest = DestNone;
  r->form = form;
  r->envelope = envelope;
  r->page_cxt = page_cxt;
  r->row_cxt = AllocSetContextCreate(page_cxt, "statesman page row", ALLOCSET_DEFAULT_SIZES);
  r->last_root_len = -1;
  return r;
}

// ---- The row source ------------------------------------------------------------------------
//
// The rows of statesman._feed_page(after, upto, max_records, root) (sql/install/07_sequencer.sql,
// the definition of what is readable), read here straight from the tables and their indexes:
// first the records from before 0.4.0 by legacy_position (all below the first tick's base),
// then tick by tick from the last tick whose base is <= after + 1, each tick's records by
// their id in [lo, hi] (position base + (id - lo)), kept when their transaction is visible in
// the tick's snapshot and not in the previous one (every committed one for a range tick). Rows
// come in position order without sorting, each built into a message from the heap tuple as it
// is read. The same snapshot rules as the SQL function: one snapshot for the whole page, taken
// after what this transaction did before (the command counter moves on, as for a statement).
// test/sql/readpath.sql compares the two on feeds with held, aborted and pruned records.

// The relations the row source reads, opened for one page.
struct FeedRelations {
  Relation history, history_id, history_legacy, ticks, ticks_pkey, ticks_base;
  AttrNumber column[cFeedColumns];  // history's attribute for each FeedColumn (0: cPosition)
  AttrNumber txid, legacy_position;
  AttrNumber tick_id, base, lo, hi, snap, prev_snap;  // of ticks
};

FeedRelations OpenFeedRelations() {
  Oid schema = get_namespace_oid("statesman", false);
  FeedRelations f;
  f.history = table_open(StatesmanRelation(schema, "history"), AccessShareLock);
  f.history_id = index_open(StatesmanRelation(schema, "history_id"), AccessShareLock);
  f.history_legacy = index_open(StatesmanRelation(schema, "history_legacy_position"), AccessShareLock);
  f.ticks = table_open(StatesmanRelation(schema, "ticks"), AccessShareLock);
  f.ticks_pkey = index_open(StatesmanRelation(schema, "ticks_pkey"), AccessShareLock);
  f.ticks_base = index_open(StatesmanRelation(schema, "ticks_base"), AccessShareLock);
  static constexpr const char *kNames[cFeedColumns] = {
      nullptr,       "id",           "address",       "root",           "path",           "partition", "revision",
      "occurred_at", "operation",    "status",        "value_type",     "schema_version", "source",    "payload",
      "fingerprint", "content_type", "serializer_id", "correlation_id", "causation_id",   "error",     "metadata"};
  f.column[cPosition] = 0;
  for (int c = 1; c < cFeedColumns; ++c) f.column[c] = Column(f.history, kNames[c]);
  f.txid = Column(f.history, "txid");
  f.legacy_position = Column(f.history, "legacy_position");
  f.tick_id = Column(f.ticks, "tick_id");
  f.base = Column(f.ticks, "base");
  f.lo = Column(f.ticks, "lo");
  f.hi = Column(f.ticks, "hi");
  f.snap = Column(f.ticks, "snap");
  f.prev_snap = Column(f.ticks, "prev_snap");
  return f;
}

void CloseFeedRelations(FeedRelations &f) {
  index_close(f.ticks_base, NoLock);
  index_close(f.ticks_pkey, NoLock);
  table_close(f.ticks, NoLock);
  index_close(f.history_legacy, NoLock);
  index_close(f.history_id, NoLock);
  table_close(f.history, NoLock);
}

// Hands the record in `slot` (a row of history) to r at `position`, when it is of `root` (if
// given). Returns whether it was handed on.
bool EmitRecord(PageReceiver *r, const FeedRelations &f, TupleTableSlot *slot, int64 position, const text *root) {
  Datum v[cFeedColumns];
  bool isnull[cFeedColumns];
  slot_getallattrs(slot);
  if (root != nullptr) {
    int a = f.column[cRoot] - 1;
    if (slot->tts_isnull[a]) return false;
    text *t = DatumGetTextPP(slot->tts_values[a]);
    if (VARSIZE_ANY_EXHDR(t) != VARSIZE_ANY_EXHDR(root) ||
        memcmp(VARDATA_ANY(t), VARDATA_ANY(root), VARSIZE_ANY_EXHDR(root)) != 0)
      return false;
  }
  v[cPosition] = Int64GetDatum(position);
  isnull[cPosition] = false;
  for (int c = 1; c < cFeedColumns; ++c) {
    v[c] = slot->tts_values[f.column[c] - 1];
    isnull[c] = slot->tts_isnull[f.column[c] - 1];
  }
  ReceiveValues(r, v, isnull);
  return true;
}

// Reads the page's rows into r; returns how many. Under Call.
int64 ScanFeedPage(PageReceiver *r, int64 after, const int64 *upto, int32 max_records, const char *root_name) {
  if (max_records <= 0) return 0;
  const int64 from = std::min<int64>(after, PG_INT64_MAX - 1);  // positions above this
  const text *root = root_name != nullptr ? cstring_to_text(root_name) : nullptr;
  CommandCounterIncrement();
  Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
  FeedRelations f = OpenFeedRelations();
  TupleTableSlot *record = table_slot_create(f.history, nullptr);
  TupleTableSlot *tick = table_slot_create(f.ticks, nullptr);
  MemoryContext tick_cxt = AllocSetContextCreate(CurrentMemoryContext, "statesman tick", ALLOCSET_SMALL_SIZES);
  int64 emitted = 0;

  // The records from before 0.4.0, by their stored position.
  {
    ScanKeyData keys[2];
    int nkeys = 1;
    ScanKeyInit(&keys[0], 1, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(from));
    if (upto != nullptr) ScanKeyInit(&keys[nkeys++], 1, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(*upto));
    IndexScanDesc scan = index_beginscan(f.history, f.history_legacy, snapshot, nkeys, 0);
    index_rescan(scan, keys, nkeys, nullptr, 0);
    while (emitted < max_records && index_getnext_slot(scan, ForwardScanDirection, record)) {
      bool isnull = true;
      Datum pos = slot_getattr(record, f.legacy_position, &isnull);
      if (isnull) continue;
      if (EmitRecord(r, f, record, DatumGetInt64(pos), root)) ++emitted;
    }
    index_endscan(scan);
  }

  // The tick where reading starts: the last whose base is <= from + 1.
  int64 start_tick = 0;
  if (emitted < max_records) {
    ScanKeyData key;
    ScanKeyInit(&key, 1, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(from + 1));
    IndexScanDesc scan = index_beginscan(f.ticks, f.ticks_base, snapshot, 1, 0);
    index_rescan(scan, &key, 1, nullptr, 0);
    if (index_getnext_slot(scan, BackwardScanDirection, tick)) {
      bool isnull = true;
      start_tick = DatumGetInt64(slot_getattr(tick, f.tick_id, &isnull));
    }
    index_endscan(scan);
  }

  // Tick by tick, each tick's records in id order.
  if (emitted < max_records) {
    ScanKeyData tick_key;
    ScanKeyInit(&tick_key, 1, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(start_tick));
    IndexScanDesc ticks_scan = index_beginscan(f.ticks, f.ticks_pkey, snapshot, 1, 0);
    index_rescan(ticks_scan, &tick_key, 1, nullptr, 0);
    IndexScanDesc ids = index_beginscan(f.history, f.history_id, snapshot, 2, 0);
    while (emitted < max_records && index_getnext_slot(ticks_scan, ForwardScanDirection, tick)) {
      slot_getallattrs(tick);
      int64 base = DatumGetInt64(tick->tts_values[f.base - 1]);
      int64 lo = DatumGetInt64(tick->tts_values[f.lo - 1]);
      int64 hi = DatumGetInt64(tick->tts_values[f.hi - 1]);
      if (hi < lo) continue;                       // an anchor
      if (upto != nullptr && base > *upto) break;  // bases rise with tick_id
      int64 first = lo + std::clamp<int64>(from + 1 - base, 0, hi - lo + 1);
      int64 last = upto != nullptr ? lo + std::min<int64>(*upto - base, hi - lo) : hi;
      if (first > last) continue;
      MemoryContextReset(tick_cxt);
      const StoredSnapshot *snap = nullptr, *prev = nullptr;
      if (!tick->tts_isnull[f.snap - 1]) {
        MemoryContext old = MemoryContextSwitchTo(tick_cxt);
        snap = reinterpret_cast<const StoredSnapshot *>(PG_DETOAST_DATUM_COPY(tick->tts_values[f.snap - 1]));
        if (!tick->tts_isnull[f.prev_snap - 1])
          prev = reinterpret_cast<const StoredSnapshot *>(PG_DETOAST_DATUM_COPY(tick->tts_values[f.prev_snap - 1]));
        MemoryContextSwitchTo(old);
      }
      ScanKeyData keys[2];
      ScanKeyInit(&keys[0], 1, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(first));
      ScanKeyInit(&keys[1], 1, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(last));
      index_rescan(ids, keys, 2, nullptr, 0);
      while (emitted < max_records && index_getnext_slot(ids, ForwardScanDirection, record)) {
        bool isnull = true;
        int64 id = DatumGetInt64(slot_getattr(record, f.column[cId], &isnull));
        if (snap != nullptr) {
          // pg_visible_in_snapshot(NULL, …) is NULL: a record without a txid is in no tick
          // with a snapshot; prev_snap NULL makes the SQL condition NULL too.
          Datum txid = slot_getattr(record, f.txid, &isnull);
          if (isnull || prev == nullptr) continue;
          FullTransactionId xid = DatumGetFullTransactionId(txid);
          if (!VisibleInSnapshot(xid, snap) || VisibleInSnapshot(xid, prev)) continue;
        }
        if (EmitRecord(r, f, record, base + (id - lo), root)) ++emitted;
      }
    }
    index_endscan(ids);
    index_endscan(ticks_scan);
  }

  MemoryContextDelete(tick_cxt);
  ExecDropSingleTupleTableSlot(tick);
  ExecDropSingleTupleTableSlot(record);
  CloseFeedRelations(f);
  UnregisterSnapshot(snapshot);
  return emitted;
}

// The rows of statesman._feed_page(after, upto, max_records, root) to r, and, when there were
// any, the WAL flushed as statesman._durable does before any of them is acted on: the receiver
// only collects, its caller hands the page on after this returns. Under Call.
void RunFeedPage(PageReceiver *r, int64 after, const int64 *upto, int32 max_records, const char *root) {
  if (ScanFeedPage(r, after, upto, max_records, root) > 0) feed::FlushReadPositions();
}

// A statement's one value as int8 (NULL: nullopt). Under Call.
bool SingleInt8(SPIPlanPtr plan, int nargs, const Datum *values, const bool *nulls, int64 *out) {
  RunPlan(plan, nargs, values, nulls, nullptr);
  bool isnull = true;
  if (SPI_processed == 1) {
    Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    if (!isnull) *out = DatumGetInt64(d);
  }
  SPI_freetuptable(SPI_tuptable);
  return !isnull;
}

// The memory of a page (its envelope, receiver and, for the `table` sink, its messages until
// they are inserted): one context for the session, reset before each page, whose first block
// (kept across resets) holds a page of ordinary messages, so that reading a page does not ask
// the allocator for fresh memory every time. Under Call.
MemoryContext PageMemory() {
  static MemoryContext memory = nullptr;
  if (memory == nullptr)
    memory = AllocSetContextCreate(TopMemoryContext, "statesman page", 1024 * 1024, 1024 * 1024, 8 * 1024 * 1024);
  else
    MemoryContextReset(memory);
  return memory;
}

// ---- Subtransactions ----------------------------------------------------------------------

struct Failure {
  int sqlerrcode;
  std::string message;
};

// Runs body() in a subtransaction, as a PL/pgSQL block with an EXCEPTION WHEN OTHERS clause: an
// error (a PostgreSQL ERROR or a statesman::Error) rolls back only the subtransaction and is
// returned; a query cancel passes on, as does any other exception.
std::optional<Failure> Subtransaction(const std::function<void()> &body) {
  MemoryContext context = CurrentMemoryContext;
  ResourceOwner owner = CurrentResourceOwner;
  Call([&] {
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(context);
  });
  auto rollback = [&] {
    Call([&] {
      RollbackAndReleaseCurrentSubTransaction();
      MemoryContextSwitchTo(context);
      CurrentResourceOwner = owner;
    });
  };
  std::optional<Failure> failure;
  try {
    body();
  } catch (const PgError &e) {
    int code = e.Data() != nullptr ? e.Data()->sqlerrcode : ERRCODE_INTERNAL_ERROR;
    rollback();
    if (code == ERRCODE_QUERY_CANCELED) throw;
    return Failure{code, e.what()};
  } catch (const Error &e) {
    rollback();
    return Failure{MAKE_SQLSTATE(e.Sqlstate()[0], e.Sqlstate()[1], e.Sqlstate()[2], e.Sqlstate()[3], e.Sqlstate()[4]),
                   e.what()};
  } catch (...) {
    rollback();
    throw;
  }
  Call([&] {
    ReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(context);
    CurrentResourceOwner = owner;
  });
  return failure;
}

// ---- An outbox's page -----------------------------------------------------------------------

// Takes the page lock (statesman._page_outbox: shared, until the transaction ends, so that a
// dropped outbox's cursor can never be written back by a page under way), then reads the
// outbox's row and its cursor, in a statement of its own (it sees what committed before the
// lock was granted).
struct Head {
  bool found = false;
  bool enabled = false;
  int batch_size = 0;
  int64 cursor = 0;
  Value root, fingerprint, content_type, version, sink_options, table_option;
};

Head ReadHead(const std::string &outbox_id) {
  QueryValue("SELECT pg_catalog.pg_advisory_xact_lock_shared(statesman._lock_space('page'), statesman._lease_key($1))",
             {outbox_id});
  std::vector<Row> rows = Query(
      "SELECT o.enabled, o.root, o.batch_size, o.fingerprint, o.payload_content_type, o.xmin::text, "
      "  o.sink_options::text, o.sink_options->>'table', c.position "
      "FROM statesman.outboxes o LEFT JOIN statesman.cursors c ON c.outbox_id = o.outbox_id "
      "WHERE o.outbox_id = $1",
      {outbox_id});
  Head h;
  if (rows.empty()) return h;
  const Row &r = rows[0];
  h.found = true;
  h.enabled = r[0] == "t";
  h.root = r[1];
  h.batch_size = static_cast<int>(ToInt(r[2], 1000));
  h.fingerprint = r[3];
  h.content_type = r[4];
  h.version = r[5];
  h.sink_options = r[6];
  h.table_option = r[7];
  h.cursor = ToInt(r[8], 0);
  return h;
}

// The records of a page after `after` (at most batch_size), read by one _feed_page call into a
// receiver of this form, with the outbox's envelope. Under Call; the receiver is in page_cxt.
PageReceiver *ReadPageRecords(Form form, int64 after, int batch_size, const Value &root, const Value &fingerprint,
                              const Value &content_type, MemoryContext page_cxt, std::vector<sink::Message> *messages) {
  Envelope *e = static_cast<Envelope *>(MemoryContextAllocZero(page_cxt, sizeof(Envelope)));
  e->outbox_fingerprint_null = e->outbox_content_type_null = true;
  LoadEnvelope(*e, page_cxt);
  SetOutboxFallbacks(*e, fingerprint, content_type, page_cxt);
  PageReceiver *r = NewReceiver(form, e, page_cxt);
  if (root) {
    r->publish_root = MemoryContextStrdup(page_cxt, root->c_str());
    r->publish_root_len = static_cast<int>(root->size());
  }
  r->messages = messages;
  RunFeedPage(r, after, nullptr, batch_size, nullptr);
  return r;
}

}  // namespace

OutboxPage OpenOutboxPage(const std::string &outbox_id) {
  Head h = ReadHead(outbox_id);
  OutboxPage p;
  if (!h.found) {
    p.status = "gone";
    return p;
  }
  if (!h.enabled) {
    p.status = "paused";
    return p;
  }
  p.status = "open";
  p.after = h.cursor;
  p.batch_size = h.batch_size;
  p.version = h.version.value_or("");
  p.root = h.root;
  p.fingerprint = h.fingerprint;
  p.content_type = h.content_type;
  return p;
}

void ReadOutboxPage(OutboxPage &p) {
  p.messages.clear();
  p.unbuilt.reset();
  p.read = p.matching = 0;
  MemoryContext page_cxt = nullptr;
  std::optional<Failure> failure = Subtransaction([&] {
    StatementScope running;
    Call([&] {
      page_cxt = PageMemory();
      PageReceiver *r = ReadPageRecords(Form::kText, p.after, p.batch_size, p.root, p.fingerprint, p.content_type,
                                        page_cxt, &p.messages);
      p.read = r->read;
      p.matching = r->matching;
      p.last_position = r->last_position;
      if (r->unbuilt != nullptr) p.unbuilt = std::string(r->unbuilt);
    });
  });
  if (page_cxt != nullptr) Call([&] { MemoryContextReset(page_cxt); });
  if (failure) {
    // The page could not even be read to its end: counted as unknown.
    p.status = "ready";
    p.read = -1;
    p.matching = 0;
    p.unbuilt = failure->message;
  }
  if (p.unbuilt) {
    p.messages.clear();
    p.status = "ready";
    return;
  }
  if (p.read == 0) {
    p.status = "empty";
    return;
  }
  p.status = "ready";
  p.full_page = p.read >= p.batch_size;
}

OutboxPage ReadPageAfter(const OutboxPage &current) {
  OutboxPage p;
  p.status = "open";
  p.after = current.last_position;
  p.batch_size = current.batch_size;
  p.version = current.version;
  p.root = current.root;
  p.fingerprint = current.fingerprint;
  p.content_type = current.content_type;
  ReadOutboxPage(p);
  return p;
}

namespace {

// ---- The `table` sink's page ----------------------------------------------------------------

// The table sink's target, quoted and schema-qualified (statesman._sink_table), for the last
// options seen: the function is IMMUTABLE, so it runs once per change of the options.
std::string cached_options, cached_target;

std::string SinkTarget(const std::string &options) {
  if (cached_target.empty() || options != cached_options) {
    Value target = QueryValue("SELECT statesman._sink_table($1::jsonb)", {options});
    cached_target = target.value_or("");
    cached_options = options;
  }
  return cached_target;
}

// The inserts into the target, plain and ON CONFLICT (message_id) DO NOTHING, kept for the last
// target (PostgreSQL re-plans them when the table changes, and reports a dropped one).
std::string insert_target;
SPIPlanPtr insert_plans[2] = {nullptr, nullptr};

// Inserts the rows of three arrays into target through the kept INSERT (plain, or ON CONFLICT
// (message_id) DO NOTHING); returns how many rows it inserted. The arrays are unnested in the
// select list (value per call, in step): in FROM, each would first be materialized. Under Call.
uint64 InsertArrays(const std::string &target, bool on_conflict, Datum ids, Datum positions, Datum jsons) {
  if (target != insert_target) {
    for (SPIPlanPtr &plan : insert_plans)
      if (plan != nullptr) {
        SPI_freeplan(plan);
        plan = nullptr;
      }
    insert_target = target;
  }
  SPIPlanPtr &plan = insert_plans[on_conflict ? 1 : 0];
  if (plan == nullptr) {
    // In palloc'd memory: preparing may ereport, and no C++ object may be live when it does.
    char *sql = psprintf(
        "INSERT INTO %s AS t (message_id, global_position, message) "
        "SELECT pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3)%s",
        target.c_str(), on_conflict ? " ON CONFLICT (message_id) DO NOTHING" : "");
    static const Oid types[3] = {TEXTARRAYOID, INT8ARRAYOID, JSONBARRAYOID};
    KeptPlan(plan, sql, 3, types);
  }
  Datum values[3] = {ids, positions, jsons};
  bool nulls[3] = {false, false, false};
  RunPlan(plan, 3, values, nulls, nullptr);
  return SPI_processed;
}

// Inserts the page's messages into target; returns how many rows it inserted. Into a plain
// table as COPY inserts (pg/bulk_insert.hpp); else, and for ON CONFLICT, by the kept INSERT.
// Under Call, as the target's owner (AsTableOwner).
uint64 InsertPage(const std::string &target, Oid relid, bool on_conflict, PageReceiver *r) {
  if (!on_conflict) {
    // The common case: rows written a batch at a time, as COPY writes them, when the table
    // needs nothing that only INSERT's executor applies.
    const BulkColumn columns[3] = {
        {"message_id", TEXTOID, r->ids}, {"global_position", INT8OID, r->positions}, {"message", JSONBOID, r->jsons}};
    uint64 inserted = 0;
    if (BulkInsert(relid, columns, 3, r->count, &inserted)) return inserted;
  }
  MemoryContext old = MemoryContextSwitchTo(r->page_cxt);
  Datum ids = PointerGetDatum(construct_array(r->ids, r->count, TEXTOID, -1, false, TYPALIGN_INT));
  Datum positions =
      PointerGetDatum(construct_array(r->positions, r->count, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
  Datum jsons = PointerGetDatum(construct_array(r->jsons, r->count, JSONBOID, -1, false, TYPALIGN_INT));
  MemoryContextSwitchTo(old);
  return InsertArrays(target, on_conflict, ids, positions, jsons);
}

std::string Text(int64 n) { return std::to_string(n); }

}  // namespace

void FinishPage(const std::string &outbox_id, const Value &last_position, int64_t published, int64_t deduplicated) {
  QueryValue("SELECT statesman._finish_page($1, $2::bigint, $3::bigint, $4::bigint)",
             {outbox_id, last_position, Text(published), Text(deduplicated)});
}

Row DeliverTablePage(const std::string &outbox_id) {
  Head h = ReadHead(outbox_id);
  Row result(8);
  if (!h.found) {
    result[0] = "gone";
    return result;
  }
  if (!h.enabled) {
    result[0] = "paused";
    return result;
  }
  int64 read = -1, matching = 0, last = 0;
  uint64 published = 0;
  Value target;
  MemoryContext page_cxt = nullptr;
  // The page's reading, the target's checks and the insert, in one subtransaction: the sink's
  // failure (a constraint, a trigger, a missing table) or a message that cannot be built is a
  // failed attempt, recorded.
  std::optional<Failure> failure = Subtransaction([&] {
    PageReceiver *r = nullptr;
    {
      StatementScope running;
      r = Call([&] {
        page_cxt = PageMemory();
        return ReadPageRecords(Form::kTable, h.cursor, h.batch_size, h.root, h.fingerprint, h.content_type, page_cxt,
                               nullptr);
      });
    }
    read = r->read;
    matching = r->matching;
    last = r->last_position;
    if (read == 0 || matching == 0) return;
    target = SinkTarget(h.sink_options.value_or("{}"));
    // Locked before it is checked, so that the table checked, and whose owner the inserts run
    // as, is the one they insert into. A statement: the lock may wait, and a stop cancels it.
    SinkTable table;
    {
      StatementScope running;
      table = Call([&] { return LockSinkTable(target->c_str()); });
    }
    QueryValue("SELECT statesman._check_sink_target($1)", {target});
    if (r->unbuilt != nullptr) throw Error(sqlstate::kProgramLimitExceeded, r->unbuilt);
    // The common case: nothing of this page is in the table yet. Re-delivery (a cursor seeded
    // back, a restored table): keep what is there. Either insert runs as the table's owner.
    std::optional<Failure> plain = Subtransaction([&] {
      StatementScope running;
      published =
          Call([&] { return AsTableOwner(table.owner, [&] { return InsertPage(*target, table.relid, false, r); }); });
    });
    if (plain) {
      if (plain->sqlerrcode != ERRCODE_UNIQUE_VIOLATION) throw Error(sqlstate::kInternalError, plain->message);
      StatementScope running;
      published =
          Call([&] { return AsTableOwner(table.owner, [&] { return InsertPage(*target, table.relid, true, r); }); });
    }
  });
  if (page_cxt != nullptr) Call([&] { MemoryContextReset(page_cxt); });
  Value after = h.cursor > 0 ? Value(Text(h.cursor)) : Value();
  if (failure) {
    std::string error = "table sink " + target.value_or(h.table_option.value_or("")) + ": " + failure->message;
    result[0] = "failed";
    if (read >= 0) {
      result[1] = Text(read);
      result[7] = read >= h.batch_size ? "t" : "f";
    }
    result[2] = after;
    result[5] = QueryValue("SELECT statesman._note_failure($1, $2)", {outbox_id, error});
    result[6] = error;
    return result;
  }
  if (read == 0) {
    result[0] = "empty";
    result[1] = "0";
    result[2] = after;
    return result;
  }
  int64 deduplicated = matching - static_cast<int64>(published);
  FinishPage(outbox_id, Value(Text(last)), static_cast<int64>(published), deduplicated);
  result[0] = "delivered";
  result[1] = Text(read);
  result[2] = Text(last);
  result[3] = Text(static_cast<int64>(published));
  result[4] = Text(deduplicated);
  result[5] = "0";
  result[7] = read >= h.batch_size ? "t" : "f";
  return result;
}

}  // namespace statesman::pg

// statesman._deliver_table_page(outbox_id) → statesman._page_result (see DeliverTablePage).
extern "C" Datum statesman_deliver_table_page(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  if (PG_ARGISNULL(0)) ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("outbox_id must not be NULL")));
  return Invoke([&] {
    char *id = Call([&] { return text_to_cstring(PG_GETARG_TEXT_PP(0)); });
    Call([] {
      if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "statesman: SPI_connect failed");
    });
    Row r = DeliverTablePage(id);
    char *cells[8];
    for (int i = 0; i < 8; ++i) cells[i] = nullptr;
    return Call([&] {
      SPI_finish();
      TupleDesc desc;
      if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        elog(ERROR, "statesman: _deliver_table_page must return a composite type");
      for (int i = 0; i < 8; ++i)
        if (r[i].has_value()) cells[i] = pstrdup(r[i]->c_str());
      HeapTuple t = BuildTupleFromCStrings(TupleDescGetAttInMetadata(BlessTupleDesc(desc)), cells);
      return HeapTupleGetDatum(t);
    });
  });
}

// statesman._insert_sink_rows(target, message_ids, global_positions, messages) → the rows
// inserted: the requeued dead letters of a `table` sink (statesman._redeliver_table_page, which
// reads them as the extension's owner) inserted with ON CONFLICT (message_id) DO NOTHING, as
// the target table's owner (AsTableOwner), as a page is.
extern "C" Datum statesman_insert_sink_rows(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  for (int i = 0; i < 4; ++i)
    if (PG_ARGISNULL(i))
      ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("arguments must not be NULL")));
  return Invoke([&] {
    std::string target = Call([&] { return text_to_cstring(PG_GETARG_TEXT_PP(0)); });
    Datum ids = PG_GETARG_DATUM(1), positions = PG_GETARG_DATUM(2), messages = PG_GETARG_DATUM(3);
    return Call([&] {
      if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "statesman: SPI_connect failed");
      SinkTable table = LockSinkTable(target.c_str());
      uint64 inserted = AsTableOwner(table.owner, [&] { return InsertArrays(target, true, ids, positions, messages); });
      SPI_finish();
      return Int64GetDatum(static_cast<int64>(inserted));
    });
  });
}

// statesman.read_feed(after, max_records, root) → (global_position, message_id, address,
// revision, message): the records after a position, in position order, as messages. Sequences
// on demand, but only in a READ COMMITTED transaction of its own: inside BEGIN … COMMIT the
// sequencer lock would be held until the caller commits and stall every other reader. Not in a
// read-only transaction (a hot standby's, for one): it serves what is sequenced. And only when
// the page is not full without it: the records sequenced now get positions above every
// readable one, so they could only extend a short page. The first pass reads up to the head as
// it is now; if that is short of a page, every readable record up to that head has been
// returned, and the second pass continues after it.
extern "C" Datum statesman_read_feed(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  if (PG_ARGISNULL(1))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("max_records must not be NULL")));
  int32 max_records = PG_GETARG_INT32(1);
  if (max_records < 1)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("max_records must be at least 1")));
  if (!PG_ARGISNULL(0) && PG_GETARG_INT64(0) < 0)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("after must not be negative")));
  char *root = nullptr;
  if (!PG_ARGISNULL(2)) {
    // statesman._check_name: ^[A-Za-z0-9_.-]{1,63}$ (ASCII only, so bytes are characters).
    root = text_to_cstring(PG_GETARG_TEXT_PP(2));
    size_t len = strlen(root);
    bool ok = len >= 1 && len <= 63;
    for (size_t i = 0; ok && i < len; ++i) {
      char c = root[i];
      ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
    }
    if (!ok)
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("root must match ^[A-Za-z0-9_.-]{1,63}$")));
    for (size_t i = 0; i < len; ++i)
      if (root[i] >= 'A' && root[i] <= 'Z') root[i] = static_cast<char>(root[i] - 'A' + 'a');
  }
  int64 after = PG_ARGISNULL(0) ? 0 : PG_GETARG_INT64(0);
  KeepPageMemory();
  return Invoke([&] {
    return Call([&] {
      InitMaterializedSRF(fcinfo, 0);
      ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
      if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "statesman: SPI_connect failed");
      bool on_demand = !IsTransactionBlock() && XactIsoLevel == XACT_READ_COMMITTED && !XactReadOnly;
      int64 upto = 0;
      bool has_upto = false;
      if (on_demand) {
        if (!SingleInt8(KeptPlan(head_position_plan, "SELECT statesman.head_position()", 0, nullptr), 0, nullptr,
                        nullptr, &upto))
          upto = 0;
        has_upto = true;
      }
      MemoryContext page_cxt =
          AllocSetContextCreate(CurrentMemoryContext, "statesman read_feed", ALLOCSET_DEFAULT_SIZES);
      Envelope *e = static_cast<Envelope *>(MemoryContextAllocZero(page_cxt, sizeof(Envelope)));
      e->outbox_fingerprint_null = e->outbox_content_type_null = true;
      LoadEnvelope(*e, page_cxt);
      PageReceiver *r = NewReceiver(Form::kReadFeed, e, page_cxt);
      r->tuplestore = rsinfo->setResult;
      r->tupdesc = rsinfo->setDesc;
      int64 left = max_records;
      for (;;) {
        r->read = 0;
        RunFeedPage(r, after, has_upto ? &upto : nullptr, static_cast<int32>(left), root);
        left -= r->read;
        if (!has_upto || left == 0) break;
        static const Oid types[1] = {INT4OID};
        Datum arg = Int32GetDatum(std::max<int32>(max_records, 10000));
        bool arg_null = false;
        RunPlan(KeptPlan(sequence_plan, "SELECT statesman.sequence_feed($1)", 1, types), 1, &arg, &arg_null, nullptr);
        SPI_freetuptable(SPI_tuptable);
        after = std::max(after, upto);
        has_upto = false;
      }
      MemoryContextDelete(page_cxt);
      SPI_finish();
      return static_cast<Datum>(0);
    });
  });
}
