// statesman::Error — a user-facing error raised by C++ code that never sees postgres.h.
// The entry guard (include/statesman/pg/guard.hpp) turns it into ereport(ERROR) with its SQLSTATE.
#pragma once

#include <stdexcept>
#include <string>

namespace statesman {

// SQLSTATEs used by the store's rules (PostgreSQL's names in comments).
namespace sqlstate {
inline constexpr const char *kInvalidParameterValue = "22023";  // invalid_parameter_value
inline constexpr const char *kNullValueNotAllowed = "22004";    // null_value_not_allowed
inline constexpr const char *kStringTooLong = "22001";          // string_data_right_truncation
inline constexpr const char *kUniqueViolation = "23505";        // unique_violation
inline constexpr const char *kObjectNotInPrerequisiteState = "55000";
inline constexpr const char *kProgramLimitExceeded = "54000";
inline constexpr const char *kInternalError = "XX000";
}  // namespace sqlstate

class Error : public std::runtime_error {
 public:
  Error(const char *sqlstate, const std::string &message, std::string hint = {})
      : std::runtime_error(message), sqlstate_(sqlstate), hint_(std::move(hint)) {}

  const char *Sqlstate() const noexcept { return sqlstate_; }
  const std::string &Hint() const noexcept { return hint_; }

 private:
  const char *sqlstate_;
  std::string hint_;
};

}  // namespace statesman
