// Statesman's own relations, for the code that reads or writes them directly rather than
// through SQL (the append, the page reader, the ticker): their columns looked up by name, and
// one row written the way an INSERT writes it. Plain PostgreSQL code that may ereport: run it
// under pg::Call. Pulls in postgres.h.
#pragma once

extern "C" {
#include "postgres.h"

#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
}

#include <cstring>

namespace statesman::pg {

// The relation `name` of the schema (statesman's), or an ERROR when it is missing.
inline Oid StatesmanRelation(Oid schema, const char *name) {
  Oid oid = get_relname_relid(name, schema);
  if (!OidIsValid(oid)) elog(ERROR, "statesman: the relation statesman.%s is missing", name);
  return oid;
}

// The attribute number of the column `name` of rel, or an ERROR when it has none.
inline AttrNumber Column(Relation rel, const char *name) {
  TupleDesc desc = RelationGetDescr(rel);
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute attr = TupleDescAttr(desc, i);
    if (!attr->attisdropped && strcmp(NameStr(attr->attname), name) == 0) return attr->attnum;
  }
  elog(ERROR, "statesman: the column %s of %s is missing", name, RelationGetRelationName(rel));
  return 0;
}

// Writes one row into rel as an INSERT does, for a table on which the caller has found nothing
// that only the executor applies (a trigger, a rule, row security): the row, built by
// fill(values, isnull) over a row of NULLs; its constraints (NOT NULL, CHECK) when
// check_constraints; its entry in every index that open_indexes(result_rel) opened (unique
// checks included). No executor is started and no plan is made. With `written`, where the row
// went (its tuple id) is stored there.
template <typename OpenIndexes, typename FillRow>
void InsertRowDirectly(Relation rel, bool check_constraints, OpenIndexes &&open_indexes, FillRow &&fill,
                       ItemPointer written = nullptr) {
  TupleDesc desc = RelationGetDescr(rel);
  EState *estate = CreateExecutorState();
  ResultRelInfo *result_rel = makeNode(ResultRelInfo);
  InitResultRelInfo(result_rel, rel, 0, nullptr, 0);
  open_indexes(result_rel);
  TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
  ExecClearTuple(slot);
  for (int i = 0; i < desc->natts; ++i) {
    slot->tts_values[i] = static_cast<Datum>(0);
    slot->tts_isnull[i] = true;
  }
  fill(slot->tts_values, slot->tts_isnull);
  ExecStoreVirtualTuple(slot);
  if (check_constraints) ExecConstraints(result_rel, slot, estate);
  table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, nullptr);
  List *unused = ExecInsertIndexTuples(result_rel, slot, estate, false, false, nullptr, NIL);
  list_free(unused);
  if (written != nullptr) ItemPointerCopy(&slot->tts_tid, written);
  ExecDropSingleTupleTableSlot(slot);
  ExecCloseIndices(result_rel);
  FreeExecutorState(estate);
}

}  // namespace statesman::pg
