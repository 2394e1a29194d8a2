// An example consumer of a Redis stream that a statesman `redis` outbox writes: it adds the
// `amount` of each record's JSON payload to the balance of the record's path (the account), in
// a PostgreSQL database of its own, and keeps where it is in the stream.
//
//   --guard   exactly once. One transaction per entry: statesman.mark_applied(consumer,
//             message), the balance change only when that returned true, and the stream read
//             position. Whatever stops the process, the balance and the position agree, and a
//             message read again (after a restart, --from, a second copy of the consumer) is
//             recognised and skipped.
//   default   the usual "ack every N" consumer: each balance change commits on its own, the
//             read position is saved every --ack-every entries. A crash between two saves
//             reads the entries since the last save again and adds their amounts twice.
//
// State, created when absent: example.balances (consumer, account, balance, applications) and
// example.read_positions (consumer, stream, last_id). The consumer database needs the
// statesman extension for mark_applied (CREATE EXTENSION statesman; no outbox, no preload).
//
// Build and run: see README.md. Single-threaded; one process per consumer name.
#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

const char *const kUsage = R"(usage: consumer --db CONNINFO [options]

  --db CONNINFO          the consumer database (libpq conninfo), with the statesman extension
  --redis-host HOST      default 127.0.0.1
  --redis-port PORT      default 6379
  --redis-password PW    sent with AUTH when given
  --redis-db N           SELECT N when not 0
  --stream KEY           the stream's key, {key_prefix}:{stream}; default statesman:state-change
  --consumer NAME        the consumer's name (state rows, mark_applied); default example
  --guard                exactly once: mark_applied, balance and position in one transaction
  --ack-every N          without --guard: save the read position every N entries; default 50
  --count N              entries per XREAD; default 100
  --from ID              start after this stream id instead of the saved position (0: the start)
  --exit-when-idle       exit once the stream has nothing after the read position
  --verbose              one line per entry on stdout
)";

struct Options {
  std::string db;
  std::string redis_host = "127.0.0.1";
  int redis_port = 6379;
  std::optional<std::string> redis_password;
  int redis_db = 0;
  std::string stream = "statesman:state-change";
  std::string consumer = "example";
  bool guard = false;
  long ack_every = 50;
  long count = 100;
  std::optional<std::string> from;
  bool exit_when_idle = false;
  bool verbose = false;
};

[[noreturn]] void UsageError(const std::string &why) {
  std::fprintf(stderr, "consumer: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

long NumberArgument(const std::string &name, const std::string &text, long min, long max) {
  char *end = nullptr;
  errno = 0;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < min || value > max)
    UsageError(name + " must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  return value;
}

Options ParseArguments(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--db")
      o.db = value();
    else if (arg == "--redis-host")
      o.redis_host = value();
    else if (arg == "--redis-port")
      o.redis_port = static_cast<int>(NumberArgument(arg, value(), 1, 65535));
    else if (arg == "--redis-password")
      o.redis_password = value();
    else if (arg == "--redis-db")
      o.redis_db = static_cast<int>(NumberArgument(arg, value(), 0, 1000000));
    else if (arg == "--stream")
      o.stream = value();
    else if (arg == "--consumer")
      o.consumer = value();
    else if (arg == "--guard")
      o.guard = true;
    else if (arg == "--ack-every")
      o.ack_every = NumberArgument(arg, value(), 1, 1000000);
    else if (arg == "--count")
      o.count = NumberArgument(arg, value(), 1, 100000);
    else if (arg == "--from")
      o.from = value();
    else if (arg == "--exit-when-idle")
      o.exit_when_idle = true;
    else if (arg == "--verbose")
      o.verbose = true;
    else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else
      UsageError("unknown argument " + arg);
  }
  if (o.db.empty()) UsageError("--db is required");
  if (o.stream.empty()) UsageError("--stream must not be empty");
  if (o.from && *o.from == "0") o.from = "0-0";
  return o;
}

// SIGINT / SIGTERM: finish the entry under way, save the position, exit 0.
volatile std::sig_atomic_t stop_requested = 0;
extern "C" void OnStopSignal(int) { stop_requested = 1; }

// ---------------------------------------------------------------------------------------------
// PostgreSQL (libpq, blocking).

struct ResultFree {
  void operator()(PGresult *r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultFree>;

class Database {
 public:
  explicit Database(const std::string &conninfo) : conn_(PQconnectdb(conninfo.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK)
      throw std::runtime_error("cannot connect to the consumer database: " + Trimmed(PQerrorMessage(conn_)));
  }
  ~Database() { PQfinish(conn_); }
  Database(const Database &) = delete;
  Database &operator=(const Database &) = delete;

  // Runs one statement (text parameters); throws on any error.
  Result Exec(const char *sql, const std::vector<std::string> &params = {}) {
    std::vector<const char *> values;
    for (const std::string &p : params) values.push_back(p.c_str());
    Result r(PQexecParams(conn_, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0));
    ExecStatusType status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      throw std::runtime_error(std::string("consumer database: ") + Trimmed(PQerrorMessage(conn_)));
    return r;
  }

  // Several statements without parameters (the schema).
  void ExecScript(const char *sql) {
    Result r(PQexec(conn_, sql));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK)
      throw std::runtime_error(std::string("consumer database: ") + Trimmed(PQerrorMessage(conn_)));
  }

 private:
  static std::string Trimmed(const char *message) {
    std::string s = message ? message : "";
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }
  PGconn *conn_;
};

const char *const kSchema = R"(
CREATE SCHEMA IF NOT EXISTS example;
CREATE TABLE IF NOT EXISTS example.balances (
    consumer     text   NOT NULL,
    account      text   NOT NULL,
    balance      bigint NOT NULL,
    applications bigint NOT NULL,          -- how many messages were added to the balance
    PRIMARY KEY (consumer, account));
CREATE TABLE IF NOT EXISTS example.read_positions (
    consumer text NOT NULL,
    stream   text NOT NULL,
    last_id  text NOT NULL,                -- the last stream entry handled: XREAD goes on after it
    PRIMARY KEY (consumer, stream));
)";

const char *const kLoadPosition = "SELECT last_id FROM example.read_positions WHERE consumer = $1 AND stream = $2";

const char *const kSavePosition =
    "INSERT INTO example.read_positions AS p (consumer, stream, last_id) VALUES ($1, $2, $3) "
    "ON CONFLICT (consumer, stream) DO UPDATE SET last_id = EXCLUDED.last_id";

const char *const kApply =
    "INSERT INTO example.balances AS b (consumer, account, balance, applications) "
    "VALUES ($1, $2, $3::bigint, 1) "
    "ON CONFLICT (consumer, account) DO UPDATE "
    "SET balance = b.balance + EXCLUDED.balance, applications = b.applications + 1";

// True when the message is new for this consumer: (epoch, globalPosition) is then recorded in
// the caller's transaction. False when that position (of that epoch) was applied before.
const char *const kMarkApplied = "SELECT statesman.mark_applied($1, $2::jsonb)";
const char *const kHasMarkApplied = "SELECT to_regprocedure('statesman.mark_applied(text, jsonb)')";

// ---------------------------------------------------------------------------------------------
// The message: statesman.state-change/v1 (docs/sql-reference.md, "The message").

std::string DecodeBase64(const std::string &text) {
  auto sextet = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  unsigned bits = 0;
  int nbits = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] != '='; ++i) {
    int v = sextet(text[i]);
    if (v < 0) throw std::runtime_error("payload is not base64");
    bits = (bits << 6) | static_cast<unsigned>(v);
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      out.push_back(static_cast<char>((bits >> nbits) & 0xFF));
    }
  }
  for (; i < text.size(); ++i)
    if (text[i] != '=') throw std::runtime_error("payload is not base64");
  return out;
}

struct Change {
  std::string account;  // the record's path
  int64_t amount = 0;   // the payload's "amount"; a tombstone moves nothing
};

// The account and amount a message carries; throws when the payload has no integer amount.
Change ReadChange(const nlohmann::json &message) {
  Change c;
  c.account = message.at("path").get<std::string>();
  const nlohmann::json &payload = message.at("payload");
  if (payload.is_null()) return c;
  nlohmann::json body = nlohmann::json::parse(DecodeBase64(payload.get<std::string>()));
  const nlohmann::json &amount = body.at("amount");
  if (!amount.is_number_integer()) throw std::runtime_error("payload's \"amount\" is not an integer");
  c.amount = amount.get<int64_t>();
  return c;
}

// ---------------------------------------------------------------------------------------------
// Redis (hiredis, blocking).

struct ContextFree {
  void operator()(redisContext *c) const { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply *r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

struct Entry {
  std::string id;       // "{globalPosition}-0"
  std::string message;  // the message as JSON text
};

class Stream {
 public:
  explicit Stream(const Options &o) : key_(o.stream) {
    timeval timeout{5, 0};
    ctx_.reset(redisConnectWithTimeout(o.redis_host.c_str(), o.redis_port, timeout));
    if (!ctx_ || ctx_->err)
      throw std::runtime_error("cannot connect to redis " + o.redis_host + ":" + std::to_string(o.redis_port) + ": " +
                               (ctx_ ? ctx_->errstr : "out of memory"));
    redisSetTimeout(ctx_.get(), timeout);
    if (o.redis_password) Command({"AUTH", *o.redis_password}, "AUTH");
    if (o.redis_db != 0) Command({"SELECT", std::to_string(o.redis_db)}, "SELECT");
  }

  // Up to `count` entries after `after`, in id order. Empty when there are none: at once
  // with block_ms 0, else after waiting that long for new ones.
  std::vector<Entry> ReadAfter(const std::string &after, long count, long block_ms) {
    std::vector<std::string> args{"XREAD", "COUNT", std::to_string(count)};
    if (block_ms > 0) args.insert(args.end(), {"BLOCK", std::to_string(block_ms)});
    args.insert(args.end(), {"STREAMS", key_, after});
    Reply r = Command(args, "XREAD");
    std::vector<Entry> entries;
    if (r->type == REDIS_REPLY_NIL) return entries;
    // [[key, [[id, [field, value, …]], …]]]
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 || r->element[0]->elements != 2)
      throw std::runtime_error("XREAD: unexpected reply");
    const redisReply *list = r->element[0]->element[1];
    for (size_t i = 0; i < list->elements; ++i) {
      const redisReply *e = list->element[i];
      Entry entry;
      entry.id.assign(e->element[0]->str, e->element[0]->len);
      const redisReply *fields = e->element[1];
      for (size_t f = 0; f + 1 < fields->elements; f += 2)
        if (std::string(fields->element[f]->str, fields->element[f]->len) == "message")
          entry.message.assign(fields->element[f + 1]->str, fields->element[f + 1]->len);
      if (entry.message.empty()) throw std::runtime_error("stream entry " + entry.id + " has no message field");
      entries.push_back(std::move(entry));
    }
    return entries;
  }

 private:
  Reply Command(const std::vector<std::string> &args, const char *what) {
    std::vector<const char *> argv;
    std::vector<size_t> lengths;
    for (const std::string &a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    Reply r(static_cast<redisReply *>(
        redisCommandArgv(ctx_.get(), static_cast<int>(argv.size()), argv.data(), lengths.data())));
    if (!r) throw std::runtime_error(std::string("redis ") + what + ": " + ctx_->errstr);
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error(std::string("redis ") + what + ": " + r->str);
    return r;
  }

  std::string key_;
  std::unique_ptr<redisContext, ContextFree> ctx_;
};

// ---------------------------------------------------------------------------------------------

struct Totals {
  long read = 0;
  long applied = 0;
  long skipped = 0;  // already applied (--guard only)
};

void PrintApplied(const Entry &e, const Change &c) {
  std::printf("applied %s %s %+lld\n", e.id.c_str(), c.account.c_str(), static_cast<long long>(c.amount));
}

// --guard: everything about one entry commits together, or nothing does.
void HandleGuarded(Database &db, const Options &o, const Entry &e, Totals &t) {
  nlohmann::json message = nlohmann::json::parse(e.message);
  Change change = ReadChange(message);
  db.Exec("BEGIN");
  Result fresh = db.Exec(kMarkApplied, {o.consumer, e.message});
  bool apply = std::strcmp(PQgetvalue(fresh.get(), 0, 0), "t") == 0;
  if (apply) db.Exec(kApply, {o.consumer, change.account, std::to_string(change.amount)});
  db.Exec(kSavePosition, {o.consumer, o.stream, e.id});
  db.Exec("COMMIT");
  if (apply)
    ++t.applied;
  else
    ++t.skipped;
  if (o.verbose) {
    if (apply)
      PrintApplied(e, change);
    else
      std::printf("skipped %s (already applied)\n", e.id.c_str());
    std::fflush(stdout);
  }
}

// Without --guard: the balance change commits now, the position only every ack_every entries.
void HandleUnguarded(Database &db, const Options &o, const Entry &e, Totals &t, long &unsaved) {
  Change change = ReadChange(nlohmann::json::parse(e.message));
  db.Exec(kApply, {o.consumer, change.account, std::to_string(change.amount)});
  ++t.applied;
  if (o.verbose) {
    PrintApplied(e, change);
    std::fflush(stdout);
  }
  if (++unsaved >= o.ack_every) {
    db.Exec(kSavePosition, {o.consumer, o.stream, e.id});
    unsaved = 0;
  }
}

int Run(const Options &o) {
  Database db(o.db);
  if (o.guard && PQgetisnull(db.Exec(kHasMarkApplied).get(), 0, 0))
    throw std::runtime_error(
        "the consumer database has no statesman.mark_applied: run CREATE EXTENSION statesman there");
  db.ExecScript(kSchema);
  std::string position = "0-0";
  if (o.from) {
    position = *o.from;
  } else {
    Result r = db.Exec(kLoadPosition, {o.consumer, o.stream});
    if (PQntuples(r.get()) == 1) position = PQgetvalue(r.get(), 0, 0);
  }
  Stream stream(o);
  std::string mode = o.guard ? "guarded" : "unguarded, position saved every " + std::to_string(o.ack_every);
  std::fprintf(stderr, "consumer %s: reading %s after %s (%s)\n", o.consumer.c_str(), o.stream.c_str(),
               position.c_str(), mode.c_str());

  Totals t;
  long unsaved = 0;  // entries applied since the position was last saved (unguarded)
  auto save = [&] {
    if (unsaved > 0) db.Exec(kSavePosition, {o.consumer, o.stream, position});
    unsaved = 0;
  };
  while (!stop_requested) {
    // Waiting at most 1 s at a time, a stop signal is seen within a second when idle.
    std::vector<Entry> entries = stream.ReadAfter(position, o.count, o.exit_when_idle ? 0 : 1000);
    if (entries.empty()) {
      save();
      if (o.exit_when_idle) break;
      continue;
    }
    for (const Entry &e : entries) {
      if (o.guard)
        HandleGuarded(db, o, e, t);
      else
        HandleUnguarded(db, o, e, t, unsaved);
      position = e.id;
      ++t.read;
      if (stop_requested) break;
    }
  }
  save();
  std::fprintf(stderr, "consumer %s: %ld entries read, %ld applied, %ld skipped as already applied; at %s\n",
               o.consumer.c_str(), t.read, t.applied, t.skipped, position.c_str());
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  Options o = ParseArguments(argc, argv);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  try {
    return Run(o);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "consumer %s: %s\n", o.consumer.c_str(), e.what());
    return 1;
  }
}
