// The shared registry of statesman's workers, and the commit hint that wakes the sequencer.
// Everything here is plain PostgreSQL code without C++ objects, so it may ereport freely.
#include "statesman/worker/workers.hpp"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
}

#include <cstring>

namespace statesman::pg {
namespace {

struct Slot {
  Oid dboid;           // InvalidOid: free
  pid_t pid;           // 0: reserved, the worker has not started yet
  int pgprocno;
  uint32 generation;   // tells a new reservation of the slot from an old one
  char outbox_id[kOutboxIdSize];  // empty: the database worker
};

struct Registry {
  LWLock *lock;
  int size;
  uint32 next_generation;
  Slot slots[FLEXIBLE_ARRAY_MEMBER];
};

Registry *registry = nullptr;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;
bool appended_in_transaction = false;
int claimed_slot = -1;

Size RegistrySize() {
  return add_size(offsetof(Registry, slots), mul_size(sizeof(Slot), guc_max_workers));
}

void ShmemRequest() {
  if (prev_shmem_request_hook != nullptr) prev_shmem_request_hook();
  RequestAddinShmemSpace(RegistrySize());
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
  }
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

// After commit the appended records are visible to new snapshots: wake the sequencer.
void CommitHint(XactEvent event, void *) {
  if (event == XACT_EVENT_COMMIT && appended_in_transaction && guc_hints && registry != nullptr &&
      MyDatabaseId != InvalidOid)
    WakeWorkers(MyDatabaseId, false);
  if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_COMMIT ||
      event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE)
    appended_in_transaction = false;
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

void RegisterCommitHint() { RegisterXactCallback(CommitHint, nullptr); }

}  // namespace statesman::pg
