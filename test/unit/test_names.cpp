// The store's naming rules (src/store/names.cpp): names of roots, partitions and stores, paths,
// operations, and the canonical address they make; each broken rule throws its SQLSTATE.
#include "statesman/store/names.hpp"

#include <string>

#include "tap.hpp"

using statesman::store::CanonicalAddress;
using statesman::store::CheckName;
using statesman::store::CheckOperation;
using statesman::store::CheckPath;
using statesman::store::EscapeKeyValue;
using statesman::store::LowerName;

// The message of the Error `f` throws ("" when none).
template <typename F>
static std::string Message(F f) {
  try {
    f();
  } catch (const statesman::Error &e) {
    return e.what();
  }
  return "";
}

int main() {
  const std::string n63(63, 'x'), n64(64, 'x');
  CHECK_NOTHROW(CheckName("root", "Orders_2024.eu-1", 1), "CheckName: letters, digits, _ . - are allowed");
  CHECK_NOTHROW(CheckName("root", n63.c_str(), 1), "CheckName: 63 characters are allowed");
  CHECK_THROWS(CheckName("root", n64.c_str(), 1), "22023", "CheckName: 64 characters are not");
  CHECK_THROWS(CheckName("root", nullptr, 1), "22004", "CheckName: NULL is 22004");
  CHECK_THROWS(CheckName("root", "", 1), "22023", "CheckName: an empty root is refused");
  CHECK_NOTHROW(CheckName("partition", "", 0), "CheckName: an empty partition is allowed (min length 0)");
  CHECK_THROWS(CheckName("root", "a b", 1), "22023", "CheckName: a space is refused");
  CHECK_THROWS(CheckName("root", "a/b", 1), "22023", "CheckName: a slash is refused");
  CHECK_THROWS(CheckName("root", "a@b", 1), "22023", "CheckName: an @ is refused");
  CHECK_THROWS(CheckName("root", "caf\xc3\xa9", 1), "22023", "CheckName: non-ASCII letters are refused");
  CHECK(Message([] { CheckName("partition", "a b", 0); }).find("partition") == 0,
        "CheckName: the message names the argument");

  const std::string p1024(1024, 'p'), p1025(1025, 'p');
  CHECK_NOTHROW(CheckPath("a/b c/\xc3\xa9"), "CheckPath: slashes, spaces and UTF-8 are allowed in a path");
  CHECK_NOTHROW(CheckPath(p1024.c_str()), "CheckPath: 1024 bytes are allowed");
  CHECK_THROWS(CheckPath(p1025.c_str()), "22023", "CheckPath: 1025 bytes are not");
  CHECK(Message([&] { CheckPath(p1025.c_str()); }).find("(it is 1025)") != std::string::npos,
        "CheckPath: the message gives the length");
  CHECK_THROWS(CheckPath(""), "22023", "CheckPath: an empty path is refused");
  CHECK_THROWS(CheckPath(nullptr), "22004", "CheckPath: NULL is 22004");

  CHECK_EQ(CanonicalAddress("Orders", "k/1", ""), std::string("orders/k/1"),
           "CanonicalAddress: lower(root) / path without a partition");
  CHECK_EQ(CanonicalAddress("ORDERS", "K/1", "EU-west"), std::string("orders@EU-west/K/1"),
           "CanonicalAddress: root lower-cased, partition and path kept as given");
  CHECK_THROWS(CanonicalAddress(nullptr, "k", ""), "22004", "CanonicalAddress: NULL root");
  CHECK_THROWS(CanonicalAddress("r", nullptr, ""), "22004", "CanonicalAddress: NULL path");
  CHECK_THROWS(CanonicalAddress("r", "k", nullptr), "22004", "CanonicalAddress: NULL partition");
  CHECK_THROWS(CanonicalAddress("r", "", ""), "22023", "CanonicalAddress: empty path");
  CHECK_THROWS(CanonicalAddress("r", "k", "a/b"), "22023", "CanonicalAddress: a partition with a slash");
  CHECK_THROWS(CanonicalAddress("", "k", ""), "22023", "CanonicalAddress: empty root");

  CHECK_EQ(LowerName("AbC-9_Z"), std::string("abc-9_z"), "LowerName: ASCII letters lower-cased");
  CHECK_EQ(LowerName("\xc3\x80X"), std::string("\xc3\x80x"), "LowerName: other bytes kept");

  CHECK_NOTHROW(CheckOperation("put"), "CheckOperation: put");
  CHECK_NOTHROW(CheckOperation("delete"), "CheckOperation: delete");
  CHECK_THROWS(CheckOperation("PUT"), "22023", "CheckOperation: case matters");
  CHECK_THROWS(CheckOperation("upsert"), "22023", "CheckOperation: anything else is 22023");
  CHECK_THROWS(CheckOperation(nullptr), "22004", "CheckOperation: NULL is 22004");
  CHECK(EscapeKeyValue("a/b") == "a%2Fb", "EscapeKeyValue: '/' is %2F");
  CHECK(EscapeKeyValue("50%") == "50%25", "EscapeKeyValue: '%' is %25");
  CHECK(EscapeKeyValue("%2F") == "%252F", "EscapeKeyValue: an escape sequence in a value is escaped again");
  CHECK(EscapeKeyValue("") == "%00", "EscapeKeyValue: the empty value is %00");
  CHECK(EscapeKeyValue("caf\xc3\xa9 \"x\"") == "caf\xc3\xa9 \"x\"",
        "EscapeKeyValue: Unicode and quotes pass unchanged");
  // Two-column keys joined with '/': ("a/b", "c") and ("a", "b/c") stay apart.
  CHECK(EscapeKeyValue("a/b") + "/" + EscapeKeyValue("c") != EscapeKeyValue("a") + "/" + EscapeKeyValue("b/c"),
        "EscapeKeyValue: a '/' inside a value never reads as the separator");
  return unit::Done();
}
