// The database worker: one per database that has the extension. It is the feed's sequencer
// (woken by the commit hint of appending transactions, and at least once a second), it keeps
// one dispatcher running per enabled outbox, and it runs the retention that waited for
// delivery. It exits when the extension is dropped or statesman.enabled is turned off.
#include "statesman/worker/workers.hpp"
#include "statesman/pg/work.hpp"

extern "C" {
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
}

#include <map>
#include <set>
#include <string>

#include "statesman/worker/backoff.hpp"

namespace statesman::pg {
namespace {

constexpr int64 kSuperviseEveryMs = 1000;
constexpr int64 kRelaunchAfterMs = 1000;   // a dispatcher that exited is restarted after this
constexpr int64 kSequenceBatch = 10000;
constexpr int64 kSequenceGatherMs = 1;      // after a run that sequenced, before the next

// What the database worker keeps from one supervision pass to the next.
struct Supervision {
  std::map<std::string, LaunchedWorker> dispatchers;
  worker::WarningLimiter no_slot{60000};
  bool warned_version = false;
};

// Gives feed positions to committed records, a batch per transaction; wakes the dispatchers
// when the head moved. Returns true when it sequenced anything.
bool Sequence(int64 *head) {
  for (;;) {
    BeginWork("statesman: sequencing the feed");
    int64 before = *head;
    *head = ToInt(QueryValue("SELECT statesman.sequence_feed($1::integer)", {std::to_string(kSequenceBatch)}), 0);
    EndWork();
    if (*head > before && guc_hints) WakeWorkers(MyDatabaseId, true);
    if (*head - before < kSequenceBatch) return *head > before;
    if (!HandleInterrupts()) return true;
  }
}

// Starts a dispatcher for each enabled outbox that has none; forgets the ones that exited.
// Returns false when the extension is gone.
bool Supervise(Supervision *sup) {
  std::map<std::string, LaunchedWorker> *dispatchers = &sup->dispatchers;
  BeginWork("statesman: supervising dispatchers");
  std::vector<Row> extension =
      Query("SELECT extversion, extowner FROM pg_catalog.pg_extension WHERE extname = 'statesman'");
  if (extension.empty()) {
    EndWork();
    return false;
  }
  // After a new build is installed, delivery waits for ALTER EXTENSION statesman UPDATE: the
  // SQL objects must be the version this library was built for.
  if (!IsLibraryVersion(extension[0][0].value_or(""))) {
    EndWork();
    if (!sup->warned_version)
      Log(LogLevel::kWarning, VersionMismatch(extension[0][0].value_or("?")) + "; delivery waits",
          "Run ALTER EXTENSION statesman UPDATE in this database.");
    sup->warned_version = true;
    return true;
  }
  sup->warned_version = false;
  Oid owner = static_cast<Oid>(ToInt(extension[0][1]));
  std::vector<Row> outboxes = Query("SELECT outbox_id FROM statesman.outboxes WHERE enabled ORDER BY outbox_id");
  int64 pruned = ToInt(QueryValue("SELECT statesman._prune_deferred(1000)"));
  // The watchdog of stuck leaders (see statesman._expire_stuck_lease).
  Query("SELECT statesman._expire_stuck_lease(o.outbox_id) FROM statesman.outboxes o "
        "WHERE o.enabled AND o.require_lease");
  EndWork();
  if (pruned > 0) Log(LogLevel::kLog, "statesman: deferred retention pruned " + std::to_string(pruned) + " records");

  int64 now = NowMillis();
  for (auto &[id, d] : *dispatchers) ForgetIfStopped(&d);
  std::set<std::string> wanted;
  for (const Row &row : outboxes) {
    const std::string &id = *row[0];
    wanted.insert(id);
    LaunchedWorker &d = (*dispatchers)[id];
    if (d.handle != nullptr) continue;
    if (d.started_at != 0 && now - d.started_at < kRelaunchAfterMs) continue;
    // kAlreadyRunning: one started by an earlier database worker still runs.
    LaunchResult result =
        Launch(&d, "statesman_dispatcher_main", "statesman dispatcher", MyDatabaseId, owner, id.c_str(), now);
    if (result == LaunchResult::kStarted || result == LaunchResult::kAlreadyRunning) continue;
    int64 suppressed = 0;
    if (sup->no_slot.Allow(now, &suppressed))
      Log(LogLevel::kWarning,
          "statesman: no free worker slot for the dispatcher of outbox \"" + id + "\"; retrying",
          result == LaunchResult::kNoRegistrySlot
              ? "Raise statesman.max_workers (now " + std::to_string(guc_max_workers) + ")."
              : "Raise max_worker_processes.");
  }
  // Outboxes dropped or paused: their dispatchers see it themselves and exit.
  for (auto it = dispatchers->begin(); it != dispatchers->end();) {
    if (it->second.handle == nullptr && wanted.count(it->first) == 0)
      it = dispatchers->erase(it);
    else
      ++it;
  }
  return true;
}

void StopDispatchers(std::map<std::string, LaunchedWorker> *dispatchers) {
  for (auto &[id, d] : *dispatchers)
    if (d.handle != nullptr) Call([&] { TerminateBackgroundWorker(d.handle); });
}

void DatabaseLoop() {
  BeginWork("statesman: starting");
  bool installed = ExtensionInstalled();
  EndWork();
  if (!installed) return;
  Log(LogLevel::kLog, "statesman: database worker started");

  Supervision sup;
  int64 head = 0;
  int64 last_supervised = 0;
  for (;;) {
    if (!HandleInterrupts()) break;
    // Every run is a synchronous commit: under a stream of appends, let a few commits gather
    // before the next run rather than running once per commit. The gathering wait consumes
    // the hints that arrive meanwhile, so run again until a run finds nothing: the commit of
    // anything that run did not see sets the latch again after it.
    bool more = false;  // stopped sequencing only to supervise: sequence again right after
    while (Sequence(&head)) {
      WaitUntil(NowMillis() + kSequenceGatherMs);
      if (!HandleInterrupts()) break;
      // A steady stream of appends keeps every run busy: supervise on time all the same.
      if (NowMillis() - last_supervised >= kSuperviseEveryMs) {
        more = true;
        break;
      }
    }
    int64 now = NowMillis();
    if (now - last_supervised >= kSuperviseEveryMs) {
      if (!Supervise(&sup)) break;
      last_supervised = now;
    }
    if (!more) WaitForLatch(std::max<int64>(1, last_supervised + kSuperviseEveryMs - NowMillis()));
  }
  StopDispatchers(&sup.dispatchers);
  Log(LogLevel::kLog, "statesman: database worker stopped");
}

}  // namespace
}  // namespace statesman::pg

extern "C" void statesman_database_main(Datum arg) {
  using namespace statesman::pg;
  StartDynamicWorker(arg, false, "statesman database worker");
  Invoke([] {
    RunUntilExtensionDropped(DatabaseLoop);
    return 0;
  });
  proc_exit(0);
}
