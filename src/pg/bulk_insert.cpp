// Rows inserted the way COPY FROM inserts them (include/statesman/pg/bulk_insert.hpp): the
// relation locked and checked as INSERT's parser and executor would, then the rows formed with
// the other columns' defaults, checked against the table's constraints, written a batch at a
// time by table_multi_insert, and entered into every index.
#include "statesman/pg/bulk_insert.hpp"

extern "C" {
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_node.h"
#include "parser/parse_relation.h"
#include "rewrite/rewriteHandler.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/regproc.h"
}

#include <cstring>

namespace statesman::pg {
namespace {

// Rows handed to table_multi_insert at once: COPY's own batch.
constexpr int kBatchRows = 1000;

// The attribute number of the live column `name` of rel with exactly `type`, or 0.
AttrNumber ExactColumn(Relation rel, const char *name, Oid type) {
  TupleDesc desc = RelationGetDescr(rel);
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute attr = TupleDescAttr(desc, i);
    if (!attr->attisdropped && strcmp(NameStr(attr->attname), name) == 0)
      return attr->atttypid == type ? attr->attnum : 0;
  }
  return 0;
}

// Whether INSERT would do to rel only what BulkInsert does: a plain table (not a partition, not
// partitioned, not foreign, not a view), without rules, triggers or row-level security, without
// generated columns or columns of a domain type (INSERT checks a domain's constraints on the
// NULL or default it stores).
bool Plain(Relation rel) {
  Form_pg_class cls = rel->rd_rel;
  if (cls->relkind != RELKIND_RELATION || cls->relispartition || cls->relhasrules || rel->trigdesc != nullptr)
    return false;
  if (check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED) return false;
  TupleDesc desc = RelationGetDescr(rel);
  if (desc->constr != nullptr && desc->constr->has_generated_stored) return false;
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute attr = TupleDescAttr(desc, i);
    if (attr->attisdropped) continue;
    if (attr->attgenerated != '\0' || get_typtype(attr->atttypid) == TYPTYPE_DOMAIN) return false;
  }
  return true;
}

}  // namespace

bool BulkInsert(Oid relid, const BulkColumn *columns, int ncolumns, int rows, uint64 *inserted) {
  *inserted = 0;
  if (!OidIsValid(relid)) return false;
  Relation rel = table_open(relid, NoLock);
  AttrNumber attnums[8];
  bool ours[MaxHeapAttributeNumber + 1] = {};
  bool usable = Plain(rel) && ncolumns <= 8;
  for (int c = 0; usable && c < ncolumns; ++c) {
    attnums[c] = ExactColumn(rel, columns[c].name, columns[c].type);
    usable = attnums[c] != 0;
    if (usable) ours[attnums[c]] = true;
  }
  if (!usable) {
    table_close(rel, NoLock);
    return false;
  }

  // The privileges an INSERT naming these columns needs, checked as the executor checks them.
  ParseState *pstate = make_parsestate(nullptr);
  RangeTblEntry *rte = addRangeTableEntryForRelation(pstate, rel, RowExclusiveLock, nullptr, false, false)->p_rte;
  rte->requiredPerms = ACL_INSERT;
  for (int c = 0; c < ncolumns; ++c)
    rte->insertedCols = bms_add_member(rte->insertedCols, attnums[c] - FirstLowInvalidHeapAttributeNumber);
  List *range_table = list_make1(rte);
  ExecCheckRTPerms(range_table, true);

  EState *estate = CreateExecutorState();
  estate->es_output_cid = GetCurrentCommandId(true);
  ExecInitRangeTable(estate, range_table);
  ResultRelInfo *result_rel = makeNode(ResultRelInfo);
  ExecInitResultRelation(estate, result_rel, 1);
  CheckValidResultRel(result_rel, CMD_INSERT);
  ExecOpenIndices(result_rel, false);
  bool immediate = true;
  for (int i = 0; i < result_rel->ri_NumIndices; ++i)
    if (!result_rel->ri_IndexRelationDescs[i]->rd_index->indimmediate) immediate = false;
  if (!immediate) {
    // A deferrable unique or exclusion constraint: its checks are queued by the executor.
    ExecCloseResultRelations(estate);
    ExecCloseRangeTableRelations(estate);
    FreeExecutorState(estate);
    table_close(rel, NoLock);
    return false;
  }

  // The other columns' defaults, as INSERT would fill them in (evaluated per row).
  TupleDesc desc = RelationGetDescr(rel);
  int ndefaults = 0;
  AttrNumber *default_attnums = static_cast<AttrNumber *>(palloc(sizeof(AttrNumber) * desc->natts));
  ExprState **defaults = static_cast<ExprState **>(palloc(sizeof(ExprState *) * desc->natts));
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute attr = TupleDescAttr(desc, i);
    if (attr->attisdropped || ours[attr->attnum]) continue;
    Node *expr = build_column_default(rel, attr->attnum);
    if (expr == nullptr) continue;
    default_attnums[ndefaults] = attr->attnum;
    defaults[ndefaults] = ExecInitExpr(expression_planner(reinterpret_cast<Expr *>(expr)), nullptr);
    ++ndefaults;
  }
  bool check_constraints = desc->constr != nullptr;
  ExprContext *econtext = GetPerTupleExprContext(estate);

  PushActiveSnapshot(GetTransactionSnapshot());
  MemoryContext batch_cxt =
      AllocSetContextCreate(CurrentMemoryContext, "statesman bulk insert", ALLOCSET_DEFAULT_SIZES);
  // The slots get a copy of the descriptor: the relation's own is reference-counted, and a
  // slot on it would be remembered by (and searched for in) the resource owner, one by one.
  MemoryContext old = MemoryContextSwitchTo(batch_cxt);
  TupleDesc slot_desc = CreateTupleDescCopy(desc);
  MemoryContextSwitchTo(old);
  const TupleTableSlotOps *slot_ops = table_slot_callbacks(rel);
  TupleTableSlot **slots = static_cast<TupleTableSlot **>(palloc(sizeof(TupleTableSlot *) * kBatchRows));
  int nslots = 0;
  for (int done = 0; done < rows;) {
    int batch = rows - done < kBatchRows ? rows - done : kBatchRows;
    old = MemoryContextSwitchTo(batch_cxt);
    for (; nslots < batch; ++nslots) slots[nslots] = MakeSingleTupleTableSlot(slot_desc, slot_ops);
    MemoryContextSwitchTo(old);
    for (int k = 0; k < batch; ++k) {
      TupleTableSlot *slot = slots[k];
      ExecClearTuple(slot);
      for (int i = 0; i < desc->natts; ++i) {
        slot->tts_values[i] = static_cast<Datum>(0);
        slot->tts_isnull[i] = true;
      }
      for (int c = 0; c < ncolumns; ++c) {
        slot->tts_values[attnums[c] - 1] = columns[c].values[done + k];
        slot->tts_isnull[attnums[c] - 1] = false;
      }
      for (int d = 0; d < ndefaults; ++d) {
        AttrNumber a = default_attnums[d];
        slot->tts_values[a - 1] = ExecEvalExpr(defaults[d], econtext, &slot->tts_isnull[a - 1]);
      }
      ExecStoreVirtualTuple(slot);
      if (check_constraints) ExecConstraints(result_rel, slot, estate);
      // The row formed in the slot's own memory: the defaults' values go with the reset below.
      ExecMaterializeSlot(slot);
      ResetPerTupleExprContext(estate);
    }
    table_multi_insert(rel, slots, batch, estate->es_output_cid, 0, nullptr);
    for (int k = 0; k < batch; ++k) {
      List *recheck = ExecInsertIndexTuples(result_rel, slots[k], estate, false, false, nullptr, NIL);
      list_free(recheck);
      ResetPerTupleExprContext(estate);
    }
    done += batch;
    *inserted += static_cast<uint64>(batch);
  }
  for (int k = 0; k < nslots; ++k) ExecDropSingleTupleTableSlot(slots[k]);
  MemoryContextDelete(batch_cxt);
  PopActiveSnapshot();
  ExecCloseResultRelations(estate);
  ExecCloseRangeTableRelations(estate);
  FreeExecutorState(estate);
  table_close(rel, NoLock);
  CommandCounterIncrement();
  return true;
}

SinkTable LockSinkTable(const char *qualified_name) {
  SinkTable t;
  RangeVar *rv = makeRangeVarFromNameList(stringToQualifiedNameList(qualified_name));
  Oid relid = RangeVarGetRelidExtended(rv, RowExclusiveLock, RVR_MISSING_OK, nullptr, nullptr);
  if (!OidIsValid(relid)) return t;
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
  if (!HeapTupleIsValid(tuple)) return t;
  t.relid = relid;
  t.owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
  ReleaseSysCache(tuple);
  return t;
}

}  // namespace statesman::pg
