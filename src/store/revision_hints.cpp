// Where the append's revision hints live (include/statesman/store/revision_hints.hpp): with
// statesman preloaded, one table of kSharedSlots slots in shared memory for every backend
// (4 MB), so that an append finds the revision any session appended to the address last;
// otherwise a table of kLocalSlots per session, which knows only the session's own appends.
#include "statesman/store/append.hpp"
#include "statesman/store/revision_hints.hpp"

extern "C" {
#include "storage/shmem.h"
}

#include <new>

namespace statesman::pg {
namespace {

using store::RevisionHints;

constexpr size_t kSharedSlots = 131072;
constexpr size_t kLocalSlots = 4096;

RevisionHints::Slot *shared_slots = nullptr;
RevisionHints *hints = nullptr;

}  // namespace

Size RevisionHintBytes() { return mul_size(sizeof(RevisionHints::Slot), kSharedSlots); }

void AttachRevisionHints() {
  bool found = false;
  void *memory = ShmemInitStruct("statesman revision hints", RevisionHintBytes(), &found);
  auto *slots = static_cast<RevisionHints::Slot *>(memory);
  if (!found)
    for (size_t i = 0; i < kSharedSlots; ++i) new (&slots[i]) RevisionHints::Slot();
  shared_slots = slots;
}

store::RevisionHints &RevisionHintTable() {
  if (hints == nullptr) {
    if (shared_slots != nullptr) {
      hints = new RevisionHints(shared_slots, kSharedSlots);
    } else {
      auto *local = new RevisionHints::Slot[kLocalSlots];
      hints = new RevisionHints(local, kLocalSlots);
    }
  }
  return *hints;
}

bool RevisionHintsShared() { return shared_slots != nullptr; }

}  // namespace statesman::pg
