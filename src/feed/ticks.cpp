// SQL-callable helpers of the feed's ticks (sql/install/07_sequencer.sql):
//
//  * statesman._durable(v) flushes the WAL inserted so far and returns v. The ticker commits
//    asynchronously, so a tick that a reader can see may not be on disk yet; every reader of the
//    feed (statesman._feed_page, head_position) passes what it read through this function
//    before handing it on. A tick visible to the reader has its commit record before the
//    current insert position, and so do the commit records of its records (each committed
//    before the snapshot that saw it), so after the flush no crash can lose them and a
//    position once returned is never given to another record. A no-op when the WAL is already
//    flushed that far (the usual case with writers at synchronous_commit on), and skipped in
//    recovery (a standby replays only WAL its primary has flushed).
//  * statesman._note_own_tick() records that this transaction stored a tick while it had
//    written records of its own (statesman.sequence_feed called after appends in the same
//    transaction). Such a tick counts the transaction's records so far as ended; every record
//    it appends afterwards gets a tick of its own at once (statesman._tick_own_record, called
//    by the append: no later tick would take it, since every later snapshot counts this
//    transaction as ended already). Forgotten when the subtransaction that ticked rolls back.
//  * statesman._system_id() is the cluster's system identifier: each tick stores it, so that a
//    tick chain restored into another cluster (whose transaction ids mean something else) is
//    recognised and a new chain is started (statesman._restart_ticks).
#include "statesman/feed/ticks.hpp"

#include "statesman/pg/guard.hpp"

extern "C" {
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"

PG_FUNCTION_INFO_V1(statesman_note_own_tick);
PG_FUNCTION_INFO_V1(statesman_durable);
PG_FUNCTION_INFO_V1(statesman_system_id);
}

namespace {

// The transaction (and its subtransaction) that stored a tick counting its own records.
FullTransactionId ticked_xact = InvalidFullTransactionId;
SubTransactionId ticked_subxact = InvalidSubTransactionId;
bool callback_registered = false;

void ForgetOnSubAbort(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void *) {
  if (ticked_subxact != my_subid) return;
  if (event == SUBXACT_EVENT_ABORT_SUB) {
    ticked_xact = InvalidFullTransactionId;
    ticked_subxact = InvalidSubTransactionId;
  } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
    ticked_subxact = parent_subid;
  }
}

// Everything inserted into the WAL so far. At the start of a page the insert position points
// past the page's header, which is not written until a record goes there: flush up to the
// page's start then (XLogFlush refuses a request beyond what was written).
XLogRecPtr InsertedSoFar() {
  XLogRecPtr ptr = GetXLogInsertRecPtr();
  if (XLogSegmentOffset(ptr, wal_segment_size) == SizeOfXLogLongPHD)
    ptr -= SizeOfXLogLongPHD;
  else if (ptr % XLOG_BLCKSZ == SizeOfXLogShortPHD)
    ptr -= SizeOfXLogShortPHD;
  return ptr;
}

}  // namespace

namespace statesman::feed {

void FlushReadPositions() {
  if (!RecoveryInProgress()) XLogFlush(InsertedSoFar());
}

bool TickedInThisTransaction() {
  if (!FullTransactionIdIsValid(ticked_xact)) return false;
  FullTransactionId current = GetTopFullTransactionIdIfAny();
  return FullTransactionIdIsValid(current) && FullTransactionIdEquals(current, ticked_xact);
}

void NoteOwnTick() {
  if (!callback_registered) {
    RegisterSubXactCallback(ForgetOnSubAbort, nullptr);
    callback_registered = true;
  }
  ticked_xact = GetTopFullTransactionIdIfAny();
  ticked_subxact = GetCurrentSubTransactionId();
}

}  // namespace statesman::feed

extern "C" Datum statesman_note_own_tick(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  Invoke([] {
    Call([] { statesman::feed::NoteOwnTick(); });
    return 0;
  });
  PG_RETURN_VOID();
}

extern "C" Datum statesman_durable(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  if (PG_ARGISNULL(0)) PG_RETURN_NULL();
  Datum value = PG_GETARG_DATUM(0);
  Invoke([] {
    Call([] { statesman::feed::FlushReadPositions(); });
    return 0;
  });
  return value;
}

extern "C" Datum statesman_system_id(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  uint64 id = Invoke([] { return Call([] { return GetSystemIdentifier(); }); });
  PG_RETURN_INT64(static_cast<int64>(id));
}
