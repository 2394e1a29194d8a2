// The postgres sink keeps a conninfo's password out of its messages (src/sinks/postgres.cpp,
// include/statesman/sinks/postgres_redaction.hpp): the password candidates found in every
// form of conninfo, and their redaction from a text.
#include "statesman/sinks/postgres_redaction.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "tap.hpp"

using statesman::sink::PasswordCandidates;
using statesman::sink::RedactAll;

static bool Has(const std::vector<std::string> &v, const std::string &s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// `text` (which quotes the password) after redaction with the candidates of `conninfo`.
static std::string Redacted(const std::string &conninfo, const std::string &text) {
  return RedactAll(text, PasswordCandidates(conninfo));
}

int main() {
  CHECK(PasswordCandidates("host=h port=5432 dbname=d user=u").empty(), "no password, no candidate");
  CHECK(Has(PasswordCandidates("host=h password=s3cret dbname=d"), "s3cret"), "a bare password");
  CHECK(Has(PasswordCandidates("host=h password = s3cret"), "s3cret"), "a bare password after ' = '");
  auto quoted = PasswordCandidates("host=h password='pa ss\\'wd' dbname=d");
  CHECK(Has(quoted, "pa ss'wd"), "a quoted password, unescaped (as libpq reads it)");
  CHECK(Has(quoted, "pa ss\\'wd"), "a quoted password, as written");
  auto uri = PasswordCandidates("postgresql://alice:p%40ss@db.example/app");
  CHECK(Has(uri, "p%40ss") && Has(uri, "p@ss"), "a URI's user:password@, as written and %-decoded");
  CHECK(Has(PasswordCandidates("postgres://bob:hunter2@h/db"), "hunter2"), "the postgres:// scheme too");
  CHECK(PasswordCandidates("postgresql://alice@h/db").empty(), "a URI with a user and no password");
  CHECK(Has(PasswordCandidates("postgresql://h/db?password=abc&sslmode=require"), "abc"),
        "a URI's password query parameter, up to &");
  auto malformed = PasswordCandidates("password=two words host=h");
  CHECK(Has(malformed, "two") && Has(malformed, "words"),
        "password=two words (malformed): both words, as libpq's message would quote the second");
  CHECK(!Has(PasswordCandidates("password=abc sslmode=require"), "sslmode"),
        "a further key=value is not taken for part of the password");
  CHECK(!Has(PasswordCandidates("password=abc host"), "host"), "nor is a bare libpq keyword");

  CHECK_EQ(Redacted("host=h password=s3cret", "connection to h failed: password s3cret is wrong"),
           std::string("connection to h failed: password ******** is wrong"), "RedactAll: the password is replaced");
  CHECK_EQ(Redacted("host=h password=s3cret", "s3cret and s3cret"), std::string("******** and ********"),
           "RedactAll: every occurrence");
  CHECK_EQ(Redacted("postgresql://alice:p%40ss@h/db", "bad password \"p@ss\" (p%40ss)"),
           std::string("bad password \"********\" (********)"), "RedactAll: decoded and encoded forms");
  CHECK_EQ(RedactAll("abcdef", {"abc", "abcdef"}), std::string("********"),
           "RedactAll: longest first, so no part of a longer secret survives");
  CHECK_EQ(RedactAll("nothing secret", {}), std::string("nothing secret"), "RedactAll: no secrets, text unchanged");
  CHECK_EQ(RedactAll("text", {""}), std::string("text"), "RedactAll: an empty secret changes nothing");
  return unit::Done();
}
