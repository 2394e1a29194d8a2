// The stored form of pg_snapshot, as the ticks keep it (statesman.ticks.snap, prev_snap), and
// the visibility test of pg_visible_in_snapshot: shared by the page reader and the ticker.
// Pulls in postgres.h.
#pragma once

extern "C" {
#include "postgres.h"

#include "access/transam.h"
}

namespace statesman::feed {

// The on-disk form of pg_snapshot (src/backend/utils/adt/xid8funcs.c): a varlena with the
// number of running transactions, xmin, xmax and the sorted list of running ones.
struct StoredSnapshot {
  int32 vl_len_;
  uint32 nxip;
  FullTransactionId xmin;
  FullTransactionId xmax;
  FullTransactionId xip[FLEXIBLE_ARRAY_MEMBER];
};

// pg_visible_in_snapshot(xid, snap).
inline bool VisibleInSnapshot(FullTransactionId xid, const StoredSnapshot *snap) {
  if (FullTransactionIdPrecedes(xid, snap->xmin)) return true;
  if (!FullTransactionIdPrecedes(xid, snap->xmax)) return false;
  uint32 lo = 0, hi = snap->nxip;
  while (lo < hi) {
    uint32 mid = lo + (hi - lo) / 2;
    if (FullTransactionIdPrecedes(snap->xip[mid], xid))
      lo = mid + 1;
    else
      hi = mid;
  }
  return !(lo < snap->nxip && FullTransactionIdEquals(snap->xip[lo], xid));
}

}  // namespace statesman::feed
