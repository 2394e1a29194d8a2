// The store's naming rules (docs/design.md §2): roots, paths, partitions, store names, canonical addresses.
// Pure C++: no PostgreSQL headers, thread-safe, throws statesman::Error on a broken rule.
#pragma once

#include <string>
#include <string_view>

namespace statesman::store {

inline constexpr std::size_t kMaxNameLength = 63;
inline constexpr std::size_t kMaxPathBytes = 1024;

// Throws 22004 when value is null and 22023 when it does not match ^[A-Za-z0-9_.-]{min,63}$.
void CheckName(const char *argument, const char *value, std::size_t min_length);

// Throws unless path is non-empty and at most 1024 bytes (and has no NUL, which text cannot hold).
void CheckPath(const char *path);

// Returns lower(root) || '/' || path, or lower(root) || '@' || partition || '/' || path.
// Validates every part first. A null partition counts as ''.
std::string CanonicalAddress(const char *root, const char *path, const char *partition);

// Lower-cases an ASCII name (roots are case-insensitive).
std::string LowerName(std::string_view name);

// Throws 22023 unless operation is "put" or "delete".
void CheckOperation(const char *operation);

// One key column's value as a segment of a captured row's path: '%' becomes "%25" and '/'
// becomes "%2F", and the empty value is "%00" (which no escaped value contains, text holding
// no NUL). Segments joined with '/' then never give the same path for distinct keys.
std::string EscapeKeyValue(std::string_view value);

}  // namespace statesman::store
