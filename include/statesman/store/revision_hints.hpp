// The revisions last appended, by address: what the append starts from when it looks for an
// address's latest revision (src/store/append.cpp, LatestRevision). Pure C++ (no PostgreSQL
// headers).
//
// A fixed table of slots, each chosen by a hash of a scope (the database and the ledger's
// storage) and the address, and holding that hash, the revision and where its row was written
// (a heap tuple id, packed; 0 when unknown). With statesman preloaded the table lives in shared
// memory and every appending backend notes into it (src/store/revision_hints.cpp), so an append
// finds the revision that any session appended last; otherwise each session has its own.
// Finding and noting cost a hash and one slot: no lock, no allocation.
//
// The three words of a slot are separate atomics, so a reader racing a writer of another
// address of the slot can pair one address's hash with the other's revision or row, and a new
// address that falls on a taken slot replaces it. A slot's values are therefore never taken on
// their word: the append reads the row the hint names and uses the hint only when that row is
// the address's, at that revision, and visible (docs/design.md §2.4 gives the argument).
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
    std::atomic<uint64_t> where{0};    // the row's tuple id, packed; 0: unknown
  };
  static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
                "a slot in shared memory needs lock-free atomics");

  // What a slot says of an address: its revision (0: nothing) and where that row is (0: unknown).
  struct Hint {
    int64_t revision = 0;
    uint64_t where = 0;
  };

  // Over `count` constructed slots (a power of two), which it does not own.
  RevisionHints(Slot *slots, size_t count) : slots_(slots), mask_(count - 1) {}

  // What was noted for `address` in `scope`, or an empty hint when the slot holds another's.
  Hint Find(uint64_t scope, std::string_view address) const {
    uint64_t hash = Hash(scope, address);
    const Slot &slot = slots_[hash & mask_];
    Hint hint;
    hint.revision = slot.revision.load(std::memory_order_relaxed);
    hint.where = slot.where.load(std::memory_order_relaxed);
    if (slot.hash.load(std::memory_order_relaxed) != hash) return Hint{};
    return hint;
  }

  void Note(uint64_t scope, std::string_view address, int64_t revision, uint64_t where = 0) {
    uint64_t hash = Hash(scope, address);
    Slot &slot = slots_[hash & mask_];
    slot.hash.store(hash, std::memory_order_relaxed);
    slot.revision.store(revision, std::memory_order_relaxed);
    slot.where.store(where, std::memory_order_relaxed);
  }

  // Empties the slot of `address` when it holds that address's hint.
  void Forget(uint64_t scope, std::string_view address) {
    uint64_t hash = Hash(scope, address);
    Slot &slot = slots_[hash & mask_];
    uint64_t expected = hash;
    slot.hash.compare_exchange_strong(expected, 0, std::memory_order_relaxed);
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
