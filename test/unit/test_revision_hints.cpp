// The append's revision hints (include/statesman/store/revision_hints.hpp): a fixed table of
// the revisions last appended, one slot per hash of the database and the address, shared by
// every backend when statesman is preloaded. What it must do: give back what was noted, nothing
// for an address never noted (nor for the same address in another database), the newest of two
// notes, the notes of another table over the same slots (another backend), lose an entry only
// to another address of the same slot, and, read while it is written, give back only values
// that were noted.
#include "statesman/store/revision_hints.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "tap.hpp"

using statesman::store::RevisionHints;

namespace {

constexpr size_t kSlots = 4096;
constexpr uint64_t kDb = 16384, kOtherDb = 16385;

size_t SlotOf(const std::string &address) { return RevisionHints::SlotOf(kDb, address, kSlots); }

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
  CHECK_EQ(other_backend.Find(kDb, "orders/k1").revision, int64_t{8}, "a table over the same slots finds another's note");
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

  // Two addresses of one slot: the second note replaces the first, which then has no hint.
  std::string first = "orders/k1", second;
  for (int i = 0; second.empty(); ++i) {
    std::string candidate = "orders/c" + std::to_string(i);
    if (SlotOf(candidate) == SlotOf(first)) second = candidate;
  }
  hints.Note(kDb, second, 3);
  CHECK_EQ(hints.Find(kDb, second).revision, int64_t{3}, "an address on a taken slot gets it");
  CHECK_EQ(hints.Find(kDb, first).revision, int64_t{0}, "the address it replaced has no hint (none wrong)");
  hints.Forget(kDb, first);
  CHECK_EQ(hints.Find(kDb, second).revision, int64_t{3}, "forgetting an address leaves another's hint on its slot");

  // Many addresses: each keeps its hint unless a later one took its slot.
  auto many_slots = std::make_unique<RevisionHints::Slot[]>(kSlots);
  RevisionHints many(many_slots.get(), kSlots);
  const int kCount = 3000;
  for (int i = 1; i <= kCount; ++i) many.Note(kDb, "acct/" + std::to_string(i), i);
  int kept = 0, wrong = 0;
  for (int i = 1; i <= kCount; ++i) {
    int64_t found = many.Find(kDb, "acct/" + std::to_string(i)).revision;
    if (found == i)
      ++kept;
    else if (found != 0)
      ++wrong;
  }
  CHECK_EQ(wrong, 0, "no address gets another's revision");
  CHECK(kept > kCount / 2,
        "most of 3,000 addresses in 4,096 slots keep their hint (kept " + std::to_string(kept) + ")");
  for (int i = 1; i <= kCount; ++i) {
    if (many.Find(kDb, "acct/" + std::to_string(i)).revision != 0) continue;
    bool taken_later = false;
    for (int j = i + 1; j <= kCount && !taken_later; ++j)
      taken_later = SlotOf("acct/" + std::to_string(j)) == SlotOf("acct/" + std::to_string(i));
    if (!taken_later) ++wrong;
  }
  CHECK_EQ(wrong, 0, "an address loses its hint only to a later one of its slot");

  const std::string with_nul("a\0b", 3);
  hints.Note(kDb, with_nul, 5);
  CHECK_EQ(hints.Find(kDb, std::string_view("a")).revision, int64_t{0}, "the whole address counts, not up to a NUL");
  CHECK_EQ(hints.Find(kDb, with_nul).revision, int64_t{5}, "an address with a NUL byte is found as given");

  // Backends writing and reading one slot at once: a reader gets 0 or a revision that some
  // writer noted (of this address or the other of its slot), never a value no one wrote.
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
      for (const std::string &a : {first, second}) {
        int64_t found = table.Find(kDb, a).revision;
        reads.fetch_add(1, std::memory_order_relaxed);
        bool written = found == 0 || (found > 0 && found <= 200000) || (found > 1000000 && found <= 1200000);
        if (!written) bad.fetch_add(1);
      }
    }
  };
  std::thread r1(reader), r2(reader);
  std::thread w1(writer, first, 0), w2(writer, second, 1000000);
  w1.join();
  w2.join();
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
