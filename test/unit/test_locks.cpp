// The advisory lock key of an address (include/statesman/store/locks.hpp): 32-bit FNV-1a over
// the address's bytes, in the key space the SQL views (statesman.feed_status) look for. The key
// must never change between versions: an old and a new backend must lock the same address alike.
#include "statesman/store/locks.hpp"

#include <cstdint>
#include <string>

#include "tap.hpp"

using statesman::store::AddressLockKey;

int main() {
  // The FNV-1a reference vectors (Fowler, Noll, Vo): "" 0x811c9dc5, "a" 0xe40c292c,
  // "foobar" 0xbf9cf968; the others computed by an independent FNV-1a.
  CHECK_EQ(AddressLockKey("").id, static_cast<int32_t>(0x811c9dc5u), "FNV-1a of \"\" is the offset basis");
  CHECK_EQ(AddressLockKey("a").id, static_cast<int32_t>(0xe40c292cu), "FNV-1a of \"a\"");
  CHECK_EQ(AddressLockKey("foobar").id, static_cast<int32_t>(0xbf9cf968u), "FNV-1a of \"foobar\"");
  CHECK_EQ(AddressLockKey("orders/k1").id, int32_t{1481858725}, "FNV-1a of an address");
  CHECK_EQ(AddressLockKey("caf\xc3\xa9@eu/\xc3\xbc"
                          "ber")
               .id,
           int32_t{1713869242}, "FNV-1a takes bytes >= 0x80 as unsigned (UTF-8 address)");
  CHECK_EQ(AddressLockKey("a").space, int32_t{1398033742}, "the address lock space is 1398033742");
  CHECK_EQ(AddressLockKey("orders/k1").space, AddressLockKey("").space, "every address shares the one space");
  CHECK(AddressLockKey("orders/k1").id != AddressLockKey("orders/k2").id, "neighbouring addresses get other keys");
  CHECK(AddressLockKey("Orders/k1").id != AddressLockKey("orders/k1").id, "the key is over the bytes as given");
  const std::string with_nul("a\0b", 3);
  CHECK(AddressLockKey(with_nul).id != AddressLockKey("a").id, "the whole string_view counts, not up to a NUL");
  return unit::Done();
}
