// Naming rules of the store (docs/design.md §2). Kept free of PostgreSQL so they can be unit-reasoned
// about on their own and reused by sink code.
#include "statesman/store/names.hpp"

#include <cstring>

#include "statesman/error.hpp"

namespace statesman::store {
namespace {

bool IsNameChar(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

}  // namespace

void CheckName(const char *argument, const char *value, std::size_t min_length) {
  if (value == nullptr) throw Error(sqlstate::kNullValueNotAllowed, std::string(argument) + " must not be NULL");
  std::size_t length = std::strlen(value);
  if (length < min_length || length > kMaxNameLength)
    throw Error(sqlstate::kInvalidParameterValue,
                std::string(argument) + " must be " + (min_length ? "1" : "0") + " to 63 characters long",
                "Names match ^[A-Za-z0-9_.-]{" + std::to_string(min_length) + ",63}$.");
  for (std::size_t i = 0; i < length; ++i) {
    if (!IsNameChar(static_cast<unsigned char>(value[i])))
      throw Error(sqlstate::kInvalidParameterValue,
                  std::string(argument) + " may contain only letters A-Z and a-z, digits, '_', '.' and '-'",
                  "Names match ^[A-Za-z0-9_.-]{" + std::to_string(min_length) + ",63}$.");
  }
}

void CheckPath(const char *path) {
  if (path == nullptr) throw Error(sqlstate::kNullValueNotAllowed, "path must not be NULL");
  std::size_t length = std::strlen(path);
  if (length == 0) throw Error(sqlstate::kInvalidParameterValue, "path must not be empty");
  if (length > kMaxPathBytes)
    throw Error(sqlstate::kInvalidParameterValue,
                "path must be at most 1024 bytes long (it is " + std::to_string(length) + ")");
}

std::string LowerName(std::string_view name) {
  std::string lowered(name);
  for (char &c : lowered) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return lowered;
}

std::string CanonicalAddress(const char *root, const char *path, const char *partition) {
  CheckName("root", root, 1);
  CheckPath(path);
  if (partition == nullptr)
    throw Error(sqlstate::kNullValueNotAllowed, "partition must not be NULL", "Use '' for no partition.");
  CheckName("partition", partition, 0);

  std::string address = LowerName(root);
  if (*partition != '\0') {
    address += '@';
    address += partition;
  }
  address += '/';
  address += path;
  return address;
}

void CheckOperation(const char *operation) {
  if (operation == nullptr) throw Error(sqlstate::kNullValueNotAllowed, "operation must not be NULL");
  if (std::strcmp(operation, "put") != 0 && std::strcmp(operation, "delete") != 0)
    throw Error(sqlstate::kInvalidParameterValue,
                std::string("operation must be 'put' or 'delete', not '") + operation + "'");
}

std::string EscapeKeyValue(std::string_view value) {
  if (value.empty()) return "%00";
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '%')
      out += "%25";
    else if (c == '/')
      out += "%2F";
    else
      out += c;
  }
  return out;
}

}  // namespace statesman::store
