// Capturing existing tables (docs/capture.md): the row trigger statesman._capture_row, the
// backfill's row append statesman._capture_put, and the entries capture_table and
// release_table, which check that the caller owns the table and then run their SQL bodies as
// the extension owner.
//
// The trigger is on the application's write path: it reads the table's configuration from
// statesman.captures once per session (again after a change of that table or of the captured
// table), builds the payload from the tuple in C++ (to_jsonb of a row of the captured columns)
// and appends through the append path directly (AppendCaptured), with no SQL of its own.
#include "statesman/store/append.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(statesman_capture_row);
PG_FUNCTION_INFO_V1(statesman_capture_put);
PG_FUNCTION_INFO_V1(statesman_capture_table);
PG_FUNCTION_INFO_V1(statesman_release_table);
}

#include <string>
#include <unordered_map>
#include <vector>

#include "statesman/pg/jsonb_format.hpp"
#include "statesman/store/names.hpp"

namespace statesman::pg {
namespace {

enum Op { kInsert, kUpdate, kDelete, kBackfill, kOpCount };
const char *const kOpNames[kOpCount] = {"insert", "update", "delete", "backfill"};

// One captured table's configuration as this session last read it. Its PostgreSQL objects
// (output functions, the payload's row type, the metadata values) live in `memory`.
struct CaptureConfig {
  bool valid = false;
  MemoryContext memory = nullptr;
  std::string root;
  std::vector<AttrNumber> key;
  std::vector<FmgrInfo> key_output;
  std::vector<std::string> key_names;
  std::vector<AttrNumber> columns;   // the payload's columns, in its row type's order
  TupleDesc payload_desc = nullptr;  // blessed: a record type of the captured columns
  AttrNumber partition = 0;
  FmgrInfo partition_output{};
  Datum metadata[kOpCount] = {};
};

std::unordered_map<Oid, CaptureConfig> *configs = nullptr;
Oid captures_relid = InvalidOid;  // statesman.captures, as last looked up
bool callback_registered = false;
uint64 invalidations = 0;  // counts the callbacks, to notice one during a build
FmgrInfo *to_jsonb_info = nullptr;

// A relcache invalidation of statesman.captures (its statement trigger sends one at every
// change), of every relation, or of a captured table (ALTER TABLE, CREATE/DROP TRIGGER): the
// copies concerned are marked stale. Only marked: a trigger call in progress may be using one
// (an invalidation is taken in whenever a lock is acquired); the next call rebuilds it.
void ForgetConfigs(Datum, Oid relid) {
  ++invalidations;
  if (configs == nullptr) return;
  if (relid == InvalidOid || relid == captures_relid) {
    for (auto &entry : *configs) entry.second.valid = false;
    captures_relid = InvalidOid;
    return;
  }
  auto found = configs->find(relid);
  if (found != configs->end()) found->second.valid = false;
}

std::vector<std::string> TextArray(Datum value) {
  std::vector<std::string> out;
  Call([&] {
    ArrayType *array = DatumGetArrayTypeP(value);
    Datum *elems = nullptr;
    bool *nulls = nullptr;
    int n = 0;
    deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
    for (int i = 0; i < n; ++i) {
      if (nulls[i]) elog(ERROR, "statesman: a NULL column name in statesman.captures");
    }
    // Copied out below, outside PostgreSQL's error handling.
    for (int i = 0; i < n; ++i) {
      text *t = DatumGetTextPP(elems[i]);
      out.emplace_back(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
    }
  });
  return out;
}

struct CaptureRow {
  bool found = false;
  const char *root = nullptr;
  Datum key = 0, columns = 0, partition = 0;
  bool columns_null = true, partition_null = true;
};

// Reads the table's row of statesman.captures with the latest snapshot (a capture committed
// after this transaction's snapshot was taken still applies: its trigger fires). Plain
// PostgreSQL code: run it under pg::Call. The Datums are palloc'd in the caller's context.
void ReadCaptureRow(Oid relid, CaptureRow *row) {
  Oid schema = get_namespace_oid("statesman", false);
  Oid captures = get_relname_relid("captures", schema);
  Oid index = get_relname_relid("captures_pkey", schema);
  if (!OidIsValid(captures) || !OidIsValid(index)) elog(ERROR, "statesman: the table statesman.captures is missing");
  captures_relid = captures;
  Relation rel = table_open(captures, AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  SysScanDesc scan = systable_beginscan(rel, index, true, snapshot, 1, &key);
  HeapTuple tuple = systable_getnext(scan);
  if (HeapTupleIsValid(tuple)) {
    TupleDesc desc = RelationGetDescr(rel);
    bool isnull = false;
    row->found = true;
    Datum value = heap_getattr(tuple, 2, desc, &isnull);
    row->root = TextDatumGetCString(value);
    row->key = datumCopy(heap_getattr(tuple, 3, desc, &isnull), false, -1);
    value = heap_getattr(tuple, 4, desc, &row->columns_null);
    if (!row->columns_null) row->columns = datumCopy(value, false, -1);
    value = heap_getattr(tuple, 5, desc, &row->partition_null);
    if (!row->partition_null) row->partition = datumCopy(value, false, -1);
  }
  systable_endscan(scan);
  UnregisterSnapshot(snapshot);
  table_close(rel, AccessShareLock);
}

// Builds the configuration of `rel` from statesman.captures and the catalog. C++: every
// PostgreSQL call goes through pg::Call.
CaptureConfig BuildConfig(Relation rel) {
  Oid relid = RelationGetRelid(rel);
  CaptureRow row;
  Call([&] {
    if (!callback_registered) {
      CacheRegisterRelcacheCallback(ForgetConfigs, static_cast<Datum>(0));
      callback_registered = true;
    }
    ReadCaptureRow(relid, &row);
  });
  if (!row.found)
    throw Error("55000",
                "statesman: table " + std::string(Call([&] { return RelationGetRelationName(rel); })) +
                    " has a capture trigger but is not captured",
                "Capture tables with statesman.capture_table; drop a trigger it did not create.");
  std::vector<std::string> key_names = TextArray(row.key);
  std::vector<std::string> column_names;
  if (!row.columns_null) column_names = TextArray(row.columns);
  std::string partition_name;
  if (!row.partition_null) partition_name = Call([&] { return TextDatumGetCString(row.partition); });

  CaptureConfig config;
  config.root = row.root;
  config.key_names = key_names;
  config.memory =
      Call([] { return AllocSetContextCreate(CacheMemoryContext, "statesman capture", ALLOCSET_SMALL_SIZES); });
  try {
    TupleDesc rel_desc = RelationGetDescr(rel);
    auto attnum = [&](const std::string &name) {
      AttrNumber n = Call([&] { return get_attnum(relid, name.c_str()); });
      if (n <= 0 || n > rel_desc->natts || TupleDescAttr(rel_desc, n - 1)->attisdropped)
        throw Error("42703", "statesman: captured column \"" + name + "\" of table " +
                                 Call([&] { return RelationGetRelationName(rel); }) + " does not exist");
      return n;
    };
    auto output = [&](AttrNumber n, FmgrInfo *info) {
      Call([&] {
        Oid out = InvalidOid;
        bool varlena = false;
        getTypeOutputInfo(TupleDescAttr(rel_desc, n - 1)->atttypid, &out, &varlena);
        fmgr_info_cxt(out, info, config.memory);
      });
    };
    for (const std::string &name : key_names) {
      config.key.push_back(attnum(name));
      config.key_output.emplace_back();
    }
    for (size_t i = 0; i < config.key.size(); ++i) output(config.key[i], &config.key_output[i]);
    if (row.columns_null) {
      for (int i = 0; i < rel_desc->natts; ++i)
        if (!TupleDescAttr(rel_desc, i)->attisdropped) config.columns.push_back(static_cast<AttrNumber>(i + 1));
    } else {
      for (const std::string &name : column_names) config.columns.push_back(attnum(name));
    }
    if (!row.partition_null) {
      config.partition = attnum(partition_name);
      output(config.partition, &config.partition_output);
    }
    std::string table = Call(
        [&] { return psprintf("%s.%s", get_namespace_name(RelationGetNamespace(rel)), RelationGetRelationName(rel)); });
    Call([&] {
      MemoryContext old = MemoryContextSwitchTo(config.memory);
      TupleDesc desc = CreateTemplateTupleDesc(static_cast<int>(config.columns.size()));
      for (size_t i = 0; i < config.columns.size(); ++i) {
        Form_pg_attribute attr = TupleDescAttr(rel_desc, config.columns[i] - 1);
        TupleDescInitEntry(desc, static_cast<AttrNumber>(i + 1), NameStr(attr->attname), attr->atttypid,
                           attr->atttypmod, attr->attndims);
        TupleDescInitEntryCollation(desc, static_cast<AttrNumber>(i + 1), attr->attcollation);
      }
      config.payload_desc = BlessTupleDesc(desc);
      for (int op = 0; op < kOpCount; ++op) {
        StringInfoData json;
        initStringInfo(&json);
        appendStringInfoString(&json, "{\"table\": ");
        escape_json(&json, table.c_str());
        appendStringInfo(&json, ", \"op\": \"%s\"}", kOpNames[op]);
        config.metadata[op] = DirectFunctionCall1(jsonb_in, CStringGetDatum(json.data));
      }
      if (to_jsonb_info == nullptr) {
        // to_jsonb reads its argument's type from the call expression: a record.
        MemoryContextSwitchTo(TopMemoryContext);
        FmgrInfo *info = static_cast<FmgrInfo *>(palloc0(sizeof(FmgrInfo)));
        fmgr_info_cxt(F_TO_JSONB, info, TopMemoryContext);
        info->fn_expr = reinterpret_cast<Node *>(makeFuncExpr(F_TO_JSONB, JSONBOID,
                                                              list_make1(makeNullConst(RECORDOID, -1, InvalidOid)),
                                                              InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL));
        to_jsonb_info = info;
      }
      MemoryContextSwitchTo(old);
    });
  } catch (...) {
    Call([&] { MemoryContextDelete(config.memory); });
    throw;
  }
  config.valid = true;
  return config;
}

// The table's configuration, from the session's copy unless it went stale.
const CaptureConfig &ConfigFor(Relation rel) {
  if (configs == nullptr) configs = new std::unordered_map<Oid, CaptureConfig>();
  Oid relid = RelationGetRelid(rel);
  auto found = configs->find(relid);
  if (found != configs->end() && found->second.valid) return found->second;
  if (found != configs->end()) {
    MemoryContext memory = found->second.memory;
    configs->erase(found);
    Call([&] { MemoryContextDelete(memory); });
  }
  uint64 before = invalidations;
  CaptureConfig config = BuildConfig(rel);
  // An invalidation taken in while it was built may concern what it read: use it this once.
  if (invalidations != before) config.valid = false;
  return configs->emplace(relid, std::move(config)).first->second;
}

// A row's address (path and partition) and, when asked, its payload, from its column values
// (indexed by attribute number - 1).
struct RowRecord {
  std::string path;
  std::string partition;
  Datum payload = 0;
};

RowRecord MakeRecord(const CaptureConfig &config, Relation rel, const Datum *values, const bool *nulls,
                     bool with_payload) {
  RowRecord record;
  for (size_t i = 0; i < config.key.size(); ++i) {
    AttrNumber n = config.key[i];
    if (nulls[n - 1])
      throw Error("23502", "statesman: key column \"" + config.key_names[i] + "\" of captured table " + Call([&] {
                             return RelationGetRelationName(rel);
                           }) + " is NULL: the row has no path",
                  "A captured row's path is made of its key columns' values; make them NOT NULL.");
    const char *text =
        Call([&] { return OutputFunctionCall(const_cast<FmgrInfo *>(&config.key_output[i]), values[n - 1]); });
    if (i > 0) record.path += '/';
    record.path += store::EscapeKeyValue(text);
  }
  if (config.partition != 0 && !nulls[config.partition - 1])
    record.partition = Call([&] {
      return OutputFunctionCall(const_cast<FmgrInfo *>(&config.partition_output), values[config.partition - 1]);
    });
  if (!with_payload) return record;
  record.payload = Call([&] {
    size_t n = config.columns.size();
    Datum *row_values = static_cast<Datum *>(palloc(n * sizeof(Datum)));
    bool *row_nulls = static_cast<bool *>(palloc(n * sizeof(bool)));
    for (size_t i = 0; i < n; ++i) {
      row_values[i] = values[config.columns[i] - 1];
      row_nulls[i] = nulls[config.columns[i] - 1];
    }
    HeapTuple tuple = heap_form_tuple(config.payload_desc, row_values, row_nulls);
    Datum jsonb = FunctionCall1Coll(to_jsonb_info, InvalidOid, HeapTupleGetDatum(tuple));
    Jsonb *jb = DatumGetJsonbP(jsonb);
    StringInfoData out;
    initStringInfo(&out);
    AppendJsonbText(&out, &jb->root);
    return PointerGetDatum(cstring_to_text_with_len(out.data, out.len));
  });
  return record;
}

void Append(const CaptureConfig &config, const RowRecord &record, bool tombstone, Op op) {
  CapturedRecord r;
  r.root = config.root.c_str();
  r.path = record.path.c_str();
  r.partition = record.partition.c_str();
  r.tombstone = tombstone;
  r.payload = record.payload;
  r.metadata = config.metadata[op];
  AppendCaptured(r);
}

// Whether any captured column differs between the old and the new row (binary image compare,
// as PostgreSQL's own "did this column change" checks do).
bool CapturedColumnsChanged(const CaptureConfig &config, Relation rel, TupleTableSlot *old_slot,
                            TupleTableSlot *new_slot) {
  return Call([&] {
    TupleDesc desc = RelationGetDescr(rel);
    for (AttrNumber n : config.columns) {
      if (old_slot->tts_isnull[n - 1] != new_slot->tts_isnull[n - 1]) return true;
      if (old_slot->tts_isnull[n - 1]) continue;
      Form_pg_attribute attr = TupleDescAttr(desc, n - 1);
      if (!datum_image_eq(old_slot->tts_values[n - 1], new_slot->tts_values[n - 1], attr->attbyval, attr->attlen))
        return true;
    }
    return false;
  });
}

void CaptureRowChange(TriggerData *trigger) {
  Relation rel = trigger->tg_relation;
  const CaptureConfig &config = ConfigFor(rel);
  TriggerEvent event = trigger->tg_event;
  TupleTableSlot *old_slot = trigger->tg_trigslot;
  if (TRIGGER_FIRED_BY_INSERT(event)) {
    Call([&] { slot_getallattrs(old_slot); });
    RowRecord record = MakeRecord(config, rel, old_slot->tts_values, old_slot->tts_isnull, true);
    Append(config, record, false, kInsert);
  } else if (TRIGGER_FIRED_BY_DELETE(event)) {
    Call([&] { slot_getallattrs(old_slot); });
    RowRecord record = MakeRecord(config, rel, old_slot->tts_values, old_slot->tts_isnull, false);
    Append(config, record, true, kDelete);
  } else if (TRIGGER_FIRED_BY_UPDATE(event)) {
    TupleTableSlot *new_slot = trigger->tg_newslot;
    Call([&] {
      slot_getallattrs(old_slot);
      slot_getallattrs(new_slot);
    });
    RowRecord before = MakeRecord(config, rel, old_slot->tts_values, old_slot->tts_isnull, false);
    RowRecord after = MakeRecord(config, rel, new_slot->tts_values, new_slot->tts_isnull, false);
    bool moved = before.path != after.path || before.partition != after.partition;
    if (!moved && !CapturedColumnsChanged(config, rel, old_slot, new_slot)) return;
    after = MakeRecord(config, rel, new_slot->tts_values, new_slot->tts_isnull, true);
    if (moved) Append(config, before, true, kUpdate);
    Append(config, after, false, kUpdate);
  }
}

// Runs the SQL body `sql` (one SELECT of a statesman._… function) as the extension owner,
// once the caller is found to own the table.
void RunAsOwner(Oid relid, const char *sql, int nargs, Oid *types, Datum *values, const char *nulls) {
  Call([&] {
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(tuple))
      ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
    ReleaseSysCache(tuple);
    if (!pg_class_ownercheck(relid, GetUserId()))
      ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                      errmsg("must be owner of table %s to capture or release it", get_rel_name(relid)),
                      errhint("The table's owner (or a member of its owner role) captures it.")));
    Oid schema = get_namespace_oid("statesman", false);
    Oid captures = get_relname_relid("captures", schema);
    Oid owner = InvalidOid;
    tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(captures));
    if (!HeapTupleIsValid(tuple)) elog(ERROR, "statesman: the table statesman.captures is missing");
    owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
    ReleaseSysCache(tuple);
    Oid saved_user = InvalidOid;
    int saved_context = 0;
    GetUserIdAndSecContext(&saved_user, &saved_context);
    // An ERROR below is cleaned up by the transaction's abort, which restores the user.
    SetUserIdAndSecContext(owner, saved_context | SECURITY_LOCAL_USERID_CHANGE);
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "statesman: SPI_connect failed");
    int rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
    if (rc != SPI_OK_SELECT) elog(ERROR, "statesman: %s failed: %s", sql, SPI_result_code_string(rc));
    SPI_finish();
    SetUserIdAndSecContext(saved_user, saved_context);
  });
}

}  // namespace
}  // namespace statesman::pg

// statesman._capture_row(): AFTER INSERT OR UPDATE OR DELETE FOR EACH ROW of a captured table.
extern "C" Datum statesman_capture_row(PG_FUNCTION_ARGS) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("statesman._capture_row() must be called as a trigger")));
  TriggerData *trigger = reinterpret_cast<TriggerData *>(fcinfo->context);
  if (!TRIGGER_FIRED_AFTER(trigger->tg_event) || !TRIGGER_FIRED_FOR_ROW(trigger->tg_event))
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("statesman._capture_row() must be an AFTER … FOR EACH ROW trigger")));
  statesman::pg::Invoke([&] {
    statesman::pg::CaptureRowChange(trigger);
    return 0;
  });
  return PointerGetDatum(nullptr);
}

// statesman._capture_put(tab oid, r record): the row as a put record, metadata op "backfill".
extern "C" Datum statesman_capture_put(PG_FUNCTION_ARGS) {
  Oid relid = PG_GETARG_OID(0);
  HeapTupleHeader header = PG_GETARG_HEAPTUPLEHEADER(1);
  Relation rel = table_open(relid, AccessShareLock);
  TupleDesc row_desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(header), HeapTupleHeaderGetTypMod(header));
  if (row_desc->natts != RelationGetDescr(rel)->natts || HeapTupleHeaderGetTypeId(header) != rel->rd_rel->reltype)
    ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                    errmsg("statesman._capture_put: r must be a row of %s", RelationGetRelationName(rel))));
  HeapTupleData tuple;
  tuple.t_len = HeapTupleHeaderGetDatumLength(header);
  ItemPointerSetInvalid(&tuple.t_self);
  tuple.t_tableOid = relid;
  tuple.t_data = header;
  Datum *values = static_cast<Datum *>(palloc(row_desc->natts * sizeof(Datum)));
  bool *nulls = static_cast<bool *>(palloc(row_desc->natts * sizeof(bool)));
  heap_deform_tuple(&tuple, row_desc, values, nulls);
  ReleaseTupleDesc(row_desc);
  statesman::pg::Invoke([&] {
    const statesman::pg::CaptureConfig &config = statesman::pg::ConfigFor(rel);
    statesman::pg::RowRecord record = statesman::pg::MakeRecord(config, rel, values, nulls, true);
    statesman::pg::Append(config, record, false, statesman::pg::kBackfill);
    return 0;
  });
  table_close(rel, AccessShareLock);
  PG_RETURN_VOID();
}

// statesman.capture_table(tab, root, key, columns, partition_column)
extern "C" Datum statesman_capture_table(PG_FUNCTION_ARGS) {
  if (PG_ARGISNULL(0)) ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("tab must not be NULL")));
  Oid types[5] = {REGCLASSOID, TEXTOID, TEXTARRAYOID, TEXTARRAYOID, TEXTOID};
  Datum values[5];
  char nulls[5];
  for (int i = 0; i < 5; ++i) {
    values[i] = PG_ARGISNULL(i) ? static_cast<Datum>(0) : PG_GETARG_DATUM(i);
    nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
  }
  Oid relid = PG_GETARG_OID(0);
  statesman::pg::Invoke([&] {
    statesman::pg::RunAsOwner(relid,
                              "SELECT statesman._capture_table($1::pg_catalog.regclass, $2::pg_catalog.text, "
                              "$3::pg_catalog.text[], $4::pg_catalog.text[], $5::pg_catalog.text)",
                              5, types, values, nulls);
    return 0;
  });
  PG_RETURN_VOID();
}

// statesman.release_table(tab)
extern "C" Datum statesman_release_table(PG_FUNCTION_ARGS) {
  if (PG_ARGISNULL(0)) ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("tab must not be NULL")));
  Oid types[1] = {REGCLASSOID};
  Datum values[1] = {PG_GETARG_DATUM(0)};
  char nulls[1] = {' '};
  Oid relid = PG_GETARG_OID(0);
  statesman::pg::Invoke([&] {
    statesman::pg::RunAsOwner(relid, "SELECT statesman._release_table($1::pg_catalog.regclass)", 1, types, values,
                              nulls);
    return 0;
  });
  PG_RETURN_VOID();
}
