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

// The spaces of statesman's keys; sql/install/03_helpers.sql names the same numbers in SQL
// (statesman._lock_space('address' | 'sequencer' | 'lease' | 'page')).
// Held by an appending transaction on each address it writes, until it ends.
inline constexpr int32_t kAddressLockSpace = 1398033742;
// Held by the one sequencer that gives feed positions (key 0), until its transaction ends.
inline constexpr int32_t kSequencerLockSpace = 1398033743;
// An outbox's lease: a dispatcher's session lock (dispatch_once's: for its transaction), key
// hashtext(outbox_id).
inline constexpr int32_t kLeaseLockSpace = 1398033744;
// A page of delivery (shared, per transaction) against drop_outbox (exclusive), same key.
inline constexpr int32_t kPageLockSpace = 1398033745;

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
