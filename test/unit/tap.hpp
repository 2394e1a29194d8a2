// A minimal TAP producer for the unit tests (test/unit/test_*.cpp, run by `make unit`): each
// check prints "ok N - name" or "not ok N - name" (with what was expected), Done() prints the
// plan "1..N" and returns the program's exit code (1 when a check failed).
//
//   CHECK(condition, name)
//   CHECK_EQ(actual, expected, name)          compared with ==, printed with <<
//   CHECK_THROWS(expression, sqlstate, name)  throws statesman::Error with that SQLSTATE
//   CHECK_NOTHROW(expression, name)
#pragma once

#include <exception>
#include <iostream>
#include <sstream>
#include <string>

#include "statesman/error.hpp"

namespace unit {

struct Tally {
  int run = 0;
  int failed = 0;
};

inline Tally &Counts() {
  static Tally tally;
  return tally;
}

inline bool Report(bool passed, const std::string &name, const std::string &why = {}) {
  Tally &t = Counts();
  t.run++;
  if (!passed) t.failed++;
  std::cout << (passed ? "ok " : "not ok ") << t.run << " - " << name << "\n";
  if (!passed && !why.empty()) std::cout << "#   " << why << "\n";
  return passed;
}

template <typename A, typename E>
bool ReportEqual(const A &actual, const E &expected, const std::string &name) {
  if (actual == expected) return Report(true, name);
  std::ostringstream why;
  why << "got: " << actual << "  expected: " << expected;
  return Report(false, name, why.str());
}

inline int Done() {
  const Tally &t = Counts();
  std::cout << "1.." << t.run << "\n";
  if (t.failed) std::cout << "# failed " << t.failed << " of " << t.run << "\n";
  return t.failed == 0 && t.run > 0 ? 0 : 1;
}

}  // namespace unit

#define CHECK(condition, name) ::unit::Report(static_cast<bool>(condition), (name), "condition: " #condition)
#define CHECK_EQ(actual, expected, name) ::unit::ReportEqual((actual), (expected), (name))
#define CHECK_THROWS(expression, sqlstate, name)                                                                       \
  do {                                                                                                                 \
    std::string unit_got_ = "no exception";                                                                            \
    try {                                                                                                              \
      (void)(expression);                                                                                              \
    } catch (const ::statesman::Error &e) {                                                                            \
      unit_got_ = std::string("Error ") + e.Sqlstate() + ": " + e.what();                                              \
      if (std::string(e.Sqlstate()) == (sqlstate)) {                                                                   \
        ::unit::Report(true, (name));                                                                                  \
        break;                                                                                                         \
      }                                                                                                                \
    } catch (const std::exception &e) {                                                                                \
      unit_got_ = std::string("std::exception: ") + e.what();                                                          \
    }                                                                                                                  \
    ::unit::Report(false, (name), "expected Error " + std::string(sqlstate) + ", got " + unit_got_);                   \
  } while (0)
#define CHECK_NOTHROW(expression, name)                                                                                \
  do {                                                                                                                 \
    bool unit_threw_ = false;                                                                                          \
    std::string unit_got_;                                                                                             \
    try {                                                                                                              \
      (void)(expression);                                                                                              \
    } catch (const std::exception &e) {                                                                                \
      unit_threw_ = true;                                                                                              \
      unit_got_ = e.what();                                                                                            \
    }                                                                                                                  \
    ::unit::Report(!unit_threw_, (name), "threw: " + unit_got_);                                                       \
  } while (0)
