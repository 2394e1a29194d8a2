// The append's revision hints (include/statesman/store/revision_hints.hpp): a fixed table of
// the revisions last appended, in buckets of two slots chosen by a hash of the scope and the
// address, shared by every backend when statesman is preloaded. What it must do: give back
// what was noted (the revision and where its row is), nothing for an address never noted (nor
// for the same address in another scope), the newest of two notes, the notes of another table
// over the same slots (another backend), keep two addresses of a bucket, forget only the
// address's own hint, lose an entry only to a third address of the same bucket, and, read
// while it is written, give back only values that were noted.
#include "statesman/store/revision_hints.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tap.hpp"

using statesman::store::RevisionHints;

namespace {

constexpr size_t kSlots = 4096;
constexpr uint64_t kDb = 16384, kOtherDb = 16385;

size_t BucketOf(const std::string &address) { return RevisionHints::BucketOf(kDb, address, kSlots); }

// `n` addresses (orders/c0, c1, ...) other than `of` whose bucket is its bucket.
std::vector<std::string> SameBucket(const std::string &of, size_t n) {
  std::vector<std::string> found;
  for (int i = 0; found.size() < n; ++i) {
    std::string candidate = "orders/c" + std::to_string(i);
    if (candidate != of && BucketOf(candidate) == BucketOf(of)) found.push_back(candidate);
  }
  return found;
}

}  // namespace

int main() {
  auto slots = std::make_unique<RevisionHints::Slot[]>(kSlots);
  RevisionHints hints(slots.get(), kSlots);
  CHECK_EQ(hints.Find(kDb, "orders/k1").revision, int64_t{0}, "an empty table has no hint");

  hints.Note(kDb, "orders/k1", 7);
  CHECK_EQ(hints.Find(kDb, "orders/k1").revision, int64_t{7}, "a noted revision is found");
  CHECK_EQ(hints.Find(kDb, "orders/k2").revision, int64_t{0}, "another address has none");
  CHECK_EQ(hints.Find(kOtherDb, "orders/k1").revision, int64_t{0}, "the same address in another database has none");
  hints.Note(kDb, "orders/k1", 8);
  CHECK_EQ(hints.Find(kDb, "orders/k1").revision, int64_t{8}, "the newer note replaces the older");

  RevisionHints other_backend(slots.get(), kSlots);
  CHECK_EQ(other_backend.Find(kDb, "orders/k1").revision, int64_t{8},
           "a table over the same slots finds another's note");
  other_backend.Note(kDb, "orders/k1", 9);
  CHECK_EQ(hints.Find(kDb, "orders/k1").revision, int64_t{9}, "and its notes are found by the first");

  // Where the row is comes back with the revision; a note without it has none.
  hints.Note(kDb, "orders/w", 4, (uint64_t{12} << 16) | 3);
  CHECK_EQ(hints.Find(kDb, "orders/w").where, (uint64_t{12} << 16) | 3, "the row's place is found with the revision");
  hints.Note(kDb, "orders/w", 5);
  CHECK_EQ(hints.Find(kDb, "orders/w").where, uint64_t{0}, "a note without a place replaces the old one's");
  CHECK_EQ(hints.Find(kDb, "orders/w").revision, int64_t{5}, "and its revision is found");
  CHECK_EQ(hints.Find(kDb, "orders/k2").where, uint64_t{0}, "an address never noted has no place");

  // Forgetting empties the address's slot, and only when the slot is the address's.
  hints.Forget(kDb, "orders/w");
  CHECK_EQ(hints.Find(kDb, "orders/w").revision, int64_t{0}, "a forgotten hint is gone");

  // Two addresses of one bucket both keep their hints; a third takes one of their slots.
  const std::string first = "orders/k1";
  std::vector<std::string> others = SameBucket(first, 2);
  const std::string second = others[0], third = others[1];
  hints.Note(kDb, second, 3);
  CHECK_EQ(hints.Find(kDb, second).revision, int64_t{3}, "a second address of a bucket gets its other slot");
  CHECK_EQ(hints.Find(kDb, first).revision, int64_t{9}, "and the first keeps its hint");
  hints.Note(kDb, second, 4);
  CHECK_EQ(hints.Find(kDb, second).revision, int64_t{4}, "a note for an address of a full bucket goes to its own slot");
  CHECK_EQ(hints.Find(kDb, first).revision, int64_t{9}, "and leaves the other's");
  hints.Note(kDb, third, 1);
  CHECK_EQ(hints.Find(kDb, third).revision, int64_t{1}, "a third address of a full bucket gets a slot");
  int64_t kept_first = hints.Find(kDb, first).revision, kept_second = hints.Find(kDb, second).revision;
  CHECK((kept_first == 0) != (kept_second == 0), "one of the two loses its hint, the other keeps it");
  CHECK((kept_first == 0 || kept_first == 9) && (kept_second == 0 || kept_second == 4),
        "what is kept is what was noted (none wrong)");
  hints.Forget(kDb, third);
  CHECK_EQ(hints.Find(kDb, third).revision, int64_t{0}, "forgetting empties the address's slot");
  CHECK_EQ(hints.Find(kDb, kept_first != 0 ? first : second).revision, kept_first != 0 ? kept_first : kept_second,
           "and leaves the other address of the bucket its hint");
  hints.Note(kDb, first, 10);
  hints.Note(kDb, second, 5);
  CHECK(hints.Find(kDb, first).revision == 10 && hints.Find(kDb, second).revision == 5,
        "the emptied slot takes the address that had lost its hint");

  // A full bucket gives up the slot noted longer ago: an address noted since keeps its hint.
  auto aged_slots = std::make_unique<RevisionHints::Slot[]>(kSlots);
  RevisionHints aged(aged_slots.get(), kSlots);
  aged.Note(kDb, first, 1, 0, /*now=*/100);
  aged.Note(kDb, second, 1, 0, /*now=*/200);
  aged.Note(kDb, third, 1, 0, /*now=*/300);
  CHECK(aged.Find(kDb, first).revision == 0 && aged.Find(kDb, second).revision == 1 &&
            aged.Find(kDb, third).revision == 1,
        "a third address takes the slot of the address noted first");
  aged.Note(kDb, second, 2, 0, /*now=*/400);
  aged.Note(kDb, first, 2, 0, /*now=*/500);
  CHECK(aged.Find(kDb, first).revision == 2 && aged.Find(kDb, second).revision == 2 &&
            aged.Find(kDb, third).revision == 0,
        "and the address noted longest ago loses its slot next");

  // Many addresses: each keeps its hint unless a later one took its slot, which only a bucket
  // of three or more addresses does.
  auto many_slots = std::make_unique<RevisionHints::Slot[]>(kSlots);
  RevisionHints many(many_slots.get(), kSlots);
  const int kCount = 1500;
  for (int i = 1; i <= kCount; ++i) many.Note(kDb, "acct/" + std::to_string(i), i);
  int kept = 0, wrong = 0;
  std::vector<int> per_bucket(kSlots / 2, 0);
  for (int i = 1; i <= kCount; ++i) ++per_bucket[BucketOf("acct/" + std::to_string(i))];
  for (int i = 1; i <= kCount; ++i) {
    std::string a = "acct/" + std::to_string(i);
    int64_t found = many.Find(kDb, a).revision;
    if (found == i)
      ++kept;
    else if (found != 0 || per_bucket[BucketOf(a)] < 3)
      ++wrong;
  }
  CHECK_EQ(wrong, 0, "no address gets another's revision, and one loses its hint only in a bucket of three or more");
  CHECK(kept > kCount * 9 / 10,
        "most of 1,500 addresses in 2,048 buckets keep their hint (kept " + std::to_string(kept) + ")");

  const std::string with_nul("a\0b", 3);
  hints.Note(kDb, with_nul, 5);
  CHECK_EQ(hints.Find(kDb, std::string_view("a")).revision, int64_t{0}, "the whole address counts, not up to a NUL");
  CHECK_EQ(hints.Find(kDb, with_nul).revision, int64_t{5}, "an address with a NUL byte is found as given");

  // Backends writing and reading one bucket at once, three addresses on its two slots: a reader
  // gets 0 or a revision that some writer noted (of any of the three), never a value no one wrote.
  auto race_slots = std::make_unique<RevisionHints::Slot[]>(kSlots);
  std::atomic<bool> stop{false};
  std::atomic<long> bad{0}, reads{0};
  auto writer = [&](const std::string &address, int64_t base) {
    RevisionHints table(race_slots.get(), kSlots);
    for (int64_t r = 1; r <= 200000; ++r) table.Note(kDb, address, base + r);
  };
  auto reader = [&] {
    RevisionHints table(race_slots.get(), kSlots);
    while (!stop.load()) {
      for (const std::string &a : {first, second, third}) {
        int64_t found = table.Find(kDb, a).revision;
        reads.fetch_add(1, std::memory_order_relaxed);
        bool written = found == 0 || (found > 0 && found <= 200000) || (found > 1000000 && found <= 1200000) ||
                       (found > 2000000 && found <= 2200000);
        if (!written) bad.fetch_add(1);
      }
    }
  };
  std::thread r1(reader), r2(reader);
  std::thread w1(writer, first, 0), w2(writer, second, 1000000), w3(writer, third, 2000000);
  w1.join();
  w2.join();
  w3.join();
  stop = true;
  r1.join();
  r2.join();
  CHECK(reads.load() > 0, "the readers read while the writers wrote");
  CHECK_EQ(bad.load(), 0L, "every hint read during the writes is a noted revision or none");
  RevisionHints after(race_slots.get(), kSlots);
  after.Note(kDb, first, 42);
  CHECK_EQ(after.Find(kDb, first).revision, int64_t{42}, "a note after the race is found as noted");
  return unit::Done();
}
