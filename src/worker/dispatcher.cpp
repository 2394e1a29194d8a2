// The dispatcher: delivers one outbox's feed to its sink (docs/design.md §4). Publish first, then
// advance the cursor; for the `table` sink both commit in one transaction. The same cycle runs
// in a dispatcher process (one transaction per page, under the outbox's lease, held across
// cycles) and in statesman.dispatch_once() (in the caller's transaction).
#include "statesman/worker/workers.hpp"
#include "statesman/pg/work.hpp"

extern "C" {
#include "access/xact.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/pmsignal.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(statesman_dispatch_once);
}

#include <functional>
#include <memory>
#include <string>

#include "statesman/error.hpp"
#include "statesman/feed/page.hpp"
#include "statesman/sinks/sink.hpp"
#include "statesman/store/locks.hpp"
#include "statesman/worker/backoff.hpp"

namespace statesman::pg {
namespace {

using worker::OutboxSettings;

// Waits up to 250 ms for the sequencer lock, for this transaction.
const std::string kAwaitSequencerSql =
    "DO $$ BEGIN "
    "  PERFORM pg_catalog.set_config('lock_timeout', '250ms', true); "
    "  BEGIN PERFORM pg_catalog.pg_advisory_xact_lock(" +
    std::to_string(store::kSequencerLockSpace) +
    ", 0); "
    "  EXCEPTION WHEN lock_not_available THEN NULL; END; "
    "  PERFORM pg_catalog.set_config('lock_timeout', '0', true); "
    "END $$";

// Loads an outbox's settings, its intervals in the milliseconds that statesman._check_outbox
// checked (statesman._outbox_millis); false when it does not exist.
bool LoadSettings(const std::string &outbox_id, OutboxSettings *s) {
  std::vector<Row> rows = Query(
      "SELECT o.sink, statesman._sink_options_to_use(o)::text, o.enabled, o.require_lease, o.batch_size, "
      "  m.poll_interval, m.lease_ttl, m.lease_renew_interval, m.min_retry_delay, m.max_retry_delay, "
      "  o.skip_poison_after_attempts "
      "FROM statesman.outboxes o CROSS JOIN LATERAL statesman._outbox_millis(o) m WHERE o.outbox_id = $1",
      {outbox_id});
  if (rows.empty()) return false;
  const Row &r = rows[0];
  s->outbox_id = outbox_id;
  s->sink = r[0].value_or("");
  s->sink_options = r[1].value_or("{}");
  s->enabled = r[2] == "t";
  s->require_lease = r[3] == "t";
  s->batch_size = static_cast<int>(ToInt(r[4], 1000));
  s->poll_interval = ToInt(r[5], 1000);
  s->lease_ttl = ToInt(r[6], 30000);
  // A sink without its own timeout_ms: 5 s, or half the lease when that is shorter.
  s->sink_timeout =
      sink::TimeoutMillis(s->sink_options, std::min<int64>(sink::kDefaultTimeoutMillis, s->lease_ttl / 2));
  s->lease_renew_interval = ToInt(r[7], 10000);
  s->min_retry_delay = ToInt(r[8], 200);
  s->max_retry_delay = ToInt(r[9], 15000);
  s->skip_poison_after_attempts.reset();
  if (r[10].has_value()) s->skip_poison_after_attempts = static_cast<int>(ToInt(r[10]));
  return true;
}

// The sink an outbox delivers to. For a sink outside this database it keeps one open Sink
// (and so one connection) across pages and cycles, and opens a new one when the outbox's sink
// or options change.
class SinkHandle {
 public:
  // The sink for these settings; throws 0A000 for a sink this build does not know.
  const sink::SinkType &Use(const OutboxSettings &s) {
    const sink::SinkType *type = sink::FindSink(s.sink);
    if (type == nullptr)
      throw Error("0A000", "statesman: outbox \"" + s.outbox_id + "\": sink \"" + s.sink + "\" is not supported");
    if (type->in_database) {
      sink_.reset();  // a sink outside the database that the outbox left: close its connection
    } else if (sink_ == nullptr || s.sink != name_ || s.sink_options != options_) {
      sink_ = type->open(s.sink_options);
      name_ = s.sink;
      options_ = s.sink_options;
    }
    return *type;
  }
  sink::Sink *Get() const { return sink_.get(); }

 private:
  std::unique_ptr<sink::Sink> sink_;
  std::string name_;
  std::string options_;
};

// How a page reaches a sink outside this database: the sink, and the limits of each call.
struct SinkCall {
  sink::Sink *sink = nullptr;
  std::function<int64()> deadline_ms;  // when the next call must have ended (NowMillis time)

  // The positions in a page are durable before it leaves: statesman._feed_page flushes the WAL
  // that holds the ticks it read before it returns a row (docs/feed.md, durability).
  sink::Budget Budget() const {
    int64 left = deadline_ms() - NowMillis();
    return sink::Budget{sink::Clock::now() + std::chrono::milliseconds(std::max<int64>(left, 0)),
                        [] { return StopRequested(); }};
  }
  sink::Outcome Publish(const std::vector<sink::Message> &page) const { return sink->Publish(page, Budget()); }
  void Start(const std::vector<sink::Message> &page) const { sink->Start(page, Budget()); }
  sink::Outcome Finish() const { return sink->Finish(); }
};

// The next page, read while the sink works on the current one: its bounds and messages. Used
// only for the page that follows the cursor when the cursor moved to its `after` and the
// outbox's row is still the version it was read under (an alter_outbox in between may have
// changed the batch size, the root filter or the envelope that built the messages), and only
// when it was a full page: a readable position never changes and no record can appear below
// one, so a full page's records are the same when it is read again; a short one may have grown.
struct ReadAhead {
  bool valid = false;
  OutboxPage page;
};

// A publish that ended because this process must stop (SIGTERM, a cancel, the postmaster's
// death) is not a failed delivery: stop here, before anything of it is recorded; the page's
// transaction rolls back.
void StopIfRequested() {
  if (!StopRequested()) return;
  Call([] {
    CHECK_FOR_INTERRUPTS();
    if (!PostmasterIsAlive())
      ereport(FATAL, (errcode(ERRCODE_ADMIN_SHUTDOWN), errmsg("statesman: the postmaster died during a sink call")));
  });
  // SIGTERM in the dispatcher process: unwind to DispatcherProcess::Run, which does the exit work.
  if (ShutdownRequested()) throw ShutdownRequest();
}

// Rows of (global_position, message_id, message) as sink messages.
std::vector<sink::Message> ToMessages(std::vector<Row> rows) {
  std::vector<sink::Message> page;
  page.reserve(rows.size());
  for (Row &r : rows) {
    sink::Message m;
    m.position = ToInt(r[0]);
    m.id = std::move(*r[1]);
    m.json = std::move(*r[2]);
    page.push_back(std::move(m));
  }
  return page;
}

Value Int(int64 n) { return std::to_string(n); }

// One page to a sink outside this database, in the shape of statesman._page_result (see
// DeliverPage): the page is bounded and built under the page lock in one step (feed/page.hpp),
// published, and only then the cursor moves, in the same transaction.
// A failed publish's wish for a wait (sink::Outcome::retry_after_ms) goes to *retry_after_ms.
Row DeliverExternalPage(const std::string &outbox_id, const SinkCall &call, ReadAhead &ahead, int64 *retry_after_ms) {
  OutboxPage page = OpenOutboxPage(outbox_id);
  Row result(8);
  if (page.status != "open") {
    ahead.valid = false;
    result[0] = page.status;
    return result;
  }
  if (ahead.valid && ahead.page.after == page.after && ahead.page.version == page.version)
    page = std::move(ahead.page);
  else
    // A page whose messages cannot be built (a record too large for a message) is a failed
    // attempt like a sink's refusal: backoff, then skip_poison_after_attempts parks it.
    ReadOutboxPage(page);
  ahead.valid = false;
  ahead.page = OutboxPage();
  const Value after = page.after > 0 ? Int(page.after) : Value();
  result[0] = page.status;
  if (page.status == "empty") {
    result[1] = "0";
    result[2] = after;
    return result;
  }
  result[1] = page.read >= 0 ? Int(page.read) : Value();
  result[2] = Int(page.last_position);
  result[7] = page.full_page ? "t" : "f";
  if (page.unbuilt) {
    std::string error = "the page's messages cannot be built: " + *page.unbuilt;
    result[0] = "failed";
    result[2] = after;
    result[5] = QueryValue("SELECT statesman._note_failure($1, $2)", {outbox_id, error});
    result[6] = error;
    return result;
  }
  int64 published = 0, deduplicated = 0;
  if (page.matching > 0) {
    call.Start(page.messages);
    // However this block is left (the read below may fail), the sink has let go of the page
    // before it is freed; after Finish that is a no-op.
    struct ForgetOnExit {
      sink::Sink *sink;
      ~ForgetOnExit() { sink->Forget(); }
    } forget{call.sink};
    // A full page: more follows at once. Read it now, while the sink works. Not read ahead when
    // it cannot be built: the next page reports it as its failure.
    if (page.full_page) {
      OutboxPage next = ReadPageAfter(page);
      if (next.status == "ready" && !next.unbuilt && next.full_page) {
        ahead.page = std::move(next);
        ahead.valid = true;
      }
    }
    sink::Outcome o = call.Finish();
    if (!o.ok) {
      StopIfRequested();
      *retry_after_ms = o.retry_after_ms;
      ahead.valid = false;
      ahead.page = OutboxPage();
      result[0] = "failed";
      result[2] = after;
      result[5] = QueryValue("SELECT statesman._note_failure($1, $2)", {outbox_id, o.error});
      result[6] = o.error;
      return result;
    }
    published = o.published;
    deduplicated = o.deduplicated;
  }
  FinishPage(outbox_id, result[2], published, deduplicated);
  result[0] = "delivered";
  result[3] = std::to_string(published);
  result[4] = std::to_string(deduplicated);
  result[5] = "0";
  return result;
}

// Requeued dead letters to a sink outside this database (at most one page), in the shape of
// statesman._page_result.
Row RedeliverExternalPage(const std::string &outbox_id, const SinkCall &call) {
  std::vector<sink::Message> page = ToMessages(
      Query("SELECT m.global_position, m.message_id, m.message FROM statesman._requeued_messages($1) m", {outbox_id}));
  Row result(8);
  result[1] = std::to_string(page.size());
  if (page.empty()) {
    result[0] = "empty";
    return result;
  }
  std::string positions = "{";
  for (const sink::Message &m : page) positions += (positions.size() > 1 ? "," : "") + std::to_string(m.position);
  positions += "}";
  sink::Outcome o = call.Publish(page);
  if (!o.ok) StopIfRequested();
  QueryValue("SELECT statesman._requeued_outcome($1, $2::bigint[], $3::boolean, $4::bigint, $5::bigint, $6)",
             {outbox_id, positions, std::string(o.ok ? "t" : "f"), std::to_string(o.published),
              std::to_string(o.deduplicated), o.ok ? Value() : Value(o.error)});
  result[0] = o.ok ? "delivered" : "failed";
  result[3] = std::to_string(o.published);
  result[4] = std::to_string(o.deduplicated);
  result[6] = o.error;
  return result;
}

// What one cycle did.
struct CycleOutcome {
  int64 published = 0;
  int64 skipped = 0;
  int64 deduplicated = 0;
  bool failed = false;  // the sink refused the current page; retry after a backoff
  int attempts = 0;
  std::string error;
  int64 retry_after_ms = 0;  // when failed: the sink's wish for the wait (Retry-After), or 0
  bool stop = false;         // the outbox was dropped or paused
  bool full_page = false;    // a page of batch_size records was read (delivered, or refused)
};

// One page as statesman._page_result: status, read, last_position, published, deduplicated,
// attempts, error, full_page.
Row DeliverPage(const char *function, const std::string &outbox_id) {
  std::string sql = std::string(
                        "SELECT r.status, r.read, r.last_position, r.published, r.deduplicated, "
                        "r.attempts, r.error, r.full_page FROM ") +
                    function + "($1) r";
  std::vector<Row> rows = Query(sql.c_str(), {outbox_id});
  if (rows.empty()) throw Error("XX000", "statesman: " + std::string(function) + " returned no row");
  return rows[0];
}

// Runs one cycle: requeued dead letters first, then feed pages until a page is empty.
// between_pages() ends one page's transaction and starts the next (a no-op in dispatch_once);
// it returns false when the process must stop.
CycleOutcome RunCycle(const OutboxSettings &s, SinkHandle &handle, const std::function<int64()> &deadline_ms,
                      const std::function<bool()> &between_pages, bool in_worker) {
  CycleOutcome out;
  // s may be reloaded by between_pages(): the sink is looked up again for every page, so a
  // changed sink or options take effect within the drain (Use reopens only on a change).
  const sink::SinkType *type = nullptr;
  SinkCall call{nullptr, deadline_ms};
  auto use = [&] {
    type = &handle.Use(s);
    call.sink = handle.Get();
  };
  ReadAhead ahead;
  auto redeliver = [&] {
    use();
    return type->in_database ? DeliverPage("statesman._redeliver_table_page", s.outbox_id)
                             : RedeliverExternalPage(s.outbox_id, call);
  };
  auto deliver = [&] {
    use();
    out.retry_after_ms = 0;
    return type->in_database ? DeliverTablePage(s.outbox_id)
                             : DeliverExternalPage(s.outbox_id, call, ahead, &out.retry_after_ms);
  };

  // Dead letters queued by statesman.redeliver().
  for (;;) {
    Row page = redeliver();
    const std::string status = page[0].value_or("");
    if (status == "empty") break;
    if (status == "failed") {
      Log(LogLevel::kWarning,
          "statesman: outbox \"" + s.outbox_id + "\": redelivery of " + page[1].value_or("?") +
              " parked messages failed; they stay in statesman.dead_letters",
          page[6].value_or(""));
      break;
    }
    out.published += ToInt(page[3]);
    out.deduplicated += ToInt(page[4]);
    if (!between_pages()) return out;
  }

  for (;;) {
    Row page = deliver();
    const std::string status = page[0].value_or("");
    if (status == "gone" || status == "paused") {
      out.stop = true;
      return out;
    }
    if (status == "empty") return out;
    if (status == "failed") {
      out.attempts = static_cast<int>(ToInt(page[5]));
      out.error = page[6].value_or("unknown error");
      if (page[7] == "t") out.full_page = true;
      if (!worker::ShouldPark(s, out.attempts)) {
        out.failed = true;
        return out;
      }
      // Poison: skip the page, parking every message of it in the same transaction.
      int64 parked = ToInt(QueryValue("SELECT statesman._park_page($1, $2, $3::integer, $4::bigint)",
                                      {s.outbox_id, out.error, std::to_string(out.attempts), page[1]}));
      out.skipped += parked;
      Log(in_worker ? LogLevel::kError : LogLevel::kWarning,
          "statesman: outbox \"" + s.outbox_id + "\": skipped " + std::to_string(parked) + " messages after " +
              std::to_string(out.attempts) + " failed attempts; they were never delivered",
          "They are parked in statesman.dead_letters; statesman.redeliver('" + s.outbox_id +
              "') hands them to the sink again. Last error: " + out.error);
      out.attempts = 0;
      out.error.clear();
    } else {
      out.published += ToInt(page[3]);
      out.deduplicated += ToInt(page[4]);
      // A page short of batch_size read everything there was: the next page would be empty.
      // What commits after it comes with its own hint (or the next poll).
      if (page[7] != "t") return out;
      out.full_page = true;
    }
    if (!between_pages()) return out;
  }
}

// ---- The dispatcher process ---------------------------------------------------------------

class DispatcherProcess {
 public:
  explicit DispatcherProcess(std::string outbox_id) : outbox_id_(std::move(outbox_id)) {}

  // Delivers until the outbox is dropped or paused, statesman.enabled is turned off or SIGTERM
  // arrives, then does the exit work: the lease row is released and the outbox_state row no
  // longer names this process, at once (not when the session's end frees the advisory lock and
  // the next dispatcher overwrites them), and the sink's connection is closed when the process
  // object goes. A SIGTERM ends the loop at its next check, cuts a sink call short, or cancels
  // the statement running; what it interrupts is rolled back (a page is delivered again).
  void Run() {
    bool shutdown = false;
    try {
      Serve();
    } catch (const ShutdownRequest &) {
      shutdown = true;
    } catch (const PgError &e) {
      // Only the statement that the shutdown cancelled ends the loop quietly.
      if (!ShutdownRequested() || e.Data()->sqlerrcode != ERRCODE_QUERY_CANCELED) throw;
      shutdown = true;
    }
    shutdown = shutdown || ShutdownRequested();
    bool was_leased = leased_;
    BeginExitWork();
    if (leased_) QueryValue("SELECT statesman._release_lease($1)", {outbox_id_});
    QueryValue("SELECT statesman._note_dispatcher($1, NULL)", {outbox_id_});
    EndWork();
    leased_ = false;
    if (shutdown)
      Log(LogLevel::kLog, "statesman: outbox \"" + outbox_id_ + "\": dispatcher stopped on request" +
                              (was_leased ? "; lease released" : ""));
  }

 private:
  // The dispatcher's loop; returns when it must stop for a reason other than SIGTERM (which
  // mostly unwinds it, as ShutdownRequest or as the cancelled statement's PgError).
  void Serve() {
    // Like PostgreSQL's logical replication apply worker: a page's transaction need not wait
    // for its WAL flush. A crash can only lose a whole page (sink rows and cursor advance
    // together, or the cursor advance alone for other sinks), which is then delivered again.
    BeginWork("statesman: starting");
    QueryValue("SELECT pg_catalog.set_config('synchronous_commit', 'off', false)");
    EndWork();
    for (;;) {
      if (!HandleInterrupts()) break;
      int64 now = NowMillis();
      // Every wake (a standby's, a backoff's, a poll's) may give a past drain's memory back.
      KeepOrGiveBackPageMemory(false);
      // Settings are re-read at least once per poll interval (not on every hint); the page
      // functions see a pause or a drop themselves, at once.
      if (settings_loaded_at_ == 0 || now - settings_loaded_at_ >= settings_.poll_interval) {
        BeginWork("statesman: loading outbox settings");
        bool found = LoadSettings(outbox_id_, &settings_);
        EndWork();
        settings_loaded_at_ = now;
        if (!found || !settings_.enabled) break;
      }

      if (!settings_.require_lease) {
        if (leased_) ReleaseLease();
        if (!warned_unleased_) {
          Log(LogLevel::kWarning, "statesman: outbox \"" + outbox_id_ +
                                      "\" runs without a lease (require_lease => false): nothing stops a "
                                      "second dispatcher from publishing at the same time");
          warned_unleased_ = true;
        }
        Note("leading");
      } else {
        warned_unleased_ = false;
        if (!leased_) {
          if (now >= next_acquire_) {
            BeginWork("statesman: acquiring lease");
            leased_ = QueryValue("SELECT statesman._acquire_lease($1)", {outbox_id_}) == "t";
            EndWork();
            next_acquire_ = now + settings_.poll_interval;
            if (leased_) {
              clock_.Acquired(now);
              Log(LogLevel::kLog, "statesman: outbox \"" + outbox_id_ + "\": lease acquired; leading");
            }
          }
          Note(leased_ ? "leading" : "standby");
          if (!leased_) {
            WaitUntil(next_acquire_);  // a standby ignores hints
            continue;
          }
        }
      }

      if (now < retry_at_) {
        // Back off, waking for a lease renewal, and at least once a poll interval to re-read
        // the settings.
        int64 wake = leased_ ? std::min(retry_at_, NextRenewal()) : retry_at_;
        WaitUntil(std::min(wake, now + settings_.poll_interval));
        RenewIfDue();
        continue;
      }
      if (!RenewIfDue()) continue;

      // Woken by a hint, the database worker has just sequenced; otherwise (hints off, or a
      // poll) sequence here so that a poll always finds what has committed.
      if (!woken_by_hint_ || !guc_hints) {
        BeginWork("statesman: sequencing the feed");
        // sequence_feed() returns at once while another session sequences: wait for that run
        // to commit first (the lock is re-entrant), so its records are in this cycle, not the
        // next poll's. The wait is bounded: a session that keeps the sequencer lock in an open
        // transaction must not stop this dispatcher from renewing its lease.
        QueryValue(kAwaitSequencerSql.c_str());
        QueryValue("SELECT statesman.sequence_feed(10000)");
        EndWork();
      }
      woken_by_hint_ = false;

      BeginWork("statesman: delivering");
      CycleOutcome out = RunCycle(
          settings_, sink_,
          [this] {
            int64 now = NowMillis();
            return settings_.require_lease ? clock_.SinkDeadline(settings_, now) : now + settings_.sink_timeout;
          },
          [this] {
            EndWork();
            if (!HandleInterrupts()) return false;
            if (!RenewIfDue()) return false;
            BeginWork("statesman: delivering");
            // A long drain still picks up changed settings within a poll interval (the page
            // functions read batch_size, root and the envelope themselves, page by page).
            int64 now = NowMillis();
            if (now - settings_loaded_at_ >= settings_.poll_interval) {
              settings_loaded_at_ = now;
              if (!LoadSettings(outbox_id_, &settings_) || !settings_.enabled) return false;
            }
            return true;
          },
          true);
      if (IsTransactionState()) EndWork();
      KeepOrGiveBackPageMemory(out.full_page);
      if (out.stop) break;
      if (out.failed) {
        // The backoff, or longer when the sink asked for it (Retry-After), within max_retry_delay.
        worker::Millis delay = worker::RetryDelay(settings_, out.attempts, out.retry_after_ms);
        retry_at_ = NowMillis() + delay;
        int64 suppressed = 0;
        if (failures_.Allow(NowMillis(), &suppressed))
          Log(LogLevel::kWarning,
              "statesman: outbox \"" + outbox_id_ + "\": delivery failed (attempt " + std::to_string(out.attempts) +
                  "), retrying in " + std::to_string(delay) + " ms: " + out.error,
              suppressed > 0 ? std::to_string(suppressed) + " similar warnings suppressed" : "");
        continue;
      }
      retry_at_ = 0;
      woken_by_hint_ = WaitForLatch(std::min<int64>(
          settings_.poll_interval, settings_.require_lease ? NextRenewal() - NowMillis() : settings_.poll_interval));
    }
  }

  int64 NextRenewal() const { return clock_.NextRenewal(settings_); }

  // A drain keeps the memory of its full pages for the next one (KeepPageMemory): up to 32 MB
  // the process holds without using. Once no full page was read for kGiveBackAfterMs (the
  // backlog is drained; or the sink refuses a page and the dispatcher backs off; or it lost its
  // lease and stands by), that memory goes back to the system, once. Called at every wake.
  void KeepOrGiveBackPageMemory(bool full_page) {
    int64 now = NowMillis();
    if (full_page) {
      last_full_page_at_ = now;
    } else if (last_full_page_at_ != 0 && now - last_full_page_at_ >= kGiveBackAfterMs) {
      GiveBackPageMemory();
      last_full_page_at_ = 0;
    }
  }

  // Renews the lease when due (measured from the last renewal). False when the lease was lost.
  bool RenewIfDue() {
    if (!leased_) return settings_.require_lease ? false : true;
    int64 now = NowMillis();
    if (!clock_.RenewDue(settings_, now)) return true;
    BeginWork("statesman: renewing lease");
    bool renewed = QueryValue("SELECT statesman._renew_lease($1)", {outbox_id_}) == "t";
    EndWork();
    if (renewed) {
      clock_.Renewed(now);
      return true;
    }
    Log(LogLevel::kWarning, "statesman: outbox \"" + outbox_id_ + "\": lease lost; standing by");
    ReleaseLease();
    return false;
  }

  void ReleaseLease() {
    BeginWork("statesman: releasing lease");
    QueryValue("SELECT statesman._release_lease($1)", {outbox_id_});
    EndWork();
    leased_ = false;
  }

  void Note(const char *state) {
    if (noted_ == state) return;
    BeginWork("statesman: noting state");
    QueryValue("SELECT statesman._note_dispatcher($1, $2)", {outbox_id_, std::string(state)});
    EndWork();
    noted_ = state;
  }

  std::string outbox_id_;
  OutboxSettings settings_;
  SinkHandle sink_;
  bool leased_ = false;
  bool warned_unleased_ = false;
  worker::LeaseClock clock_;
  worker::WarningLimiter failures_{10000};
  int64 next_acquire_ = 0;
  int64 retry_at_ = 0;
  bool woken_by_hint_ = false;
  static constexpr int64 kGiveBackAfterMs = 1000;
  int64 last_full_page_at_ = 0;  // the last full page read since the last give-back, or 0
  int64 settings_loaded_at_ = 0;
  std::string noted_;
};

// ---- dispatch_once ------------------------------------------------------------------------

struct OnceResult {
  int64 published, skipped, deduplicated;
  bool has_cursor;
  int64 cursor;
};

OnceResult DispatchOnce(const std::string &outbox_id) {
  QueryValue("SELECT statesman._check_id($1, 'outbox_id')", {outbox_id});
  OutboxSettings s;
  if (!LoadSettings(outbox_id, &s)) throw Error("42704", "outbox \"" + outbox_id + "\" does not exist");
  OnceResult result{0, 0, 0, false, 0};
  auto finish = [&] {
    Value position = QueryValue("SELECT statesman.cursor_position($1)", {outbox_id});
    result.has_cursor = position.has_value();
    result.cursor = ToInt(position);
    return result;
  };
  if (!s.enabled) return finish();
  // The lease for this transaction only: it ends with the caller's transaction whatever
  // happens, so a failed call can never leave the outbox leased to an idle session.
  if (s.require_lease && QueryValue("SELECT statesman._acquire_lease($1, true)", {outbox_id}) != "t") return finish();
  bool own_transaction = Call([] { return !IsTransactionBlock() && XactIsoLevel == XACT_READ_COMMITTED; });
  if (own_transaction) QueryValue("SELECT statesman.sequence_feed(10000)");
  SinkHandle handle;
  CycleOutcome out = RunCycle(
      s, handle, [&s] { return NowMillis() + s.sink_timeout; },
      [] {
        CheckForInterrupts();
        return true;
      },
      false);
  if (out.failed)
    Log(LogLevel::kWarning, "statesman: outbox \"" + outbox_id + "\": delivery failed (attempt " +
                                std::to_string(out.attempts) + "): " + out.error);
  result.published = out.published;
  result.skipped = out.skipped;
  result.deduplicated = out.deduplicated;
  return finish();
}

}  // namespace
}  // namespace statesman::pg

extern "C" void statesman_dispatcher_main(Datum arg) {
  using namespace statesman::pg;
  WorkerArgs args = StartDynamicWorker(arg, true, "statesman dispatcher", true);
  KeepPageMemory();
  Invoke([&] {
    DispatcherProcess process(args.outbox_id);
    RunUntilExtensionDropped([&] { process.Run(); });
    return 0;
  });
  proc_exit(0);
}

// statesman.dispatch_once(outbox_id) → (published, skipped, deduplicated, cursor_position)
extern "C" Datum statesman_dispatch_once(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  if (PG_ARGISNULL(0)) ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("outbox_id must not be NULL")));
  return Invoke([&] {
    char *id = Call([&] { return text_to_cstring(PG_GETARG_TEXT_PP(0)); });
    Call([] {
      if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "statesman: SPI_connect failed");
    });
    OnceResult r = DispatchOnce(id);
    return Call([&] {
      SPI_finish();
      InitMaterializedSRF(fcinfo, 0);
      ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
      Datum values[4] = {Int64GetDatum(r.published), Int64GetDatum(r.skipped), Int64GetDatum(r.deduplicated),
                         Int64GetDatum(r.cursor)};
      bool nulls[4] = {false, false, false, !r.has_cursor};
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
      return static_cast<Datum>(0);
    });
  });
}
