// The shared registry of statesman's workers, the commit hint that wakes the sequencer, the
// launcher's wake-up for a database that just got an outbox, and the notes of workers that
// wait for a slot; its shared memory hooks also reserve and attach the appends' revision hints
// (src/store/revision_hints.cpp). Everything here is plain PostgreSQL code without C++
// objects, so it may ereport freely.
#include "statesman/worker/workers.hpp"
#include "statesman/store/append.hpp"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(statesman_wake_launcher);
PG_FUNCTION_INFO_V1(statesman_slot_wait);
}

#include <cstring>

namespace statesman::pg {
namespace {

struct Slot {
  Oid dboid;  // InvalidOid: free
  pid_t pid;  // 0: reserved, the worker has not started yet
  int pgprocno;
  uint32 generation;              // tells a new reservation of the slot from an old one
  char outbox_id[kOutboxIdSize];  // empty: the database worker
};

// A worker that could not start for want of a slot, as its launching process last noted it.
struct SlotWait {
  Oid dboid;                      // InvalidOid: free
  char outbox_id[kOutboxIdSize];  // empty: the database's database worker
  TimestampTz noted_at;
  bool registry_full;  // statesman.max_workers (else max_worker_processes)
};

constexpr int kSlotWaits = 64;     // more waiting workers than this go unnoted
constexpr int kWakeRequests = 16;  // more requests than this make the launcher look at every database

struct Registry {
  LWLock *lock;
  int size;
  uint32 next_generation;
  int launcher_pgprocno;  // -1: no launcher running
  int wake_count;         // databases whose database worker was asked for, not yet started
  bool wake_all;
  Oid wake[kWakeRequests];
  SlotWait waits[kSlotWaits];
  Slot slots[FLEXIBLE_ARRAY_MEMBER];
};

Registry *registry = nullptr;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;
bool appended_in_transaction = false;
bool wake_launcher_at_commit = false;
int claimed_slot = -1;

Size RegistrySize() { return add_size(offsetof(Registry, slots), mul_size(sizeof(Slot), guc_max_workers)); }

void ShmemRequest() {
  if (prev_shmem_request_hook != nullptr) prev_shmem_request_hook();
  RequestAddinShmemSpace(RegistrySize());
  RequestAddinShmemSpace(RevisionHintBytes());
  RequestNamedLWLockTranche("statesman", 1);
}

void ShmemStartup() {
  if (prev_shmem_startup_hook != nullptr) prev_shmem_startup_hook();
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  bool found = false;
  registry = static_cast<Registry *>(ShmemInitStruct("statesman registry", RegistrySize(), &found));
  if (!found) {
    memset(registry, 0, RegistrySize());
    registry->lock = &(GetNamedLWLockTranche("statesman"))->lock;
    registry->size = guc_max_workers;
    registry->next_generation = 1;
    registry->launcher_pgprocno = -1;
  }
  AttachRevisionHints();
  LWLockRelease(AddinShmemInitLock);
}

bool SameIdentity(const Slot &slot, Oid dboid, const char *outbox_id) {
  return slot.dboid == dboid && strncmp(slot.outbox_id, outbox_id, kOutboxIdSize) == 0;
}

// on_shmem_exit: a worker frees its slot as it exits, however it exits.
void FreeClaimedSlot(int, Datum) {
  if (registry == nullptr || claimed_slot < 0) return;
  LWLockAcquire(registry->lock, LW_EXCLUSIVE);
  Slot &slot = registry->slots[claimed_slot];
  if (slot.pid == MyProcPid) memset(&slot, 0, sizeof(Slot));
  LWLockRelease(registry->lock);
  claimed_slot = -1;
}

// Asks the launcher to start the database worker of dboid now. Also while a worker of dboid
// holds a slot: that may be a discovery check that looked before the extension existed.
void WakeLauncher(Oid dboid) {
  LWLockAcquire(registry->lock, LW_EXCLUSIVE);
  bool known = false;
  for (int i = 0; i < registry->wake_count; ++i) known = known || registry->wake[i] == dboid;
  if (!known) {
    if (registry->wake_count < kWakeRequests)
      registry->wake[registry->wake_count++] = dboid;
    else
      registry->wake_all = true;
  }
  int procno = registry->launcher_pgprocno;
  LWLockRelease(registry->lock);
  if (procno >= 0) SetLatch(&ProcGlobal->allProcs[procno].procLatch);
}

// After commit the appended records are visible to new snapshots: wake the sequencer. After
// create_outbox or resume_outbox, the outbox is visible: have its database worker started.
void CommitHint(XactEvent event, void *) {
  if (event == XACT_EVENT_COMMIT && appended_in_transaction && guc_hints && registry != nullptr &&
      MyDatabaseId != InvalidOid)
    WakeWorkers(MyDatabaseId, false);
  if (event == XACT_EVENT_COMMIT && wake_launcher_at_commit && registry != nullptr && MyDatabaseId != InvalidOid)
    WakeLauncher(MyDatabaseId);
  if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_COMMIT ||
      event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE) {
    appended_in_transaction = false;
    wake_launcher_at_commit = false;
  }
}

}  // namespace

void RequestSharedMemory() {
  prev_shmem_request_hook = shmem_request_hook;
  shmem_request_hook = ShmemRequest;
  prev_shmem_startup_hook = shmem_startup_hook;
  shmem_startup_hook = ShmemStartup;
}

int ReserveSlot(Oid dboid, const char *outbox_id, uint32 *generation) {
  int free_index = -2;
  LWLockAcquire(registry->lock, LW_EXCLUSIVE);
  for (int i = 0; i < registry->size; ++i) {
    Slot &slot = registry->slots[i];
    if (slot.dboid == InvalidOid) {
      if (free_index < 0) free_index = i;
    } else if (SameIdentity(slot, dboid, outbox_id)) {
      free_index = -1;
      break;
    }
  }
  if (free_index >= 0) {
    Slot &slot = registry->slots[free_index];
    slot.dboid = dboid;
    slot.pid = 0;
    slot.pgprocno = -1;
    slot.generation = registry->next_generation++;
    strlcpy(slot.outbox_id, outbox_id, kOutboxIdSize);
    *generation = slot.generation;
  }
  LWLockRelease(registry->lock);
  return free_index;
}

void ReleaseReservedSlot(int index, uint32 generation) {
  LWLockAcquire(registry->lock, LW_EXCLUSIVE);
  Slot &slot = registry->slots[index];
  if (slot.generation == generation && slot.pid == 0) memset(&slot, 0, sizeof(Slot));
  LWLockRelease(registry->lock);
}

bool ClaimSlot(int index, uint32 generation, Oid dboid, const char *outbox_id) {
  if (registry == nullptr || index < 0 || index >= registry->size) return false;
  LWLockAcquire(registry->lock, LW_EXCLUSIVE);
  Slot &slot = registry->slots[index];
  bool mine = slot.generation == generation && slot.pid == 0 && SameIdentity(slot, dboid, outbox_id);
  if (mine) {
    slot.pid = MyProcPid;
    slot.pgprocno = MyProc->pgprocno;
    claimed_slot = index;
  }
  LWLockRelease(registry->lock);
  if (mine) on_shmem_exit(FreeClaimedSlot, 0);
  return mine;
}

void WakeWorkers(Oid dboid, bool dispatchers) {
  if (registry == nullptr) return;
  for (int i = 0; i < registry->size; ++i) {
    const volatile Slot &slot = registry->slots[i];
    int procno = slot.pgprocno;
    if (slot.dboid != dboid || slot.pid == 0 || procno < 0) continue;
    if ((slot.outbox_id[0] != '\0') != dispatchers) continue;
    SetLatch(&ProcGlobal->allProcs[procno].procLatch);
  }
}

int WorkerPids(Oid dboid, int *pids, int capacity) {
  if (registry == nullptr) return 0;
  int count = 0;
  LWLockAcquire(registry->lock, LW_SHARED);
  for (int i = 0; i < registry->size && count < capacity; ++i) {
    const Slot &slot = registry->slots[i];
    if (slot.dboid == dboid && slot.pid != 0) pids[count++] = slot.pid;
  }
  LWLockRelease(registry->lock);
  return count;
}

void NoteAppend() { appended_in_transaction = true; }

void RegisterLauncherLatch() {
  if (registry == nullptr) return;
  LWLockAcquire(registry->lock, LW_EXCLUSIVE);
  registry->launcher_pgprocno = MyProc->pgprocno;
  LWLockRelease(registry->lock);
}

int TakeLaunchRequests(Oid *dboids, int capacity, bool *all) {
  *all = false;
  if (registry == nullptr) return 0;
  LWLockAcquire(registry->lock, LW_EXCLUSIVE);
  int count = Min(registry->wake_count, capacity);
  for (int i = 0; i < count; ++i) dboids[i] = registry->wake[i];
  *all = registry->wake_all || registry->wake_count > capacity;
  registry->wake_count = 0;
  registry->wake_all = false;
  LWLockRelease(registry->lock);
  return count;
}

void NoteSlotWait(Oid dboid, const char *outbox_id, bool waiting, bool registry_full) {
  if (registry == nullptr) return;
  LWLockAcquire(registry->lock, LW_EXCLUSIVE);
  int found = -1, free_index = -1;
  for (int i = 0; i < kSlotWaits; ++i) {
    SlotWait &w = registry->waits[i];
    if (w.dboid == InvalidOid) {
      if (free_index < 0) free_index = i;
    } else if (w.dboid == dboid && strncmp(w.outbox_id, outbox_id, kOutboxIdSize) == 0) {
      found = i;
      break;
    }
  }
  if (!waiting) {
    if (found >= 0) memset(&registry->waits[found], 0, sizeof(SlotWait));
  } else if (found >= 0 || free_index >= 0) {
    SlotWait &w = registry->waits[found >= 0 ? found : free_index];
    w.dboid = dboid;
    strlcpy(w.outbox_id, outbox_id, kOutboxIdSize);
    w.noted_at = GetCurrentTimestamp();
    w.registry_full = registry_full;
  }
  LWLockRelease(registry->lock);
}

void RegisterCommitHint() { RegisterXactCallback(CommitHint, nullptr); }

}  // namespace statesman::pg

// statesman._wake_launcher(): when this transaction commits, the launcher starts this
// database's database worker at once if none runs (create_outbox, resume_outbox), instead of
// at its next look a statesman.naptime later.
extern "C" Datum statesman_wake_launcher(PG_FUNCTION_ARGS) {
  statesman::pg::wake_launcher_at_commit = true;
  PG_RETURN_VOID();
}

// statesman._slot_wait(outbox_id): why the outbox's worker waits for a slot ('waiting for a
// worker slot: statesman.max_workers=N is reached'), or NULL. A note counts while its
// launching process keeps noting it: for two of its retry intervals.
extern "C" Datum statesman_slot_wait(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  if (registry == nullptr || PG_ARGISNULL(0)) PG_RETURN_NULL();
  char *outbox_id = text_to_cstring(PG_GETARG_TEXT_PP(0));
  TimestampTz now = GetCurrentTimestamp();
  int64 fresh_ms = 2 * Max(guc_naptime_ms, 1000) + 1000;
  const char *which = nullptr;
  bool full = false;
  LWLockAcquire(registry->lock, LW_SHARED);
  for (int i = 0; i < kSlotWaits; ++i) {
    const SlotWait &w = registry->waits[i];
    if (w.dboid != MyDatabaseId) continue;
    if (w.outbox_id[0] != '\0' && strncmp(w.outbox_id, outbox_id, kOutboxIdSize) != 0) continue;
    if (TimestampDifferenceExceeds(w.noted_at, now, static_cast<int>(fresh_ms))) continue;
    which = w.outbox_id[0] == '\0' ? "the database worker" : "the dispatcher";
    full = w.registry_full;
    break;
  }
  LWLockRelease(registry->lock);
  if (which == nullptr) PG_RETURN_NULL();
  char message[256];
  if (full)
    snprintf(message, sizeof message,
             "waiting for a worker slot: statesman.max_workers=%d is reached (%s cannot start)", guc_max_workers,
             which);
  else
    snprintf(message, sizeof message, "waiting for a worker slot: max_worker_processes=%d is reached (%s cannot start)",
             max_worker_processes, which);
  PG_RETURN_TEXT_P(cstring_to_text(message));
}
