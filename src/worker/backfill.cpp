// statesman.backfill_table (docs/capture.md "Backfilling"): a captured table's current rows as
// put records, in batches that commit on their own while the application keeps writing.
//
// A function called by a SELECT cannot commit, so the calling backend starts a dynamic
// background worker that runs the batches (statesman._backfill_batch, one transaction each)
// and waits for it: it relays each batch's progress as a NOTICE, stops the worker when it is
// cancelled, and returns the number of rows the backfill appended. The progress is committed
// with each batch (statesman.capture_backfills), so a backfill that was interrupted resumes
// after the last key of its last committed batch.
#include "statesman/worker/workers.hpp"
#include "statesman/pg/work.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/wait_event.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(statesman_backfill_table);
}

#include <string>

namespace statesman::pg {
namespace {

// The advisory lock space of a running backfill (key: the table's OID), held by the calling
// backend's transaction: one backfill per table at a time.
constexpr int32 kBackfillLockSpace = 1398033746;
constexpr int kMaxRetries = 20;  // a batch that hit a deadlock or serialization failure
constexpr long kPollMs = 200;

struct BackfillArgs {
  Oid dboid;
  Oid owner;
  Oid relid;
  int32 batch_size;
};

// Runs `body` as the extension owner (the owner of statesman.captures). Plain PostgreSQL
// code; an ERROR in body is cleaned up by the transaction's abort, which restores the user.
template <typename F>
void AsOwner(F &&body) {
  Oid captures = get_relname_relid("captures", get_namespace_oid("statesman", false));
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(captures));
  if (!HeapTupleIsValid(tuple)) elog(ERROR, "statesman: the table statesman.captures is missing");
  Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
  ReleaseSysCache(tuple);
  Oid saved_user = InvalidOid;
  int saved_context = 0;
  GetUserIdAndSecContext(&saved_user, &saved_context);
  SetUserIdAndSecContext(owner, saved_context | SECURITY_LOCAL_USERID_CHANGE);
  body(owner);
  SetUserIdAndSecContext(saved_user, saved_context);
}

struct Progress {
  bool exists = false;
  bool finished = false;
  int64 rows = 0;
  int64 batches = 0;
  char *after = nullptr;    // the last key as text ('{…}'), palloc'd; nullptr before the first batch
  char *started = nullptr;  // started_at as text: tells a new run's row from the previous one's
};

// The table's backfill progress as committed (a fresh snapshot: the worker commits each batch).
Progress ReadProgress(Oid relid) {
  Progress p;
  Call([&] {
    AsOwner([&](Oid) {
      if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "statesman: SPI_connect failed");
      Oid types[1] = {OIDOID};
      Datum values[1] = {ObjectIdGetDatum(relid)};
      int rc = SPI_execute_with_args(
          "SELECT b.rows_done, b.batches, b.after_key::pg_catalog.text, b.finished_at IS NOT NULL, "
          "       b.started_at::pg_catalog.text "
          "FROM statesman.capture_backfills b WHERE b.tab OPERATOR(pg_catalog.=) $1",
          1, types, values, nullptr, false, 1);
      if (rc != SPI_OK_SELECT) elog(ERROR, "statesman: reading the backfill's progress failed");
      if (SPI_processed == 1) {
        bool isnull = false;
        HeapTuple row = SPI_tuptable->vals[0];
        TupleDesc desc = SPI_tuptable->tupdesc;
        p.exists = true;
        p.rows = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
        p.batches = DatumGetInt64(SPI_getbinval(row, desc, 2, &isnull));
        Datum after = SPI_getbinval(row, desc, 3, &isnull);
        auto copy = [](Datum value) {
          char *chars = TextDatumGetCString(value);
          char *out = static_cast<char *>(SPI_palloc(strlen(chars) + 1));  // outlives SPI_finish
          strcpy(out, chars);
          return out;
        };
        if (!isnull) p.after = copy(after);
        p.finished = DatumGetBool(SPI_getbinval(row, desc, 4, &isnull));
        p.started = copy(SPI_getbinval(row, desc, 5, &isnull));
      }
      SPI_finish();
    });
  });
  return p;
}

// Checks what the call may do before it starts a worker; returns the extension owner.
Oid CheckBackfill(Oid relid, int32 batch_size) {
  if (IsTransactionBlock())
    throw Error("25001", "statesman.backfill_table cannot run inside a transaction block",
                "Its batches commit on their own, in a background worker, while this call waits; run it on its own.");
  if (IsolationUsesXactSnapshot())
    throw Error("25001", "statesman.backfill_table needs READ COMMITTED (it follows the worker's committed progress)",
                "SET default_transaction_isolation = 'read committed' for the call.");
  if (batch_size < 1 || batch_size > 1000000)
    throw Error(sqlstate::kInvalidParameterValue, "batch_size must be between 1 and 1000000");
  Oid owner = InvalidOid;
  bool captured = false;
  Call([&] {
    if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
      ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
    if (!pg_class_ownercheck(relid, GetUserId()))
      ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                      errmsg("must be owner of table %s to backfill it", get_rel_name(relid))));
    AsOwner([&](Oid o) {
      owner = o;
      if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "statesman: SPI_connect failed");
      Oid types[1] = {OIDOID};
      Datum values[1] = {ObjectIdGetDatum(relid)};
      int rc = SPI_execute_with_args("SELECT FROM statesman.captures c WHERE c.tab OPERATOR(pg_catalog.=) $1", 1, types,
                                     values, nullptr, false, 1);
      if (rc != SPI_OK_SELECT) elog(ERROR, "statesman: reading statesman.captures failed");
      captured = SPI_processed == 1;
      SPI_finish();
    });
  });
  if (!captured)
    throw Error("42704", "table " + std::string(Call([&] { return get_rel_name(relid); })) + " is not captured",
                "Capture it with statesman.capture_table first: the backfill's rows and the trigger's changes go "
                "to the same addresses.");
  bool locked = Call([&] {
    return DatumGetBool(DirectFunctionCall2(pg_try_advisory_xact_lock_int4, Int32GetDatum(kBackfillLockSpace),
                                            Int32GetDatum(static_cast<int32>(relid))));
  });
  if (!locked)
    throw Error("55006", "a backfill of table " + std::string(Call([&] { return get_rel_name(relid); })) +
                             " is already running");
  return owner;
}

void Notice(const std::string &message) {
  Call([&] { ereport(NOTICE, (errmsg("%s", message.c_str()))); });
}

int64 Backfill(Oid relid, int32 batch_size) {
  Oid owner = CheckBackfill(relid, batch_size);
  std::string table = Call(
      [&] { return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid)); });
  Progress start = ReadProgress(relid);
  bool resumed = start.exists && !start.finished;
  int64 base = resumed ? start.rows : 0;
  if (resumed)
    Notice("resuming the backfill of " + table + " after key " + (start.after ? start.after : "(none)") + " (" +
           std::to_string(start.rows) + " rows in " + std::to_string(start.batches) + " batches done)");

  BackgroundWorkerHandle *handle = nullptr;
  bool registered = Call([&] {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof(worker));
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = BGW_NEVER_RESTART;
    strlcpy(worker.bgw_library_name, "statesman", BGW_MAXLEN);
    strlcpy(worker.bgw_function_name, "statesman_backfill_main", BGW_MAXLEN);
    snprintf(worker.bgw_name, BGW_MAXLEN, "statesman backfill %s", get_rel_name(relid));
    strlcpy(worker.bgw_type, "statesman backfill", BGW_MAXLEN);
    worker.bgw_notify_pid = MyProcPid;
    BackfillArgs args{MyDatabaseId, owner, relid, batch_size};
    static_assert(sizeof(BackfillArgs) <= BGW_EXTRALEN, "backfill arguments must fit bgw_extra");
    memcpy(worker.bgw_extra, &args, sizeof(args));
    return RegisterDynamicBackgroundWorker(&worker, &handle);
  });
  if (!registered)
    throw Error("53400", "statesman.backfill_table found no free background worker slot",
                "Raise max_worker_processes, or wait for other background workers to end.");
  int64 seen_batches = resumed ? start.batches : -1;
  Progress now;
  try {
    pid_t pid = 0;
    BgwHandleStatus status = Call([&] { return WaitForBackgroundWorkerStartup(handle, &pid); });
    if (status == BGWH_POSTMASTER_DIED) throw Error("57P01", "the postmaster died during the backfill");
    for (;;) {
      Call([&] {
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, kPollMs, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
      });
      status = Call([&] { return GetBackgroundWorkerPid(handle, &pid); });
      now = ReadProgress(relid);
      // The worker's first transaction starts a finished backfill over: until then the row
      // still shows the previous run.
      bool previous_run = start.exists && !resumed && now.exists && strcmp(now.started, start.started) == 0;
      if (previous_run) now.exists = false;
      if (now.exists && now.batches != seen_batches && now.batches > 0) {
        seen_batches = now.batches;
        Notice("backfill of " + table + ": batch " + std::to_string(now.batches) + ", " + std::to_string(now.rows) +
               " rows, last key " + (now.after ? now.after : "(none)"));
      }
      if (status == BGWH_STOPPED) break;
    }
  } catch (...) {
    Call([&] { TerminateBackgroundWorker(handle); });
    throw;
  }
  if (!now.exists || !now.finished)
    throw Error("55000",
                "the backfill of " + table + " stopped before its end, after key " +
                    (now.after ? now.after : "(none)") + " (" + std::to_string(now.rows) + " rows)",
                "The server log has the backfill worker's error. Call statesman.backfill_table again: it resumes "
                "after that key.");
  return now.rows - base;
}

// The worker: the start of the backfill (or its resumption), then one batch per transaction
// until a batch comes back short. A batch that meets a deadlock or a serialization failure
// is rolled back and run again. A batch that needs more address locks than the shared lock
// table has room for (each record's address lock is held until its transaction ends; 53200
// out of shared memory) is rolled back and run again with half as many rows, and the batches
// stay that size.
void BackfillLoop(const BackfillArgs &args) {
  const std::string relid = std::to_string(args.relid);
  int32 batch_size = args.batch_size;
  BeginWork("statesman: backfill starts");
  Query("SELECT statesman._backfill_start($1::oid)", {relid});
  EndWork();
  int retries = 0;
  for (;;) {
    CheckForInterrupts();
    // The calling backend waits for this worker; when it is gone, nobody does.
    if (Call([] { return BackendPidGetProc(MyBgworkerEntry->bgw_notify_pid) == nullptr; })) {
      Log(LogLevel::kLog, "statesman: the session that started the backfill of table " + relid +
                              " ended; the backfill stops (it resumes at its next call)");
      return;
    }
    try {
      BeginWork("statesman: backfill batch");
      int64 rows = ToInt(
          QueryValue("SELECT statesman._backfill_batch($1::oid, $2::integer)", {relid, std::to_string(batch_size)}));
      EndWork();
      // Wakes the caller to relay the batch's progress.
      Call([] {
        PGPROC *leader = BackendPidGetProc(MyBgworkerEntry->bgw_notify_pid);
        if (leader != nullptr) SetLatch(&leader->procLatch);
      });
      retries = 0;
      if (rows < batch_size) return;
    } catch (const PgError &e) {
      int code = e.Data()->sqlerrcode;
      Call([] {
        AbortCurrentTransaction();
        pgstat_report_activity(STATE_IDLE, nullptr);
      });
      if (code == ERRCODE_OUT_OF_MEMORY && batch_size > 1) {
        batch_size /= 2;
        Log(LogLevel::kLog,
            "statesman: a backfill batch of table " + relid +
                " needs more locks than the lock table has room for; batches of " + std::to_string(batch_size) +
                " rows from now on",
            "Each record holds its address's lock until the batch commits (max_locks_per_transaction).");
        continue;
      }
      bool retry = code == ERRCODE_T_R_DEADLOCK_DETECTED || code == ERRCODE_T_R_SERIALIZATION_FAILURE ||
                   code == ERRCODE_LOCK_NOT_AVAILABLE;
      if (!retry || ++retries > kMaxRetries) throw;
      Log(LogLevel::kLog,
          std::string("statesman: a backfill batch of table ") + relid + " is run again after: " + e.what());
    }
  }
}

}  // namespace
}  // namespace statesman::pg

// statesman.backfill_table(tab regclass, batch_size integer) → bigint
extern "C" Datum statesman_backfill_table(PG_FUNCTION_ARGS) {
  if (PG_ARGISNULL(0)) ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("tab must not be NULL")));
  if (PG_ARGISNULL(1)) ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("batch_size must not be NULL")));
  Oid relid = PG_GETARG_OID(0);
  int32 batch_size = PG_GETARG_INT32(1);
  int64 rows = statesman::pg::Invoke([&] { return statesman::pg::Backfill(relid, batch_size); });
  PG_RETURN_INT64(rows);
}

extern "C" PGDLLEXPORT void statesman_backfill_main(Datum);

extern "C" void statesman_backfill_main(Datum) {
  statesman::pg::BackfillArgs args;
  memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));
  pqsignal(SIGTERM, die);
  BackgroundWorkerUnblockSignals();
  BackgroundWorkerInitializeConnectionByOid(args.dboid, args.owner, 0);
  statesman::pg::PinWorkerSettings();
  pgstat_report_appname("statesman backfill");
  statesman::pg::Invoke([&] {
    statesman::pg::BackfillLoop(args);
    return 0;
  });
  proc_exit(0);
}
