// The database worker: one per database that has the extension. It is the feed's ticker
// (woken by the commit hint of appending transactions, and at least once a second), it keeps
// one dispatcher running per enabled outbox, and it runs the retention that waited for
// delivery. It exits when the extension is dropped or statesman.enabled is turned off.
#include "statesman/worker/workers.hpp"
#include "statesman/feed/ticks.hpp"
#include "statesman/pg/work.hpp"

extern "C" {
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
}

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>

#include "statesman/worker/backoff.hpp"

namespace statesman::pg {
namespace {

constexpr int64 kSuperviseEveryMs = 1000;
constexpr int64 kRelaunchAfterMs = 1000;  // a dispatcher that exited is restarted after this
constexpr int64 kSequenceBatch = 10000;
// Microseconds on a monotonic clock (the gathering's rate).
int64 NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What the database worker keeps from one supervision pass to the next.
struct Supervision {
  std::map<std::string, LaunchedWorker> dispatchers;
  worker::WarningLimiter no_slot{60000};
  bool warned_version = false;
  // Sessions other than statesman's workers seen holding one of its keys at every pass since
  // the time noted (see ExpireForeignHolders).
  std::map<std::string, int64> foreign_since;
};

// Holders of the sequencer key and of each outbox's lease and page keys that are not one of
// this database's statesman workers, and of address keys held outside any transaction: pid,
// backend start, which lock, its outbox, the grace
// (the outbox's lease_ttl; for the sequencer the shortest lease_ttl of an enabled outbox, 30 s
// without one), whether the session is idle (it holds the key at session level, which no
// statesman function does outside the workers), its transaction's age, who it is.
constexpr const char *kForeignHoldersSql =
    "WITH s AS (SELECT statesman._lock_space('sequencer') AS seq, statesman._lock_space('lease') AS lease, "
    "                  statesman._lock_space('page') AS page, statesman._lock_space('address') AS addr) "
    "SELECT k.pid, a.backend_start::text, "
    "       CASE k.classid::bigint WHEN s.seq THEN 'sequencer' WHEN s.lease THEN 'lease' "
    "                              WHEN s.addr THEN 'address' ELSE 'page' END, "
    "       o.outbox_id, "
    "       COALESCE(statesman._millis(o.lease_ttl), "
    "                (SELECT min(statesman._millis(x.lease_ttl)) FROM statesman.outboxes x WHERE x.enabled), 30000), "
    "       a.state IS NOT DISTINCT FROM 'idle', "
    "       COALESCE(statesman._millis(pg_catalog.clock_timestamp() - a.xact_start), 0), "
    "       COALESCE(a.usename::text, '?'), COALESCE(a.application_name, ''), "
    "       COALESCE(a.client_addr::text, 'local') "
    "FROM pg_catalog.pg_locks k CROSS JOIN s "
    "JOIN pg_catalog.pg_stat_activity a ON a.pid = k.pid "
    "LEFT JOIN statesman.outboxes o ON k.classid::bigint IN (s.lease, s.page) "
    "     AND k.objid = statesman._lease_key(o.outbox_id)::oid "
    "WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2 "
    "  AND k.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()) "
    "  AND ((k.classid::bigint = s.seq AND k.objid = 0) OR o.outbox_id IS NOT NULL "
    "       OR (k.classid::bigint = s.addr AND a.state IS NOT DISTINCT FROM 'idle')) "
    "  AND k.pid <> pg_catalog.pg_backend_pid() AND k.pid <> ALL ($1::integer[])";

// The watchdog of foreign holders. pg_advisory_lock is open to every role, and statesman's
// keys are visible in pg_locks: a session that takes the sequencer's key stops the feed, one
// that takes an outbox's lease or page key stops that outbox. A session other than this
// database's statesman workers that has held such a key for its grace (seen at every pass),
// and either holds it at session level (idle: statesman's functions take these keys only for
// their transaction) or in a transaction older than the grace, is terminated, with a WARNING
// that names it. A statesman function that holds a key for a moment (read_feed's on-demand
// sequencing, a dispatch_once page) is never seen that long; a transaction kept open after it
// is judged as any other holder: it stops delivery all the same. An address key held inside a
// transaction is left alone (an appending transaction holds its addresses until it ends, however
// long that is); one held outside any transaction can only have been taken with
// pg_advisory_lock, since appends take address keys for their transaction only, and blocks
// every append to that address: it is ended after the shortest lease_ttl like the sequencer's.
void ExpireForeignHolders(Supervision *sup) {
  int pids[1024];
  int count = WorkerPids(MyDatabaseId, pids, 1024);
  std::string array = "{";
  for (int i = 0; i < count; ++i) array += (i > 0 ? "," : "") + std::to_string(pids[i]);
  array += "}";
  std::vector<Row> holders = Query(kForeignHoldersSql, {array});
  int64 now = NowMillis();
  std::map<std::string, int64> seen;
  std::set<std::string> terminated;
  for (const Row &h : holders) {
    const std::string pid = h[0].value_or("0");
    const std::string lock = h[2].value_or("?");
    const std::string outbox = h[3].value_or("");
    std::string key = pid + "/" + h[1].value_or("") + "/" + lock + "/" + outbox;
    auto it = sup->foreign_since.find(key);
    int64 since = it == sup->foreign_since.end() ? now : it->second;
    seen[key] = since;
    // The key may have been taken up to one pass before it was first seen: judge it from then,
    // so that it is ended within its lease_ttl (but never sooner than half a second).
    int64 grace = std::max<int64>(ToInt(h[4], 30000) - kSuperviseEveryMs, 500);
    bool idle = h[5] == "t";
    int64 xact_ms = ToInt(h[6], 0);
    if (now - since < grace || !(idle || xact_ms >= grace) || terminated.count(pid) > 0) continue;
    terminated.insert(pid);
    std::string what = lock == "sequencer" ? "the sequencer's lock"
                       : lock == "address" ? "an address's lock"
                                           : "the " + lock + " lock of outbox \"" + outbox + "\"";
    Log(LogLevel::kWarning,
        "statesman: terminating pid " + pid + " (role \"" + h[7].value_or("") + "\", application_name \"" +
            h[8].value_or("") + "\", client " + h[9].value_or("") + "): it held " + what + " for more than " +
            std::to_string(now - since) + " ms, " + (idle ? "outside any transaction" : "in an open transaction") +
            ", and is not a statesman worker",
        "A session that holds one of statesman's advisory locks stops delivery; statesman's own functions take "
        "them only for a moment. The grace is the outbox's lease_ttl (for the sequencer, the shortest lease_ttl) less the "
        "watchdog's period of one second.");
    QueryValue("SELECT pg_catalog.pg_terminate_backend($1::integer)", {pid});
  }
  sup->foreign_since = std::move(seen);
}

// One tick: positions for every record committed since the last tick, in one row of
// statesman.ticks, committed asynchronously (readers flush before they act on a position);
// wakes the dispatchers when the head moved. Returns true when it ticked.
// Whether the installed SQL objects are this library's version (as the last supervision pass
// found): only then does the worker tick with statesman._tick(…, false) (feed::Tick), committing
// asynchronously; before ALTER EXTENSION statesman UPDATE it calls the old sequence_feed().
bool own_version = false;

bool Sequence(int64 *head) {
  BeginWork("statesman: ticking the feed");
  int64 before = *head;
  if (own_version) {
    // statesman._tick(…, false), called directly: no statement per tick.
    int64_t ticked = 0;
    *head = Call([&] { return feed::Tick(kSequenceBatch, false, &ticked); }) ? ticked : 0;
  } else {
    *head = ToInt(QueryValue("SELECT statesman.sequence_feed($1::integer)", {std::to_string(kSequenceBatch)}), 0);
  }
  EndWork();
  if (*head > before && guc_hints) WakeWorkers(MyDatabaseId, true);
  return *head > before;
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
  own_version = IsLibraryVersion(extension[0][0].value_or(""));
  if (!own_version) {
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
  // Ticks whose records retention has pruned (bounded: the oldest 1,000 ticks a pass).
  QueryValue("SELECT statesman._prune_ticks()");
  // The watchdog of stuck leaders (see statesman._expire_stuck_lease).
  Query(
      "SELECT statesman._expire_stuck_lease(o.outbox_id) FROM statesman.outboxes o "
      "WHERE o.enabled AND o.require_lease");
  ExpireForeignHolders(sup);
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
    bool started = result == LaunchResult::kStarted || result == LaunchResult::kAlreadyRunning;
    // outbox_status.last_error says so while it waits (statesman._slot_wait).
    NoteSlotWait(MyDatabaseId, id.c_str(), !started, result == LaunchResult::kNoRegistrySlot);
    if (started) continue;
    int64 suppressed = 0;
    if (sup->no_slot.Allow(now, &suppressed))
      Log(LogLevel::kWarning, "statesman: no free worker slot for the dispatcher of outbox \"" + id + "\"; retrying",
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
  int64 last_tick_began = 0;  // when the last tick that found records began (NowMicros)
  worker::PositionRate rate;
  for (;;) {
    if (!HandleInterrupts()) break;
    // Under a stream of appends, let a few commits gather before the next tick rather than
    // ticking once per commit (the faster they come, the longer, up to 10 ms). The latch
    // is cleared just before each tick, so a commit the tick may not have seen sets it again;
    // the gathering wait does not wait on the latch, so it stays set meanwhile and the commits
    // of the gathering time find it set: their hint costs them no signal, and the worker no
    // wake-up (docs/feed.md "What the ticks cost"). Tick again until a tick finds nothing;
    // the wait for the latch below then returns at once if a commit came after that tick.
    bool more = false;  // stopped sequencing only to supervise: sequence again right after
    ResetHints();
    for (int64 before = head;; before = head) {
      // The rate is that of the positions since the last tick that found some, over the time
      // since it began: a tick that found nothing in between moved neither.
      int64 began = NowMicros();
      if (!Sequence(&head)) break;
      int64 since_last = began - last_tick_began;
      last_tick_began = began;
      rate.Note(head - before, since_last);
      SleepWithoutHints(worker::GatherMillis(rate.PerMs()));
      if (!HandleInterrupts()) break;
      ResetHints();
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
