// The `postgres` sink (a remote PostgreSQL, libpq): see docs/design.md §6 and docs/sinks.md.
//
// A page is one remote transaction, sent in one round trip with libpq's pipeline mode: BEGIN,
// prepared multi-row `INSERT … VALUES … ON CONFLICT (message_id) DO NOTHING`, COMMIT, Sync.
// While the pages follow each other on one connection and each was inserted whole (nothing of
// it was there already), the next is sent as a plain INSERT, which spares the remote the check
// for a conflicting row before each insert (about a fifth of its work): should a message be
// there after all (23505), the transaction is rolled back and the page sent again with ON
// CONFLICT, in the same call. A page after a new connection, a failure or a page that was
// partly there goes with ON CONFLICT at once. The page is cut into chunks whose sizes are powers
// of two up to 256 rows, so a connection prepares at most nine statements of each kind whatever
// the page sizes. Measured on 1,000-message
// pages this beat one INSERT … SELECT FROM unnest() of array parameters (text or binary), COPY
// into a temporary table followed by INSERT … SELECT, and one unprepared VALUES list
// (docs/sinks.md has the figures).
//
// All I/O is non-blocking and waits through WaitSocket, inside the Budget (the dispatcher's deadline:
// timeout_ms, or less before the lease would expire), so a hung server, a SIGTERM or the postmaster's death never holds
// the dispatcher. Any error or timeout drops the connection: the next Publish reconnects, and a page whose COMMIT went
// unanswered is sent again, where the remote table deduplicates it.
//
// The conninfo's password never leaves this file: messages name the target by host, port and
// database only, and libpq's and the server's texts are redacted (the password, and every part
// of the conninfo that is not a known keyword or the value of one without secrets).
//
// An outbox of a role that is not a superuser connects only with its conninfo's password, and
// only when the server asked for it (postgres_fdw's password_required; see CheckOptions).
//
// Not thread-safe: one PostgresSink is used by one thread at a time (its dispatcher's).
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include "statesman/error.hpp"
#include "statesman/sinks/io.hpp"
#include "statesman/sinks/postgres_redaction.hpp"

namespace statesman::sink {
namespace {

constexpr const char *kSinkName = "postgres";
constexpr const char *kDefaultTable = "statesman.delivered";
constexpr int kMaxChunkLog2 = 8;            // chunks of 1, 2, 4, … 256 rows
constexpr size_t kMaxIdentifierBytes = 63;  // NAMEDATALEN - 1: longer names would be truncated

[[noreturn]] void Invalid(const std::string &message, std::string hint = {}) {
  throw Error(sqlstate::kInvalidParameterValue, std::string("sink \"postgres\": ") + message, std::move(hint));
}

// ---- conninfo and its secrets -----------------------------------------------------------------

using ConninfoOptions = std::unique_ptr<PQconninfoOption, void (*)(PQconninfoOption *)>;

std::string PercentDecode(const std::string &s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Whether `word` is one of libpq's connection keywords.
bool IsConninfoKeyword(const std::string &word) {
  static const std::vector<std::string> keywords = [] {
    std::vector<std::string> all;
    ConninfoOptions options(PQconninfoParse("", nullptr), PQconninfoFree);  // every keyword, no value
    for (const PQconninfoOption *o = options.get(); o && o->keyword; o++) all.emplace_back(o->keyword);
    return all;
  }();
  return std::find(keywords.begin(), keywords.end(), word) != keywords.end();
}

// Keywords whose values are secrets: never shown, whatever the form.
bool IsSecretKeyword(const std::string &word) { return word == "password" || word == "sslpassword"; }

// A keyword whose value may be shown: one of libpq's, and not a secret.
bool IsSafeKeyword(const std::string &word) { return IsConninfoKeyword(word) && !IsSecretKeyword(word); }

// The words of `text` between white space and "=", as libpq cuts a keyword/value conninfo
// when it quotes a part that it could not read ("missing \"=\" after \"…\"").
std::vector<std::string> Pieces(const std::string &text) {
  std::vector<std::string> out;
  std::string piece;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '=') {
      if (!piece.empty()) out.push_back(piece);
      piece.clear();
    } else {
      piece += c;
    }
  }
  if (!piece.empty()) out.push_back(piece);
  return out;
}

// Every part of `conninfo` that is not a known libpq keyword or the value of a keyword that
// holds no secret (host, port, dbname, user, sslmode, …): the values of password and
// sslpassword, every part of an unknown (e.g. misspelled) keyword, and everything from the
// first place the conninfo stops being well formed (`passwordSECRET` without "=", an
// unterminated quote, a URI parameter without "=", a URI port that is not a number, which is
// what a password becomes when the "@" is missing). A value is returned whole (its pieces would
// be short strings that the redaction would find in unrelated words); what follows the place
// where a keyword/value conninfo stops being well formed is returned word by word, as libpq
// quotes it.
std::vector<std::string> UnsafeTokens(const std::string &conninfo) {
  std::vector<std::string> unsafe;
  auto add = [&unsafe](const std::string &s) {
    if (!s.empty()) unsafe.push_back(s);
  };
  auto add_rest = [&](const std::string &rest) {
    for (const std::string &p : Pieces(rest))
      if (!IsSafeKeyword(p)) add(p);
  };
  const size_t n = conninfo.size();
  auto space = [&conninfo](size_t i) { return std::isspace(static_cast<unsigned char>(conninfo[i])) != 0; };

  for (const char *scheme : {"postgresql://", "postgres://"}) {
    const size_t len = std::strlen(scheme);
    if (conninfo.compare(0, len, scheme) != 0) continue;
    // libpq: user[:password]@ when an "@" comes before the first "/".
    size_t at = conninfo.find_first_of("@/", len), host_from = len;
    if (at != std::string::npos && conninfo[at] == '@') {
      std::string userinfo = conninfo.substr(len, at - len);
      size_t colon = userinfo.find(':');
      if (colon != std::string::npos) add(userinfo.substr(colon + 1));
      host_from = at + 1;
    }
    size_t host_end = std::min(conninfo.find_first_of("/?", host_from), n);
    std::string hosts = conninfo.substr(host_from, host_end - host_from);
    for (size_t from = 0; from <= hosts.size();) {
      size_t comma = std::min(hosts.find(',', from), hosts.size());
      std::string item = hosts.substr(from, comma - from);
      size_t port_at = item[0] == '[' ? item.find(']') : 0;
      if (port_at == std::string::npos) {
        add(item);  // an unterminated IPv6 address
      } else {
        size_t colon = item.find(':', port_at);
        if (colon != std::string::npos) {
          std::string port = item.substr(colon + 1);
          if (port.find_first_not_of("0123456789") != std::string::npos) add(port);
        } else if (port_at > 0 && port_at + 1 < item.size()) {
          add(item.substr(port_at + 1));
        }
      }
      from = comma + 1;
    }
    size_t query = conninfo.find('?', host_end);
    if (query == std::string::npos) return unsafe;
    for (size_t from = query + 1; from <= n;) {
      size_t amp = std::min(conninfo.find('&', from), n);
      std::string param = conninfo.substr(from, amp - from);
      size_t eq = param.find('=');
      if (eq == std::string::npos || param.find('=', eq + 1) != std::string::npos) {
        add(param);
      } else {
        std::string key = PercentDecode(param.substr(0, eq)), value = param.substr(eq + 1);
        if (!IsConninfoKeyword(key) && key != "ssl") add(param.substr(0, eq));
        if (!IsSafeKeyword(key) && key != "ssl") {
          add(value);
          add(PercentDecode(value));
        }
      }
      from = amp + 1;
    }
    return unsafe;
  }

  // keyword = value pairs, read as libpq's conninfo_parse reads them.
  for (size_t i = 0; i < n;) {
    while (i < n && space(i)) i++;
    if (i >= n) break;
    size_t key_from = i;
    while (i < n && !space(i) && conninfo[i] != '=') i++;
    std::string key = conninfo.substr(key_from, i - key_from);
    while (i < n && space(i)) i++;
    if (i >= n || conninfo[i] != '=') {
      add_rest(conninfo.substr(key_from));
      break;
    }
    i++;
    while (i < n && space(i)) i++;
    std::string raw, value;
    bool closed = true;
    if (i < n && conninfo[i] == '\'') {
      closed = false;
      for (i++; i < n; i++) {
        if (conninfo[i] == '\\' && i + 1 < n) {
          raw += conninfo[i++];
        } else if (conninfo[i] == '\'') {
          closed = true;
          i++;
          break;
        }
        raw += conninfo[i];
        value += conninfo[i];
      }
    } else {
      for (; i < n && !space(i); i++) {
        if (conninfo[i] == '\\' && i + 1 < n) raw += conninfo[i++];
        raw += conninfo[i];
        value += conninfo[i];
      }
    }
    if (!IsConninfoKeyword(key)) add(key);
    if (!closed || !IsSafeKeyword(key)) {
      add(raw);
      add(value);
    }
    if (!closed) break;
  }
  return unsafe;
}

}  // namespace

// Declared in statesman/sinks/postgres_redaction.hpp (for the unit tests).
// Every string that may be the password in `conninfo`, found by reading it the way libpq does but
// without trusting it to be well formed (a malformed conninfo still must not leak through
// libpq's message): the value after each `password =` (quoted, bare, each further bare word up to
// the next `key=` or keyword, up to `&` in a URI query), a URI's `user:password@`, and their
// %-decodings.
std::vector<std::string> PasswordCandidates(const std::string &conninfo) {
  std::vector<std::string> found;
  auto add = [&found](const std::string &s) {
    if (s.empty()) return;
    found.push_back(s);
    std::string decoded = PercentDecode(s);
    if (decoded != s && !decoded.empty()) found.push_back(decoded);
  };
  auto space = [&conninfo](size_t i) { return std::isspace(static_cast<unsigned char>(conninfo[i])) != 0; };
  const size_t n = conninfo.size();
  for (size_t at = conninfo.find("password"); at != std::string::npos; at = conninfo.find("password", at + 1)) {
    size_t p = at + 8;
    while (p < n && space(p)) p++;
    if (p >= n || conninfo[p] != '=') continue;
    p++;
    while (p < n && space(p)) p++;
    if (p < n && conninfo[p] == '\'') {
      std::string raw, value;
      size_t q = p + 1;
      for (; q < n && conninfo[q] != '\''; q++) {
        if (conninfo[q] == '\\' && q + 1 < n) raw += conninfo[q++];
        raw += conninfo[q];
        value += conninfo[q];
      }
      add(raw);
      add(value);
      continue;
    }
    size_t end = p;
    while (end < n && !space(end)) end++;
    add(conninfo.substr(p, end - p));
    size_t amp = conninfo.find('&', p);
    if (amp < end) add(conninfo.substr(p, amp - p));
    // `password=two words` is malformed, and libpq's message would quote the second word.
    for (size_t w = end; w < n;) {
      while (w < n && space(w)) w++;
      size_t e = w;
      while (e < n && !space(e) && conninfo[e] != '=') e++;
      if (w == e || (e < n && conninfo[e] == '=') || IsConninfoKeyword(conninfo.substr(w, e - w))) break;
      add(conninfo.substr(w, e - w));
      w = e;
    }
  }
  for (const char *scheme : {"postgresql://", "postgres://"}) {
    const size_t len = std::strlen(scheme);
    if (conninfo.compare(0, len, scheme) != 0) continue;
    size_t end = conninfo.find_first_of("@/", len);  // libpq looks for '@' before the first '/'
    if (end == std::string::npos || conninfo[end] != '@') continue;
    size_t colon = conninfo.find(':', len);
    if (colon < end) add(conninfo.substr(colon + 1, end - colon - 1));
  }
  for (const std::string &t : UnsafeTokens(conninfo)) found.push_back(t);
  return found;
}

// libpq's complaint about a conninfo it could not read quotes the parts it could not read
// ("missing \"=\" after \"…\"", "invalid URI query parameter: \"…\"", the whole URI):
// every quoted part is redacted unless it is a known keyword or one of the complaint's own
// quoted characters.
std::string RedactQuoted(const std::string &text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    size_t open = text.find('"', i);
    size_t close = open == std::string::npos ? std::string::npos : text.find('"', open + 1);
    if (close == std::string::npos) {
      out += text.substr(i);
      break;
    }
    std::string quoted = text.substr(open + 1, close - open - 1);
    bool keep = IsConninfoKeyword(quoted) || quoted == "=" || quoted == ":" || quoted == "/" || quoted == "]" ||
                quoted == "********";
    out += text.substr(i, open + 1 - i) + (keep ? quoted : std::string("********")) + "\"";
    i = close + 1;
  }
  return out;
}

// Redacts every secret in `text`, longest first (so no part of a longer one survives).
std::string RedactAll(std::string text, std::vector<std::string> secrets) {
  std::sort(secrets.begin(), secrets.end(),
            [](const std::string &a, const std::string &b) { return a.size() > b.size(); });
  for (const std::string &s : secrets) text = Redact(std::move(text), s);
  return text;
}

namespace {

// libpq's and the server's messages end in newlines and may span lines ("\n\tIs the server
// running…", DETAIL, HINT): one line, single-spaced, reads better in last_error and the log.
std::string OneLine(const char *text) {
  std::string out;
  bool pending_space = false;
  for (const char *p = text ? text : ""; *p; p++) {
    if (*p == '\n' || *p == '\r' || *p == '\t') {
      pending_space = true;
      continue;
    }
    if (pending_space && !out.empty() && out.back() != ' ') out += ' ';
    pending_space = false;
    out += *p;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Parses `conninfo` as libpq would; throws Error 22023 with libpq's message, redacted.
ConninfoOptions ParseConninfo(const std::string &conninfo) {
  char *message = nullptr;
  ConninfoOptions options(PQconninfoParse(conninfo.c_str(), &message), PQconninfoFree);
  if (!options) {
    std::string why = message ? OneLine(message) : "out of memory";
    PQfreemem(message);
    Invalid("option \"conninfo\" is not a valid connection string: " +
                RedactQuoted(RedactAll(why, PasswordCandidates(conninfo))),
            "Use libpq's keyword/value form (\"host=… port=… dbname=… user=…\") or a postgresql:// URI.");
  }
  return options;
}

std::optional<std::string> ConninfoValue(const PQconninfoOption *options, const char *keyword) {
  for (const PQconninfoOption *o = options; o->keyword; o++)
    if (std::strcmp(o->keyword, keyword) == 0 && o->val && *o->val) return std::string(o->val);
  return std::nullopt;
}

// ---- the target table -------------------------------------------------------------------------

struct TableName {
  std::string schema, table;  // as PostgreSQL names them (unquoted, case folded)
};

// One identifier of `text` from `at`: "quoted" (with "" for a quote) or bare (letters, digits,
// _ and $, not starting with a digit or $; folded to lower case, as PostgreSQL does for ASCII).
std::optional<std::string> ParseIdentifier(const std::string &text, size_t &at) {
  std::string name;
  if (at < text.size() && text[at] == '"') {
    for (at++; at < text.size(); at++) {
      if (text[at] == '"') {
        if (at + 1 < text.size() && text[at + 1] == '"') {
          name += '"';
          at++;
          continue;
        }
        at++;
        if (name.empty()) return std::nullopt;
        return name;
      }
      if (text[at] == '\0') return std::nullopt;
      name += text[at];
    }
    return std::nullopt;  // unterminated
  }
  auto bare = [](char c, bool first) {
    unsigned char u = static_cast<unsigned char>(c);
    return std::isalpha(u) || c == '_' || u >= 0x80 || (!first && (std::isdigit(u) || c == '$'));
  };
  for (; at < text.size() && bare(text[at], name.empty()); at++)
    name += static_cast<char>(std::tolower(static_cast<unsigned char>(text[at])));
  if (name.empty()) return std::nullopt;
  return name;
}

// `schema.table`, each part quoted or bare, spaces allowed around them (as parse_ident(), which
// the table sink uses); nullopt unless it is exactly that.
std::optional<TableName> ParseTableName(const std::string &text) {
  size_t at = 0;
  auto skip_spaces = [&]() {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) at++;
  };
  skip_spaces();
  auto schema = ParseIdentifier(text, at);
  skip_spaces();
  if (!schema || at >= text.size() || text[at] != '.') return std::nullopt;
  at++;
  skip_spaces();
  auto table = ParseIdentifier(text, at);
  skip_spaces();
  if (!table || at != text.size()) return std::nullopt;
  return TableName{*schema, *table};
}

std::string QuoteIdentifier(const std::string &name) {
  std::string out = "\"";
  for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

TableName CheckedTableName(const std::string &text) {
  auto name = ParseTableName(text);
  if (!name)
    Invalid("option \"table\" must be a schema-qualified table name, e.g. \"statesman.delivered\"",
            "Write schema.table; quote a part that needs it: \"My Schema\".\"my table\".");
  if (name->schema.size() > kMaxIdentifierBytes || name->table.size() > kMaxIdentifierBytes)
    Invalid("option \"table\": a name is longer than 63 bytes");
  return *name;
}

// The remote table's state, one row: does the schema exist, the table's relkind (NULL when
// absent), how many of the three columns it has, and whether message_id alone has a plain
// unique index (ON CONFLICT (message_id) needs one). Operators are qualified: the remote
// search_path may hold objects of other users.
constexpr const char *kTableStateSql =
    "SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name), "
    "c.relkind, "
    "(SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute a "
    "  WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid AND a.attnum OPERATOR(pg_catalog.>) 0 "
    "    AND NOT a.attisdropped "
    "    AND a.attname OPERATOR(pg_catalog.=) ANY ('{message_id,global_position,message}'::pg_catalog.name[])), "
    "EXISTS (SELECT FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a "
    "          ON a.attrelid OPERATOR(pg_catalog.=) i.indrelid "
    "         AND a.attnum OPERATOR(pg_catalog.=) i.indkey[0] "
    "  WHERE i.indrelid OPERATOR(pg_catalog.=) c.oid AND i.indisunique AND i.indimmediate "
    "    AND i.indnkeyatts OPERATOR(pg_catalog.=) 1 AND i.indpred IS NULL AND i.indexprs IS NULL "
    "    AND a.attname OPERATOR(pg_catalog.=) 'message_id'::pg_catalog.name) "
    "FROM (SELECT) AS one "
    "LEFT JOIN (pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
    "             ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
    "            AND n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name) "
    "  ON c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.name";

// ---- options ----------------------------------------------------------------------------------

// The password rule of postgres_fdw (its check_conn_params and connect_pg_server): the sink
// connects as the server's OS user, whom trust, peer or a password file may let in as any role,
// a superuser included. So an outbox last created or altered by a role that is not a superuser
// must give a password in its conninfo, and the server must have asked for it. A superuser may
// waive the rule for an outbox with "password_required": false. statesman._check_sink_role
// applies it at create_outbox and alter_outbox; the dispatcher passes the rule's verdict for the
// outbox's current role as "password_required" to every connection (statesman._sink_options_to_use).
constexpr const char *kPasswordRequired = "password_required";
constexpr const char *kPasswordHint =
    "Give the remote role's password in the conninfo and have the remote server ask for it "
    "(scram-sha-256 or md5 in pg_hba.conf), or have a superuser create or alter the outbox, "
    "or set sink option \"password_required\" to false.";

std::string CheckOptions(const std::string &options_json) {
  nlohmann::json o = ParseOptions(kSinkName, options_json, {"conninfo", "table", "timeout_ms", kPasswordRequired});
  nlohmann::json out = nlohmann::json::object();
  auto conninfo = StringOption(kSinkName, o, "conninfo");
  if (!conninfo)
    Invalid("option \"conninfo\" is required",
            "Give a libpq connection string, e.g. \"host=db.example port=5432 dbname=app user=statesman\".");
  ParseConninfo(*conninfo);
  out["conninfo"] = *conninfo;
  std::string table = StringOption(kSinkName, o, "table").value_or(kDefaultTable);
  CheckedTableName(table);
  out["table"] = table;
  // Without timeout_ms, the dispatcher gives each call 5 s, or half the lease when that is less.
  if (auto t = IntOption(kSinkName, o, "timeout_ms", 1, 3600000)) out["timeout_ms"] = *t;
  // Stored only when waived (true is the rule); who may waive it is checked in SQL.
  if (auto it = o.find(kPasswordRequired); it != o.end()) {
    if (it->is_null())
      throw Error(sqlstate::kNullValueNotAllowed, "sink \"postgres\": option \"password_required\" must not be null");
    if (!it->is_boolean()) Invalid("option \"password_required\" must be true or false");
    if (!it->get<bool>()) out[kPasswordRequired] = false;
  }
  return out.dump();
}

// Whether the conninfo of checked options gives a password (not empty) of its own.
bool GivesPassword(const std::string &options_json) {
  nlohmann::json o = nlohmann::json::parse(options_json, nullptr, false);
  if (!o.is_object() || !o.contains("conninfo") || !o["conninfo"].is_string()) return false;
  ConninfoOptions parsed = ParseConninfo(o["conninfo"].get<std::string>());
  return ConninfoValue(parsed.get(), "password").has_value();
}

// ---- the sink ---------------------------------------------------------------------------------

// How messages name the remote: never by user or password.
std::string Where(const std::optional<std::string> &host, const std::optional<std::string> &port,
                  const std::optional<std::string> &dbname) {
  return "host=" + host.value_or("(default)") + " port=" + port.value_or("(default)") +
         " dbname=" + dbname.value_or("(default)");
}

using Result = std::unique_ptr<PGresult, void (*)(PGresult *)>;

void IgnoreNotice(void *, const char *) {}  // NOTICEs (e.g. "already exists, skipping") are noise

class PostgresSink : public Sink {
 public:
  explicit PostgresSink(const std::string &options_json);
  Outcome Publish(const std::vector<Message> &page, const Budget &budget) override {
    Start(page, budget);
    return Finish();
  }
  // Start connects when needed and sends the page's pipeline (what the socket takes at once);
  // Finish sends the rest and reads the answers.
  void Start(const std::vector<Message> &page, const Budget &budget) override;
  Outcome Finish() override;

 private:
  struct Failure {
    std::string message;  // already "postgres sink: {target}: …" and redacted
  };

  [[noreturn]] void Fail(const std::string &what) const;
  std::string LibpqError() const { return OneLine(PQerrorMessage(conn_.get())); }
  void Drop();
  void Describe();
  bool Alive();
  void Connect(const Budget &b);
  void PrepareTable(const Budget &b);
  void SendPage(const std::vector<Message> &page, bool plain);
  std::optional<int64_t> ReceivePage(const Budget &b);
  void SkipToSync(const Budget &b, const char *doing);

  // Pipeline plumbing: send what is buffered; take the next result; take one command's result.
  void Wait(bool read, bool write, const Budget &b, const char *doing);
  void Flush(const Budget &b, const char *doing);
  Result Next(const Budget &b, const char *doing);
  Result Take(const Budget &b, ExecStatusType want, const char *doing);
  Result Expect(Result r, const Budget &b, ExecStatusType want, const char *doing);
  void Sent(int ok, const char *doing) const {
    if (!ok) Fail(std::string(doing) + ": " + LibpqError());
  }

  std::string conninfo_;
  bool password_required_ = true;  // the connection must have used the conninfo's password
  bool gives_password_ = false;    // the conninfo has a password
  TableName name_;
  std::string target_;  // "schema"."table", quoted
  std::vector<std::string> secrets_;
  std::string where_;  // host=… port=… dbname=…, for messages

  std::unique_ptr<PGconn, void (*)(PGconn *)> conn_{nullptr, PQfinish};
  bool table_ready_ = false;       // the table was created or checked on conn_
  uint32_t prepared_[2] = {0, 0};  // [plain] bit k: the statement for 2^k rows is prepared on conn_
  bool plain_next_ = false;        // the next page may go as a plain INSERT (see the top)
  Clock::time_point started_;
  // Between Start and Finish:
  const std::vector<Message> *page_ = nullptr;
  Budget budget_;
  bool in_flight_ = false;   // the page's pipeline was sent; its answers are not read yet
  std::vector<int> chunks_;  // log2 of each chunk's size, largest first
  uint32_t preparing_ = 0;   // statements prepared in this pipeline
  bool sent_plain_ = false;  // the page was sent as plain INSERTs
  std::optional<Outcome> start_failure_;
};

PostgresSink::PostgresSink(const std::string &options_json) {
  nlohmann::json o = nlohmann::json::parse(options_json);
  conninfo_ = o.at("conninfo").get<std::string>();
  name_ = CheckedTableName(o.value("table", std::string(kDefaultTable)));
  target_ = QuoteIdentifier(name_.schema) + "." + QuoteIdentifier(name_.table);
  // Absent means required: only an explicit false, which the dispatcher passes when the rule
  // does not apply to the outbox, lets a connection log in without the conninfo's password.
  password_required_ =
      !(o.contains(kPasswordRequired) && o[kPasswordRequired].is_boolean() && !o[kPasswordRequired].get<bool>());
  secrets_ = PasswordCandidates(conninfo_);
  ConninfoOptions parsed = ParseConninfo(conninfo_);
  if (auto password = ConninfoValue(parsed.get(), "password")) {
    secrets_.push_back(*password);
    gives_password_ = true;
  }
  auto host = ConninfoValue(parsed.get(), "host");
  if (!host) host = ConninfoValue(parsed.get(), "hostaddr");
  where_ = Where(host, ConninfoValue(parsed.get(), "port"), ConninfoValue(parsed.get(), "dbname"));
}

void PostgresSink::Fail(const std::string &what) const {
  throw Failure{"postgres sink: " + RedactAll(where_ + ": " + what, secrets_)};
}

// The host, port and database libpq is connecting to (defaults filled in), for messages.
void PostgresSink::Describe() {
  auto value = [](const char *v) { return v && *v ? std::optional<std::string>(v) : std::nullopt; };
  where_ = Where(value(PQhost(conn_.get())), value(PQport(conn_.get())), value(PQdb(conn_.get())));
}

void PostgresSink::Drop() {
  conn_.reset();  // PQfinish: on a non-blocking connection it never waits
  table_ready_ = false;
  prepared_[0] = prepared_[1] = 0;
  plain_next_ = false;
}

// False when the idle connection is known to be gone (the server restarted, or ended the
// session): then a page can be sent on a new one instead of failing once on the old one.
bool PostgresSink::Alive() {
  for (int i = 0; i < 2; i++)  // the second read sees an EOF that followed the server's last message
    if (PQstatus(conn_.get()) != CONNECTION_OK || !PQconsumeInput(conn_.get())) return false;
  return PQstatus(conn_.get()) == CONNECTION_OK && PQpipelineStatus(conn_.get()) == PQ_PIPELINE_ON;
}

void PostgresSink::Wait(bool read, bool write, const Budget &b, const char *doing) {
  int fd = PQsocket(conn_.get());
  if (fd < 0) Fail(std::string(doing) + ": the connection has no socket");
  switch (WaitSocket(fd, read, write, b)) {
    case WaitResult::kReady: return;
    case WaitResult::kTimedOut: {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_).count();
      Fail("timed out after " + std::to_string(ms) + " ms while " + doing);
    }
    case WaitResult::kCancelled: Fail(std::string("cancelled while ") + doing);
    case WaitResult::kFailed: Fail(std::string(doing) + ": " + std::strerror(errno));
  }
}

void PostgresSink::Connect(const Budget &b) {
  Drop();
  // Checked before libpq could fall back on a password file or PGPASSWORD of the server's user.
  if (password_required_ && !gives_password_)
    Fail(std::string("password is required (SQLSTATE 2F003): the outbox was last created or altered by a role "
                     "that is not a superuser, and its conninfo gives no password. ") +
         kPasswordHint);
  // fallback_application_name: 'statesman' unless the conninfo names one.
  const char *keywords[] = {"fallback_application_name", "dbname", nullptr};
  const char *values[] = {"statesman", conninfo_.c_str(), nullptr};
  conn_.reset(PQconnectStartParams(keywords, values, 1));
  if (!conn_) Fail("could not connect: out of memory");
  if (PQstatus(conn_.get()) == CONNECTION_BAD) Fail("could not connect: " + LibpqError());
  Describe();
  PQsetNoticeProcessor(conn_.get(), IgnoreNotice, nullptr);
  // libpq's loop: start as if PQconnectPoll had asked to write.
  for (PostgresPollingStatusType st = PGRES_POLLING_WRITING; st != PGRES_POLLING_OK; st = PQconnectPoll(conn_.get())) {
    if (st == PGRES_POLLING_FAILED) Fail("could not connect: " + LibpqError());
    Wait(st == PGRES_POLLING_READING, st == PGRES_POLLING_WRITING, b, "connecting");
  }
  Describe();
  // postgres_fdw's second half: the server must have asked for the password. A connection that
  // got in by trust, peer, ident or a certificate is closed before it runs anything.
  if (password_required_ && !PQconnectionUsedPassword(conn_.get())) {
    Drop();
    Fail(std::string("password is required (SQLSTATE 2F003): the outbox was last created or altered by a role "
                     "that is not a superuser, and the server did not ask for the conninfo's password. ") +
         kPasswordHint);
  }
  if (const char *password = PQpass(conn_.get());
      password && *password && std::find(secrets_.begin(), secrets_.end(), password) == secrets_.end())
    secrets_.push_back(password);  // e.g. from a password file
  if (PQsetnonblocking(conn_.get(), 1) != 0 || !PQenterPipelineMode(conn_.get()))
    Fail("could not set up the connection: " + LibpqError());
}

void PostgresSink::Flush(const Budget &b, const char *doing) {
  for (;;) {
    int rc = PQflush(conn_.get());
    if (rc == 0) return;
    if (rc < 0) Fail(std::string(doing) + ": " + LibpqError());
    // The server may be waiting for us to read before it reads more (libpq's advice).
    Wait(true, true, b, doing);
    if (!PQconsumeInput(conn_.get())) Fail(std::string(doing) + ": " + LibpqError());
  }
}

Result PostgresSink::Next(const Budget &b, const char *doing) {
  for (;;) {
    if (!PQconsumeInput(conn_.get())) Fail(std::string(doing) + ": " + LibpqError());
    if (!PQisBusy(conn_.get())) return Result(PQgetResult(conn_.get()), PQclear);
    Wait(true, false, b, doing);
  }
}

// The server's error as one line: "ERROR: message DETAIL: … HINT: … (SQLSTATE xxxxx)", without
// the statement excerpt that PQresultErrorMessage adds. libpq's own errors have no fields.
std::string ServerError(const PGresult *r) {
  const char *primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  if (!primary) return OneLine(PQresultErrorMessage(r));
  const char *severity = PQresultErrorField(r, PG_DIAG_SEVERITY);
  std::string out = std::string(severity ? severity : "ERROR") + ": " + primary;
  if (const char *detail = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL)) out += std::string(" DETAIL: ") + detail;
  if (const char *hint = PQresultErrorField(r, PG_DIAG_MESSAGE_HINT)) out += std::string(" HINT: ") + hint;
  if (const char *sqlstate = PQresultErrorField(r, PG_DIAG_SQLSTATE))
    out += std::string(" (SQLSTATE ") + sqlstate + ")";
  return OneLine(out.c_str());
}

Result PostgresSink::Take(const Budget &b, ExecStatusType want, const char *doing) {
  return Expect(Next(b, doing), b, want, doing);
}

Result PostgresSink::Expect(Result r, const Budget &b, ExecStatusType want, const char *doing) {
  if (!r) Fail(std::string(doing) + ": " + LibpqError());
  ExecStatusType status = PQresultStatus(r.get());
  if (status != want) {
    if (status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR)
      Fail(std::string(doing) + ": " + ServerError(r.get()));
    Fail(std::string(doing) + ": unexpected " + PQresStatus(status));
  }
  // In pipeline mode each command's results end with a NULL; a Sync's result has none.
  if (want != PGRES_PIPELINE_SYNC && Next(b, doing)) Fail(std::string(doing) + ": more results than expected");
  return r;
}

// Creates the schema and the table when absent and checks the table can take deliveries. Only
// what is missing is created: CREATE … IF NOT EXISTS would need the CREATE privilege even when
// the table is there.
void PostgresSink::PrepareTable(const Budget &b) {
  const char *doing = "checking the remote table";
  const char *params[2] = {name_.schema.c_str(), name_.table.c_str()};
  auto state = [&]() {
    Sent(PQsendQueryParams(conn_.get(), kTableStateSql, 2, nullptr, params, nullptr, nullptr, 0), doing);
    Sent(PQpipelineSync(conn_.get()), doing);
    Flush(b, doing);
    Result r = Take(b, PGRES_TUPLES_OK, doing);
    Take(b, PGRES_PIPELINE_SYNC, doing);
    if (PQntuples(r.get()) != 1) Fail(std::string(doing) + ": unexpected answer");
    return r;
  };
  Result r = state();
  if (PQgetisnull(r.get(), 0, 1)) {
    const char *creating = "creating the remote table";
    int commands = 0;
    if (std::strcmp(PQgetvalue(r.get(), 0, 0), "t") != 0) {
      std::string sql = "CREATE SCHEMA IF NOT EXISTS " + QuoteIdentifier(name_.schema);
      Sent(PQsendQueryParams(conn_.get(), sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0), creating);
      commands++;
    }
    std::string sql = "CREATE TABLE IF NOT EXISTS " + target_ +
                      " (message_id pg_catalog.text PRIMARY KEY,"
                      " global_position pg_catalog.int8 NOT NULL,"
                      " message pg_catalog.jsonb NOT NULL,"
                      " published_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now())";
    Sent(PQsendQueryParams(conn_.get(), sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0), creating);
    commands++;
    Sent(PQpipelineSync(conn_.get()), creating);  // one implicit transaction for both
    Flush(b, creating);
    for (int i = 0; i < commands; i++) Take(b, PGRES_COMMAND_OK, creating);
    Take(b, PGRES_PIPELINE_SYNC, creating);
    r = state();
  }
  std::string relkind = PQgetvalue(r.get(), 0, 1);
  if (relkind != "r" && relkind != "p") Fail("relation " + target_ + " is not a table");
  if (std::strcmp(PQgetvalue(r.get(), 0, 2), "3") != 0 || std::strcmp(PQgetvalue(r.get(), 0, 3), "t") != 0)
    Fail("table " + target_ +
         " cannot take deliveries: it needs columns message_id (with a unique index of its own), "
         "global_position and message");
  table_ready_ = true;
}

std::string InsertSql(const std::string &target, int rows, bool plain) {
  std::string sql = "INSERT INTO " + target + " (message_id, global_position, message) VALUES ";
  for (int i = 0; i < rows; i++) {
    std::string n = std::to_string(3 * i + 1), p = std::to_string(3 * i + 2), m = std::to_string(3 * i + 3);
    sql += (i ? ",($" : "($") + n + "::pg_catalog.text,$" + p + "::pg_catalog.int8,$" + m + "::pg_catalog.jsonb)";
  }
  return plain ? sql : sql + " ON CONFLICT (message_id) DO NOTHING";
}

std::string StatementName(int log2, bool plain) {
  return std::string(plain ? "statesman_sink_insert_plain_" : "statesman_sink_insert_") + std::to_string(1 << log2);
}

// One remote transaction in one round trip, as plain INSERTs or with ON CONFLICT. ReceivePage
// reads its answers.
void PostgresSink::SendPage(const std::vector<Message> &page, bool plain) {
  const char *doing = "sending the page";
  std::vector<int> &chunks = chunks_;
  chunks.clear();
  for (size_t left = page.size(); left > 0;) {
    int k = kMaxChunkLog2;
    while ((size_t{1} << k) > left) k--;
    chunks.push_back(k);
    left -= size_t{1} << k;
  }
  std::vector<std::string> positions;
  positions.reserve(page.size());
  std::vector<const char *> values;
  values.reserve(3 * page.size());
  for (const Message &m : page) {
    positions.push_back(std::to_string(m.position));
    values.push_back(m.id.c_str());
    values.push_back(positions.back().c_str());
    values.push_back(m.json.c_str());
  }

  PGconn *c = conn_.get();
  uint32_t preparing = 0;
  for (int k : chunks) {
    if ((prepared_[plain] | preparing) & (1u << k)) continue;
    Sent(PQsendPrepare(c, StatementName(k, plain).c_str(), InsertSql(target_, 1 << k, plain).c_str(), 0, nullptr),
         doing);
    preparing |= 1u << k;
  }
  Sent(PQsendQueryParams(c, "BEGIN", 0, nullptr, nullptr, nullptr, nullptr, 0), doing);
  size_t at = 0;
  for (int k : chunks) {
    const char *const *params = values.data() + 3 * at;
    Sent(PQsendQueryPrepared(c, StatementName(k, plain).c_str(), 3 << k, params, nullptr, nullptr, 0), doing);
    at += size_t{1} << k;
  }
  Sent(PQsendQueryParams(c, "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 0), doing);
  Sent(PQpipelineSync(c), doing);
  preparing_ = preparing;
  sent_plain_ = plain;
  // Hand the socket what it takes now; Finish sends the rest.
  if (PQflush(c) < 0) Fail(std::string(doing) + ": " + LibpqError());
}

// The answers of the page sent; returns how many rows it inserted. Anything short of the
// COMMIT's answer throws: the page may or may not be there, and is sent again later. nullopt: a
// plain page met a message the table holds already (23505); its transaction was rolled back
// and the connection is ready for the page again, with ON CONFLICT.
std::optional<int64_t> PostgresSink::ReceivePage(const Budget &b) {
  Flush(b, "sending the page");
  const std::vector<int> &chunks = chunks_;
  const uint32_t preparing = preparing_;
  const size_t page_size = page_->size();
  // The server answers at the Sync, all at once: until the COMMIT's answer is in, whether the
  // page is there is unknown.
  const char *waiting = "waiting for the page's transaction";
  for (int k = 0; k <= kMaxChunkLog2; k++)
    if (preparing & (1u << k)) Take(b, PGRES_COMMAND_OK, waiting);
  prepared_[sent_plain_] |= preparing;
  Take(b, PGRES_COMMAND_OK, waiting);  // BEGIN
  int64_t inserted = 0;
  for (size_t i = 0; i < chunks.size(); i++) {
    Result r = Next(b, waiting);
    if (sent_plain_ && r && PQresultStatus(r.get()) == PGRES_FATAL_ERROR) {
      const char *sqlstate = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
      if (sqlstate != nullptr && std::strcmp(sqlstate, "23505") == 0) {
        // The server skipped the rest of the pipeline; its transaction block is aborted.
        SkipToSync(b, waiting);
        const char *rolling_back = "rolling back a page that met a message already there";
        Sent(PQsendQueryParams(conn_.get(), "ROLLBACK", 0, nullptr, nullptr, nullptr, nullptr, 0), rolling_back);
        Sent(PQpipelineSync(conn_.get()), rolling_back);
        Flush(b, rolling_back);
        Take(b, PGRES_COMMAND_OK, rolling_back);
        Take(b, PGRES_PIPELINE_SYNC, rolling_back);
        return std::nullopt;
      }
    }
    r = Expect(std::move(r), b, PGRES_COMMAND_OK, waiting);
    inserted += std::strtoll(PQcmdTuples(r.get()), nullptr, 10);
  }
  Result commit = Take(b, PGRES_COMMAND_OK, waiting);
  if (std::strcmp(PQcmdStatus(commit.get()), "COMMIT") != 0)
    Fail(std::string("the page's transaction was not committed (") + PQcmdStatus(commit.get()) + ")");
  Take(b, PGRES_PIPELINE_SYNC, waiting);
  if (inserted < 0 || inserted > static_cast<int64_t>(page_size))
    Fail("the server reported " + std::to_string(inserted) + " rows inserted for a page of " +
         std::to_string(page_size));
  return inserted;
}

// After a command failed in a pipeline: reads the results of the commands the server skipped
// (PGRES_PIPELINE_ABORTED, each ended by a NULL) up to the Sync's.
void PostgresSink::SkipToSync(const Budget &b, const char *doing) {
  if (Next(b, doing)) Fail(std::string(doing) + ": more results than expected");  // the failed one's end
  for (;;) {
    Result r = Next(b, doing);
    if (!r) continue;
    ExecStatusType status = PQresultStatus(r.get());
    if (status == PGRES_PIPELINE_SYNC) return;
    if (status != PGRES_PIPELINE_ABORTED) Fail(std::string(doing) + ": unexpected " + PQresStatus(status));
  }
}

void PostgresSink::Start(const std::vector<Message> &page, const Budget &budget) {
  // A page started and never finished left answers on the connection: start afresh.
  if (in_flight_) Drop();
  in_flight_ = false;
  page_ = &page;
  start_failure_.reset();
  if (page.empty()) return;
  started_ = Clock::now();
  budget_ = budget;  // the caller's limit: timeout_ms, or less before the lease would expire
  const Budget &b = budget_;
  try {
    if (conn_ && !Alive()) Drop();
    if (!conn_) Connect(b);
    if (!table_ready_) PrepareTable(b);
    SendPage(page, plain_next_);
    in_flight_ = true;
  } catch (const Failure &f) {
    Drop();
    start_failure_ = Outcome{false, 0, 0, f.message};
  } catch (const std::exception &e) {
    Drop();
    start_failure_ = Outcome{false, 0, 0, "postgres sink: " + RedactAll(where_ + ": " + e.what(), secrets_)};
  }
}

Outcome PostgresSink::Finish() {
  Outcome out;
  const std::vector<Message> *page = page_;
  if (page == nullptr) {
    out.error = "postgres sink: Finish without Start";
    return out;
  }
  if (start_failure_) {
    page_ = nullptr;
    return *start_failure_;
  }
  if (page->empty()) {
    page_ = nullptr;
    out.ok = true;
    return out;
  }
  try {
    std::optional<int64_t> received = ReceivePage(budget_);
    if (!received) {  // a message was there already: the page again, with ON CONFLICT
      SendPage(*page, false);
      received = ReceivePage(budget_);
      if (!received) Fail("the page met a message already there although it was sent with ON CONFLICT");
    }
    int64_t inserted = *received;
    in_flight_ = false;
    // A page inserted whole on this connection: the next may go as a plain INSERT.
    plain_next_ = inserted == static_cast<int64_t>(page->size());
    out.ok = true;
    out.published = inserted;
    out.deduplicated = static_cast<int64_t>(page->size()) - inserted;
  } catch (const Failure &f) {
    Drop();
    out.error = f.message;
  } catch (const std::exception &e) {
    Drop();
    out.error = "postgres sink: " + RedactAll(where_ + ": " + e.what(), secrets_);
  }
  in_flight_ = false;
  page_ = nullptr;
  return out;
}

std::unique_ptr<Sink> Open(const std::string &options_json) { return std::make_unique<PostgresSink>(options_json); }

}  // namespace

extern const SinkType kPostgresSink;
const SinkType kPostgresSink = {"postgres", false, CheckOptions, Open, GivesPassword};

}  // namespace statesman::sink
