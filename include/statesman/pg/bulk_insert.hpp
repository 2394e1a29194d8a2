// Rows inserted into a user's table as its INSERT would insert them, through the table access
// method's multi-insert, as COPY FROM does: one WAL record and one buffer lock per filled page
// instead of per row, and no executor plan, projection or array to unnest. Used by the `table`
// sink (src/feed/page.cpp). Plain PostgreSQL code that may ereport: run it under pg::Call.
// Pulls in postgres.h.
#pragma once

extern "C" {
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"
}

namespace statesman::pg {

// One column of the rows to insert: its name, its exact type, and a value per row (never NULL).
struct BulkColumn {
  const char *name;
  Oid type;
  const Datum *values;
};

// Inserts `rows` rows into the table `relid` (locked by LockSinkTable), checked and completed as an INSERT naming these
// columns would: the INSERT privilege on them (table or column), the defaults of the other columns, NOT NULL and CHECK
// constraints, every index (unique and exclusion checks included). Returns false, having done
// nothing, when the table needs what only the executor's INSERT applies, or when it differs
// from what is asked: it is not a plain table, has rules, triggers, row-level security,
// generated columns, a domain-typed column, a deferrable constraint, or lacks one of the
// columns with exactly its type. The caller then inserts through SQL, which applies all of it
// (or reports why not).
bool BulkInsert(Oid relid, const BulkColumn *columns, int ncolumns, int rows, uint64 *inserted);

// The relation `qualified_name` (quoted as quote_qualified_identifier gives it) and its owner,
// locked as INSERT locks it (RowExclusiveLock, until the transaction ends) so that the table
// the owner was read from is the one inserted into; InvalidOid for both when there is none.
struct SinkTable {
  Oid relid = InvalidOid;
  Oid owner = InvalidOid;
};
SinkTable LockSinkTable(const char *qualified_name);

// Runs insert() as `owner` (the target table's), in a security-restricted operation, as
// PostgreSQL runs a table's own functions in VACUUM or REFRESH MATERIALIZED VIEW: the table's
// triggers, rules, defaults, constraints and index expressions run with its owner's rights,
// never with those of the role delivering (the extension's owner), and settings they change
// end with the insert. With InvalidOid (no such table) insert() runs as is, to report it. On an
// ERROR the enclosing subtransaction's abort restores the user and the settings.
template <typename Insert>
auto AsTableOwner(Oid owner, Insert &&insert) {
  if (!OidIsValid(owner)) return insert();
  Oid saved_user = InvalidOid;
  int saved_context = 0;
  GetUserIdAndSecContext(&saved_user, &saved_context);
  SetUserIdAndSecContext(owner, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
  int nest_level = NewGUCNestLevel();
  auto result = insert();
  AtEOXact_GUC(false, nest_level);
  SetUserIdAndSecContext(saved_user, saved_context);
  return result;
}

}  // namespace statesman::pg
