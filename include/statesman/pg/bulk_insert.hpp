// Rows inserted into a user's table as its INSERT would insert them, through the table access
// method's multi-insert, as COPY FROM does: one WAL record and one buffer lock per filled page
// instead of per row, and no executor plan, projection or array to unnest. Used by the `table`
// sink (src/feed/page.cpp). Plain PostgreSQL code that may ereport: run it under pg::Call.
// Pulls in postgres.h.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace statesman::pg {

// One column of the rows to insert: its name, its exact type, and a value per row (never NULL).
struct BulkColumn {
  const char *name;
  Oid type;
  const Datum *values;
};

// Inserts `rows` rows into the table `qualified_name` (quoted as quote_qualified_identifier
// gives it), checked and completed as an INSERT naming these columns would: the INSERT
// privilege on them (table or column), the defaults of the other columns, NOT NULL and CHECK
// constraints, every index (unique and exclusion checks included). Returns false, having done
// nothing, when the table needs what only the executor's INSERT applies, or when it differs
// from what is asked: it is missing, not a plain table, has rules, triggers, row-level security,
// generated columns, a domain-typed column, a deferrable constraint, or lacks one of the
// columns with exactly its type. The caller then inserts through SQL, which applies all of it
// (or reports why not).
bool BulkInsert(const char *qualified_name, const BulkColumn *columns, int ncolumns, int rows, uint64 *inserted);

}  // namespace statesman::pg
