// The revisions last appended, by address: a hint for the append's probe of the latest
// revision (src/store/append.cpp, LatestRevision), never trusted for the answer. Pure C++ (no
// PostgreSQL headers).
//
// A fixed table of slots, each chosen by a hash of the database and the address and holding
// that hash and the revision. With statesman preloaded the table lives in shared memory and
// every appending backend notes into it (src/store/revision_hints.cpp), so an append finds the
// revision that any session appended last; otherwise each session has its own. Finding and
// noting cost a hash and one slot: no lock, no allocation. The two words of a slot are
// separate atomics, so a reader racing a writer can pair one address's hash with another's
// revision, and a new address that falls on a taken slot replaces it. Either way the hint is
// only wrong, never harmful: the probe looks from the hint up and, when it finds nothing
// visible there, at every revision, so a wrong hint costs a second look, never a wrong
// revision.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

namespace statesman::store {

class RevisionHints {
 public:
  struct Slot {
    std::atomic<uint64_t> hash{0};
    std::atomic<int64_t> revision{0};  // 0: empty
  };
  static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
                "a slot in shared memory needs lock-free atomics");

  // Over `count` constructed slots (a power of two), which it does not own.
  RevisionHints(Slot *slots, size_t count) : slots_(slots), mask_(count - 1) {}

  // The revision noted for `address` in database `scope`, 0 when none is.
  int64_t Find(uint64_t scope, std::string_view address) const {
    uint64_t hash = Hash(scope, address);
    const Slot &slot = slots_[hash & mask_];
    int64_t revision = slot.revision.load(std::memory_order_relaxed);
    return slot.hash.load(std::memory_order_relaxed) == hash ? revision : 0;
  }

  void Note(uint64_t scope, std::string_view address, int64_t revision) {
    uint64_t hash = Hash(scope, address);
    Slot &slot = slots_[hash & mask_];
    slot.hash.store(hash, std::memory_order_relaxed);
    slot.revision.store(revision, std::memory_order_relaxed);
  }

  // The slot of `address` in a table of `count` slots.
  static size_t SlotOf(uint64_t scope, std::string_view address, size_t count) {
    return Hash(scope, address) & (count - 1);
  }

 private:
  static uint64_t Hash(uint64_t scope, std::string_view address) {
    return std::hash<std::string_view>{}(address) ^ (scope * 0x9E3779B97F4A7C15ull);
  }

  Slot *slots_;
  size_t mask_;
};

}  // namespace statesman::store
