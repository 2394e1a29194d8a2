// How the postgres sink keeps a conninfo's password out of its messages (src/sinks/postgres.cpp).
// Plain C++ over libpq's client library (no server headers); thread-safe.
#pragma once

#include <string>
#include <vector>

namespace statesman::sink {

// Every string that may be the password in `conninfo` (keyword/value or URI form, also when
// malformed), with their %-decodings.
std::vector<std::string> PasswordCandidates(const std::string &conninfo);

// `text` with every occurrence of each of `secrets` replaced by "********", longest first.
std::string RedactAll(std::string text, std::vector<std::string> secrets);

}  // namespace statesman::sink
