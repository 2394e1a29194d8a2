// Advisory lock keys of the store. Pure C++ (no PostgreSQL headers), thread-safe.
// Two-int4 advisory keys: `space` tells statesman's locks apart from an application's.
#pragma once

#include <cstdint>
#include <string_view>

namespace statesman::store {

struct LockKey {
  int32_t space;
  int32_t id;
};

// Held by an appending transaction on each address it writes, until it ends.
inline constexpr int32_t kAddressLockSpace = 1398033742;
// Held by the one sequencer that gives feed positions, until its transaction ends.
inline constexpr int32_t kSequencerLockSpace = 1398033743;
// Two more spaces are taken only in SQL (sql/statesman.sql); noted here so that none is reused:
// 1398033744, an outbox's lease (session lock, key hashtext(outbox_id)), and 1398033745, a
// page of delivery (shared, per transaction) against drop_outbox (exclusive), same key.

// The lock key of an address (FNV-1a; a collision only makes two addresses share a lock).
inline LockKey AddressLockKey(std::string_view address) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : address) {
    hash ^= c;
    hash *= 16777619u;
  }
  return LockKey{kAddressLockSpace, static_cast<int32_t>(hash)};
}

}  // namespace statesman::store
