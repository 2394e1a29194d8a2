// Statesman's own relations and their columns, looked up by name, for the code that reads or
// writes them directly rather than through SQL (the page reader, the ticker). Plain PostgreSQL
// code that may ereport: run it under pg::Call. Pulls in postgres.h.
#pragma once

extern "C" {
#include "postgres.h"

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

}  // namespace statesman::pg
