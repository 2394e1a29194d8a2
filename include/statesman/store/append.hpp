// The append path's entry for C++ callers inside the server (the capture trigger,
// src/store/capture.cpp): one record appended exactly as statesman.append / append_delete
// would append it, without a SQL call. It pulls in postgres.h: never included by sink code.
#pragma once

#include "statesman/pg/guard.hpp"
#include "statesman/store/revision_hints.hpp"

namespace statesman::pg {

// One record of a captured row: a `put` with a JSON payload (its UTF-8 text, a text or bytea
// varlena) or a tombstone (payload ignored), with metadata (a jsonb Datum).
struct CapturedRecord {
  const char *root = nullptr;
  const char *path = nullptr;
  const char *partition = "";
  bool tombstone = false;
  Datum payload = 0;
  Datum metadata = 0;
};

// Appends the record under its address lock, as statesman.append(root, path, payload,
// partition, metadata => metadata) or statesman.append_delete would: the same checks, the
// same revision, retention and feed; returns its revision. C++: throws PgError or Error.
int64 AppendCaptured(const CapturedRecord &record);

// The shared table of revision hints (src/store/revision_hints.cpp): its size, reserved with
// statesman's other shared memory while the library is preloaded, and its creation or
// attachment, from the shared memory startup hook with AddinShmemInitLock held.
Size RevisionHintBytes();
void AttachRevisionHints();

// The backend's table of revision hints: the shared one when the library was preloaded, else
// the session's own (128 kB, allocated by the first call). C++: may throw std::bad_alloc.
store::RevisionHints &RevisionHintTable();

// Whether RevisionHintTable() is the shared table, which every append notes into: only then
// does a slot hold the latest revision any session appended to an address (docs/design.md §2.4).
bool RevisionHintsShared();

}  // namespace statesman::pg
