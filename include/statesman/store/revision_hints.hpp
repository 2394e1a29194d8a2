// The revisions last appended, by address: what the append starts from when it looks for an
// address's latest revision (src/store/append.cpp, LatestRevision). Pure C++ (no PostgreSQL
// headers).
//
// A fixed table of buckets of two slots, a bucket chosen by a hash of a scope (the database
// and the ledger's storage) and the address; a slot holds that hash, the revision, where its
// row was written (a heap tuple id, packed; 0 when unknown) and when it was noted. With
// statesman preloaded the table lives in shared memory and every appending backend notes into
// it (src/store/revision_hints.cpp), so an append finds the revision that any session appended
// last; otherwise each session has its own. Finding and noting cost a hash and one cache line:
// no lock, no allocation.
//
// The words of a slot are separate atomics, so a reader racing a writer of another address of
// the slot can pair one address's hash with the other's revision or row, and a third address
// that falls on a full bucket replaces one of its two. A slot's values are therefore never
// taken on their word: the append reads the row the hint names and uses the hint only when
// that row is the address's, at that revision, and visible (docs/design.md §2.4 gives the
// argument).
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
    std::atomic<int64_t> noted_at{0};  // when it was noted (the caller's clock)
  };
  static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
                "a slot in shared memory needs lock-free atomics");
  static_assert(sizeof(Slot) == 32, "two slots make a bucket of one 64-byte cache line");

  // What a slot says of an address: its revision (0: nothing) and where that row is (0: unknown).
  struct Hint {
    int64_t revision = 0;
    uint64_t where = 0;
  };

  // Over `count` constructed slots (a power of two, at least 2), which it does not own. An
  // address has a bucket of two neighbouring slots.
  RevisionHints(Slot *slots, size_t count) : slots_(slots), mask_(count / 2 - 1) {}

  // What was noted for `address` in `scope`: the hint of the slot of its bucket that holds its
  // hash, or an empty one when neither does (or, which no note makes, both).
  Hint Find(uint64_t scope, std::string_view address) const {
    uint64_t hash = Hash(scope, address);
    const Slot *bucket = Bucket(hash);
    const Slot *found = nullptr;
    for (int i = 0; i < 2; ++i) {
      if (bucket[i].hash.load(std::memory_order_relaxed) != hash) continue;
      if (found != nullptr) return Hint{};
      found = &bucket[i];
    }
    if (found == nullptr) return Hint{};
    Hint hint;
    hint.revision = found->revision.load(std::memory_order_relaxed);
    hint.where = found->where.load(std::memory_order_relaxed);
    if (found->hash.load(std::memory_order_relaxed) != hash) return Hint{};
    return hint;
  }

  // Notes into the bucket's slot that holds the address, else an empty one, else the one noted
  // longer ago (`now` is the caller's clock; on a tie, the one the address's hash picks), whose
  // address loses its hint.
  void Note(uint64_t scope, std::string_view address, int64_t revision, uint64_t where = 0, int64_t now = 0) {
    uint64_t hash = Hash(scope, address);
    Slot *bucket = Bucket(hash);
    Slot *slot = nullptr;
    for (int i = 0; i < 2 && slot == nullptr; ++i)
      if (bucket[i].hash.load(std::memory_order_relaxed) == hash) slot = &bucket[i];
    for (int i = 0; i < 2 && slot == nullptr; ++i)
      if (bucket[i].hash.load(std::memory_order_relaxed) == 0) slot = &bucket[i];
    if (slot == nullptr) {
      int64_t a = bucket[0].noted_at.load(std::memory_order_relaxed);
      int64_t b = bucket[1].noted_at.load(std::memory_order_relaxed);
      slot = a != b ? &bucket[a < b ? 0 : 1] : &bucket[(hash >> 40) & 1];
    }
    slot->hash.store(hash, std::memory_order_relaxed);
    slot->revision.store(revision, std::memory_order_relaxed);
    slot->where.store(where, std::memory_order_relaxed);
    slot->noted_at.store(now, std::memory_order_relaxed);
  }

  // Empties the slot of `address`'s bucket that holds its hint, if one does.
  void Forget(uint64_t scope, std::string_view address) {
    uint64_t hash = Hash(scope, address);
    Slot *bucket = Bucket(hash);
    for (int i = 0; i < 2; ++i) {
      uint64_t expected = hash;
      bucket[i].hash.compare_exchange_strong(expected, 0, std::memory_order_relaxed);
    }
  }

  // The bucket of `address` in a table of `count` slots.
  static size_t BucketOf(uint64_t scope, std::string_view address, size_t count) {
    return Hash(scope, address) & (count / 2 - 1);
  }

 private:
  static uint64_t Hash(uint64_t scope, std::string_view address) {
    uint64_t hash = std::hash<std::string_view>{}(address) ^ (scope * 0x9E3779B97F4A7C15ull);
    return hash != 0 ? hash : 1;  // 0 marks an empty slot
  }
  const Slot *Bucket(uint64_t hash) const { return &slots_[2 * (hash & mask_)]; }
  Slot *Bucket(uint64_t hash) { return &slots_[2 * (hash & mask_)]; }

  Slot *slots_;
  size_t mask_;
};

}  // namespace statesman::store
