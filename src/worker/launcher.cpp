// The launcher: one per server. Every statesman.naptime it lists the databases and starts a
// database worker for each one that has none; a database worker exits at once where the
// extension is not installed, so a database that installs it later is served within one
// naptime, or at once when create_outbox or resume_outbox commits there (they set its latch). The launcher never raises
// an ERROR for want of a worker slot: it warns and retries.
#include "statesman/worker/workers.hpp"
#include "statesman/pg/work.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
}

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "statesman/worker/backoff.hpp"

namespace statesman::pg {
namespace {

// Databases that accept connections and are not templates.
std::vector<Oid> ListDatabases() {
  std::vector<Oid> oids;
  Oid *found = nullptr;
  int count = 0;
  Call([&] {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    (void)GetTransactionSnapshot();
    pgstat_report_activity(STATE_RUNNING, "listing databases");
    Relation rel = table_open(DatabaseRelationId, AccessShareLock);
    TableScanDesc scan = table_beginscan_catalog(rel, 0, nullptr);
    int capacity = 16;
    MemoryContext top = TopMemoryContext;
    found = static_cast<Oid *>(MemoryContextAlloc(top, sizeof(Oid) * capacity));
    HeapTuple tuple;
    while ((tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
      Form_pg_database db = reinterpret_cast<Form_pg_database>(GETSTRUCT(tuple));
      if (!db->datallowconn || db->datistemplate) continue;
      if (count == capacity) {
        capacity *= 2;
        found = static_cast<Oid *>(repalloc(found, sizeof(Oid) * capacity));
      }
      found[count++] = db->oid;
    }
    table_endscan(scan);
    table_close(rel, AccessShareLock);
    CommitTransactionCommand();
    pgstat_report_activity(STATE_IDLE, nullptr);
  });
  oids.assign(found, found + count);
  Call([&] { pfree(found); });
  return oids;
}

void LauncherLoop() {
  std::map<Oid, LaunchedWorker> launched;
  std::set<Oid> pending;  // databases whose database worker was asked for (see below)
  worker::WarningLimiter no_slot(60000);
  RegisterLauncherLatch();
  for (;;) {
    bool enabled = HandleInterrupts();
    int64 now = NowMillis();
    // Forget workers that have exited; a reservation whose worker never started is freed.
    for (auto &[dboid, entry] : launched) ForgetIfStopped(&entry);
    // Databases where create_outbox or resume_outbox committed: start their database worker
    // now, even when the last check found no extension there. A request stays while a worker
    // of the database has run for less than a second: it may be a discovery check that looked
    // before the extension was created, and its exit sets this latch again (bgw_notify_pid).
    Oid requested[16];
    bool all_requested = false;
    int n_requested = TakeLaunchRequests(requested, 16, &all_requested);
    pending.insert(requested, requested + n_requested);
    if (enabled) {
      std::vector<Oid> databases = ListDatabases();
      if (all_requested) pending.insert(databases.begin(), databases.end());
      for (auto it = pending.begin(); it != pending.end();)  // dropped meanwhile
        it = std::find(databases.begin(), databases.end(), *it) == databases.end() ? pending.erase(it) : std::next(it);
      for (Oid dboid : databases) {
        LaunchedWorker &entry = launched[dboid];
        bool asked = pending.count(dboid) > 0;
        if (entry.handle != nullptr) {                                        // running
          if (asked && now - entry.started_at >= 1000) pending.erase(dboid);  // and found the extension
          continue;
        }
        if (!asked && entry.started_at != 0 && now - entry.started_at < guc_naptime_ms) continue;  // checked lately
        LaunchResult result =
            Launch(&entry, "statesman_database_main", "statesman database worker", dboid, InvalidOid, "", now);
        bool started = result == LaunchResult::kStarted || result == LaunchResult::kAlreadyRunning;
        if (started) pending.erase(dboid);  // once: a worker that exits at once is not started again
        NoteSlotWait(dboid, "", !started, result == LaunchResult::kNoRegistrySlot);
        if (started) continue;
        int64 suppressed = 0;
        if (no_slot.Allow(now, &suppressed))
          Log(LogLevel::kWarning, "statesman: no free worker slot for database " + std::to_string(dboid) + "; retrying",
              result == LaunchResult::kNoRegistrySlot
                  ? "Raise statesman.max_workers (now " + std::to_string(guc_max_workers) + ")."
                  : "Raise max_worker_processes.");
        break;
      }
    }
    WaitForLatch(guc_naptime_ms);
  }
}

}  // namespace

namespace {

// Registers a dynamic worker in a reserved slot; false when PostgreSQL has no free worker slot.
bool StartWorker(const char *function, const char *name, int slot, uint32 generation, Oid dboid, Oid owner,
                 const char *outbox_id, BackgroundWorkerHandle **handle) {
  return Call([&] {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof(worker));
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = BGW_NEVER_RESTART;
    strlcpy(worker.bgw_library_name, "statesman", BGW_MAXLEN);
    strlcpy(worker.bgw_function_name, function, BGW_MAXLEN);
    if (outbox_id[0] != '\0')
      snprintf(worker.bgw_name, BGW_MAXLEN, "%s %s", name, outbox_id);
    else
      strlcpy(worker.bgw_name, name, BGW_MAXLEN);
    strlcpy(worker.bgw_type, name, BGW_MAXLEN);
    worker.bgw_main_arg = Int32GetDatum(slot);
    worker.bgw_notify_pid = MyProcPid;
    WorkerArgs args;
    memset(&args, 0, sizeof(args));
    args.dboid = dboid;
    args.owner = owner;
    args.generation = generation;
    strlcpy(args.outbox_id, outbox_id, kOutboxIdSize);
    static_assert(sizeof(WorkerArgs) <= BGW_EXTRALEN, "worker arguments must fit bgw_extra");
    memcpy(worker.bgw_extra, &args, sizeof(args));
    return RegisterDynamicBackgroundWorker(&worker, handle);
  });
}

}  // namespace

LaunchResult Launch(LaunchedWorker *worker, const char *function, const char *name, Oid dboid, Oid owner,
                    const char *outbox_id, int64 now) {
  uint32 generation = 0;
  int slot = ReserveSlot(dboid, outbox_id, &generation);
  if (slot == -1) return LaunchResult::kAlreadyRunning;
  if (slot == -2) return LaunchResult::kNoRegistrySlot;
  BackgroundWorkerHandle *handle = nullptr;
  if (!StartWorker(function, name, slot, generation, dboid, owner, outbox_id, &handle)) {
    ReleaseReservedSlot(slot, generation);
    return LaunchResult::kNoBackgroundWorkerSlot;
  }
  *worker = LaunchedWorker{handle, slot, generation, now};
  return LaunchResult::kStarted;
}

void ForgetIfStopped(LaunchedWorker *worker) {
  if (worker->handle == nullptr) return;
  pid_t pid;
  if (Call([&] { return GetBackgroundWorkerPid(worker->handle, &pid); }) != BGWH_STOPPED) return;
  ReleaseReservedSlot(worker->slot, worker->generation);
  Call([&] { pfree(worker->handle); });
  worker->handle = nullptr;
}

// What statesman's workers depend on, whatever the defaults of postgresql.conf, the database
// (ALTER DATABASE … SET) or the role (ALTER ROLE … SET) say: applied after the connection's
// own defaults, at the priority of PostgreSQL's own background processes' settings
// (autovacuum's, the apply worker's), so that neither those defaults nor a reload can change
// them; statesman's SET clauses and set_config calls still take precedence. Without these a
// database default of repeatable read or read-only transactions stopped every sequencer run.
// Plain C: runs before any C++ object exists, and may raise FATAL.
void PinWorkerSettings() {
  static const char *const settings[][2] = {
      // Every transaction as the code expects it: read committed, read-write, not deferrable.
      {"default_transaction_isolation", "read committed"},
      {"default_transaction_read_only", "off"},
      {"default_transaction_deferrable", "off"},
      // No timeout of a client session: the workers bound their own waits.
      {"statement_timeout", "0"},
      {"lock_timeout", "0"},
      {"idle_in_transaction_session_timeout", "0"},
      {"idle_session_timeout", "0"},
      // Names resolve in pg_catalog first; every statesman name is qualified.
      {"search_path", "pg_catalog, pg_temp"},
      // Durable commits unless the code asks otherwise (the dispatcher does, for its pages).
      {"synchronous_commit", "on"},
      // Triggers and foreign keys fire, as for any session (replica would skip them).
      {"session_replication_role", "origin"},
      // Nothing that changes how SQL text is read or written, or turns an ERROR into FATAL.
      {"standard_conforming_strings", "on"},
      {"transform_null_equals", "off"},
      {"array_nulls", "on"},
      {"bytea_output", "hex"},
      {"DateStyle", "ISO, MDY"},
      {"IntervalStyle", "postgres"},
      {"exit_on_error", "off"},
      {"row_security", "on"},
      {"check_function_bodies", "on"},
      {"client_min_messages", "notice"},
      {"role", "none"},
      // PL/pgSQL's own settings could refuse or change statesman's functions.
      {"plpgsql.extra_errors", "none"},
      {"plpgsql.extra_warnings", "none"},
      {"plpgsql.variable_conflict", "error"},
  };
  for (const auto &setting : settings) SetConfigOption(setting[0], setting[1], PGC_SUSET, PGC_S_OVERRIDE);
}

WorkerArgs StartDynamicWorker(Datum arg, bool as_owner, const char *appname, bool exit_work) {
  WorkerArgs args;
  memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  pqsignal(SIGTERM, exit_work ? HandleShutdownSignal : die);
  BackgroundWorkerUnblockSignals();
  BackgroundWorkerInitializeConnectionByOid(args.dboid, as_owner ? args.owner : InvalidOid, 0);
  PinWorkerSettings();
  if (!ClaimSlot(DatumGetInt32(arg), args.generation, args.dboid, args.outbox_id)) proc_exit(0);
  pgstat_report_appname(appname);
  return args;
}

void RegisterLauncher() {
  BackgroundWorker worker;
  memset(&worker, 0, sizeof(worker));
  worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
  worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
  worker.bgw_restart_time = 5;
  strlcpy(worker.bgw_library_name, "statesman", BGW_MAXLEN);
  strlcpy(worker.bgw_function_name, "statesman_launcher_main", BGW_MAXLEN);
  strlcpy(worker.bgw_name, "statesman launcher", BGW_MAXLEN);
  strlcpy(worker.bgw_type, "statesman launcher", BGW_MAXLEN);
  RegisterBackgroundWorker(&worker);
}

}  // namespace statesman::pg

extern "C" void statesman_launcher_main(Datum) {
  using namespace statesman::pg;
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  pqsignal(SIGTERM, die);
  BackgroundWorkerUnblockSignals();
  BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);
  PinWorkerSettings();
  Invoke([] {
    LauncherLoop();
    return 0;
  });
  proc_exit(0);
}
