// The background workers: settings, the shared registry of running workers, and the entry
// points PostgreSQL calls. It pulls in postgres.h: never included by sink code.
//
//   launcher         one per server (shared_preload_libraries); starts a database worker
//                    for every database that accepts connections, every statesman.naptime.
//   database worker  one per database with the extension: the feed's sequencer (woken by
//                    committed appends), the supervisor of the database's dispatchers, and
//                    deferred pruning. Exits when the extension is not installed.
//   dispatcher       one per enabled outbox: delivers the feed under the outbox's lease.
#pragma once

#include "statesman/pg/guard.hpp"

extern "C" {
#include "postmaster/bgworker.h"
#include "storage/lwlock.h"
}

#include <string>

namespace statesman::pg {

// The SQL objects this library works with are those of its own version (STATESMAN_VERSION, from
// the control file). Between installing a new build and ALTER EXTENSION statesman UPDATE they are
// an older version's: the database worker starts no delivery and appends fail until the update.
inline bool IsLibraryVersion(const std::string &installed) { return installed == STATESMAN_VERSION; }
// "statesman: extension version 0.3.0 is installed, the library is 0.4.0"
inline std::string VersionMismatch(const std::string &installed) {
  return "statesman: extension version " + installed + " is installed, the library is " + STATESMAN_VERSION;
}

// GUCs (src/module.cpp).
extern bool guc_enabled;
extern int guc_max_workers;
extern int guc_naptime_ms;
extern bool guc_hints;

void DefineSettings();

// ---- Registry of running workers (src/worker/worker_slots.cpp) --------------------------------------
// A slot names a worker by (database, outbox id); the outbox id is empty for a database
// worker. The launching process reserves the slot, the worker claims it when it starts and
// frees it when it exits, so no two workers ever serve the same identity.
constexpr int kOutboxIdSize = 64;

void RequestSharedMemory();

// Reserves a slot for (dboid, outbox_id); returns its index, -1 when the identity already has
// a worker (reserved or running), -2 when every slot is taken.
int ReserveSlot(Oid dboid, const char *outbox_id, uint32 *generation);
// Frees a slot that is still only reserved (its worker never started).
void ReleaseReservedSlot(int index, uint32 generation);
// Called by a worker as it starts: claims its reserved slot. False when it is not its own.
bool ClaimSlot(int index, uint32 generation, Oid dboid, const char *outbox_id);
// Sets the latch of the database worker (dispatchers == false) or of every dispatcher of a
// database. Takes no lock: at worst a latch is set that nobody needed.
void WakeWorkers(Oid dboid, bool dispatchers);

// The pids of the running workers of a database (its database worker and dispatchers), at
// most `capacity` of them; returns how many.
int WorkerPids(Oid dboid, int *pids, int capacity);

// The launcher registers its latch, so that a commit of create_outbox/resume_outbox
// (statesman._wake_launcher) wakes it at once: it starts the database's worker if none runs.
void RegisterLauncherLatch();
// The databases whose database worker was asked for since the last call (at most capacity;
// *all: more were, look at every database).
int TakeLaunchRequests(Oid *dboids, int capacity, bool *all);
// Notes (waiting) or clears that the worker of (dboid, outbox_id) waits for a slot;
// registry_full: statesman.max_workers is reached, else max_worker_processes. Shown by
// statesman._slot_wait in outbox_status.last_error.
void NoteSlotWait(Oid dboid, const char *outbox_id, bool waiting, bool registry_full);

// Marks that this transaction appended; its commit wakes the database's sequencer.
void NoteAppend();
void RegisterCommitHint();

// ---- Launching (launcher.cpp) ----------------------------------------------------------
// A worker this process started (the launcher its database workers, a database worker its
// dispatchers): its handle and its registry slot.
struct LaunchedWorker {
  BackgroundWorkerHandle *handle = nullptr;  // nullptr: not running
  int slot = -1;
  uint32 generation = 0;
  int64 started_at = 0;
};

enum class LaunchResult { kStarted, kAlreadyRunning, kNoRegistrySlot, kNoBackgroundWorkerSlot };

// Reserves a registry slot for (dboid, outbox_id) and registers a dynamic worker in it; on a
// failure the reservation is given back. kAlreadyRunning: another process serves that identity.
LaunchResult Launch(LaunchedWorker *worker, const char *function, const char *name, Oid dboid, Oid owner,
                    const char *outbox_id, int64 now);
// Notices that a launched worker has exited (and frees a reservation it never claimed).
void ForgetIfStopped(LaunchedWorker *worker);
void RegisterLauncher();

// Arguments a dynamic worker finds in bgw_extra.
struct WorkerArgs {
  Oid dboid;
  Oid owner;
  uint32 generation;
  char outbox_id[kOutboxIdSize];
};

// The start of a database worker or dispatcher: reads its arguments, sets up the signal
// handlers, connects (a dispatcher as the extension's owner, a database worker as the
// bootstrap superuser) and claims its registry slot, exiting quietly when the slot is not its
// own. SIGTERM goes to `die`, or with exit_work to pg::HandleShutdownSignal (the worker's loop
// then ends at its next check and does its exit work). Runs before any C++ object exists (it may
// raise FATAL).
WorkerArgs StartDynamicWorker(Datum arg, bool as_owner, const char *appname, bool exit_work = false);
// Applies the settings every statesman worker depends on, whatever the server's, database's and
// role's defaults (launcher.cpp); a worker that starts outside the registry (the backfill) calls
// it right after its connection. Plain C: may raise FATAL.
void PinWorkerSettings();

// Milliseconds on a monotonic-enough clock (GetCurrentTimestamp / 1000).
int64 NowMillis();

}  // namespace statesman::pg

extern "C" {
PGDLLEXPORT void statesman_launcher_main(Datum arg);
PGDLLEXPORT void statesman_database_main(Datum arg);
PGDLLEXPORT void statesman_dispatcher_main(Datum arg);
PGDLLEXPORT Datum statesman_wake_launcher(PG_FUNCTION_ARGS);
PGDLLEXPORT Datum statesman_slot_wait(PG_FUNCTION_ARGS);
}
