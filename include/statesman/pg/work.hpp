// Transactions, SPI queries and waiting, for statesman's own processes and for the C++ code
// that runs SQL (dispatch_once). Every function here converts PostgreSQL errors into
// pg::PgError, so callers may hold C++ objects. It pulls in postgres.h: never included by sink code.
#pragma once

#include "statesman/pg/guard.hpp"

extern "C" {
#include "executor/spi.h"
}

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace statesman::pg {

using Value = std::optional<std::string>;
using Row = std::vector<Value>;

// A worker transaction, as worker_spi runs one: statement timestamp, StartTransactionCommand,
// SPI_connect, an active snapshot, and the activity shown in pg_stat_activity.
void BeginWork(const char *activity);
// Commits the transaction BeginWork started and reports the process idle.
void EndWork();

// Runs one statement in the current SPI connection with text parameters ($1::bigint casts
// in the SQL give them their types); returns the rows as text (NULL as nullopt).
std::vector<Row> Query(const char *sql, const std::vector<Value> &params = {});
// Keeps the memory of one page for the next: a page of messages takes a megabyte or more, and
// glibc would hand its blocks back to the system at the end of every statement (mmap for the
// large ones, a trim of the heap's top for the rest), so that the next page page-faults and
// zero-fills all of it again (a sixth of a read_feed page's time). Fixes glibc's thresholds at
// values its own dynamic adjustment reaches after one large free (16 MB for mmap, 32 MB kept at
// the heap's top). Once per process: the read_feed sessions and the dispatchers.
void KeepPageMemory();
// Hands the free memory that KeepPageMemory keeps back to the system (malloc_trim): for a
// dispatcher that has drained its backlog and reads short pages again, so that a burst's pages
// do not stay in its memory for the rest of its life. The next full page faults it in again.
void GiveBackPageMemory();
// Prepares sql (nargs parameters of these types) and keeps the plan for the process
// (SPI_keepplan; PostgreSQL re-plans it when what it uses changes). The one exception to this
// header's rule: plain PostgreSQL code that may ereport, for callers already under pg::Call
// (Query, the page reader's plans).
SPIPlanPtr PrepareAndKeep(const char *sql, int nargs, const Oid *types);
// Marks the statements run in its lifetime outside Query (kept plans run through SPI directly,
// src/feed/page.cpp) as running, as Query does for its own: a shutdown request then cancels
// them (HandleShutdownSignal). Made outside pg::Call, so that its end always runs.
class StatementScope {
 public:
  StatementScope() noexcept;
  ~StatementScope();
  StatementScope(const StatementScope &) = delete;
  StatementScope &operator=(const StatementScope &) = delete;
};
// The first column of the first row, or nullopt when there is no row or it is NULL.
Value QueryValue(const char *sql, const std::vector<Value> &params = {});
// Runs query() in a subtransaction of the current transaction. A PostgreSQL ERROR inside it
// rolls back only the subtransaction and is returned as its message (nullopt: no error), so
// the transaction can go on (as a PL/pgSQL block with an EXCEPTION clause does). A query
// cancel is not caught; any other exception rolls the subtransaction back and passes on.
std::optional<std::string> InSubtransaction(const std::function<void()> &query);

// Handles what signals asked for, in statesman's own processes: a pending termination (exits
// the process) and a config reload. Returns false when statesman.enabled was turned off or a
// shutdown was requested (HandleShutdownSignal).
bool HandleInterrupts();
// CHECK_FOR_INTERRUPTS() alone: for C++ loops in a client's backend (dispatch_once), where
// PostgresMain, not this code, reloads the configuration.
void CheckForInterrupts();
// True when this process was asked to stop or cancel (SIGTERM, a query cancel) or the
// postmaster died: reads flags only, so a sink's wait may call it every few milliseconds.
bool StopRequested();

// ---- A shutdown that leaves through the worker's own exit work ------------------------------
// `die` (the usual SIGTERM handler) exits through FATAL at the next CHECK_FOR_INTERRUPTS, so
// nothing after it runs. A worker with exit work (the dispatcher: release its lease, note that
// it stopped, close its sink's connection) takes SIGTERM with HandleShutdownSignal instead, as
// autoprewarm does: the signal sets ShutdownRequestPending and the latch, so a wait ends at once
// and HandleInterrupts returns false; a statement that is running (Query) is cancelled, so that
// one waiting for a lock does not hold the shutdown up; a sink call ends through StopRequested.
void HandleShutdownSignal(SIGNAL_ARGS);
// True once SIGTERM arrived in a worker that uses HandleShutdownSignal.
bool ShutdownRequested();
// Thrown where the shutdown is noticed in the middle of work that is not a statement (a sink
// call cut short); the worker's loop catches it, as it catches the cancelled statement's error.
class ShutdownRequest : public std::exception {
 public:
  const char *what() const noexcept override { return "statesman: shutdown requested"; }
};
// Rolls back what a shutdown interrupted, then starts the transaction of the exit work: the
// shutdown's cancel is cleared and, after a shutdown request, no lock is waited for longer
// than a second.
void BeginExitWork();
// True when the extension is installed in this database (inside a transaction).
bool ExtensionInstalled();
// Waits for the latch, at most timeout_ms; true when the latch (a hint) woke it.
bool WaitForLatch(int64_t timeout_ms);
// Waits until deadline_ms, ignoring latch wake-ups (hints), handling interrupts; returns early
// when statesman.enabled was turned off or a shutdown was requested.
void WaitUntil(int64_t deadline_ms);
// Sleeps timeout_ms without waiting on the latch, so that the latch stays set: while it is
// set, a SetLatch of another process (a commit hint) returns at once, with no signal sent
// and no wake-up. Exits on the postmaster's death; a shutdown request is seen by the next
// HandleInterrupts. For waits of a few milliseconds only.
void SleepWithoutHints(int64_t timeout_ms);
// Clears the latch: a hint that arrives after this sets it again.
void ResetHints();
// Logs a line at LOG/WARNING severity, or at ERROR severity without raising an error.
enum class LogLevel { kLog, kWarning, kError };
void Log(LogLevel level, const std::string &message, const std::string &detail = "");

int64_t ToInt(const Value &value, int64_t fallback = 0);

// Runs a worker's loop. When a PostgreSQL error ends it because the extension was dropped
// under it (DROP EXTENSION can commit while one of its statements waits for a table), the
// worker stops quietly; any other error is re-raised.
void RunUntilExtensionDropped(const std::function<void()> &loop);

}  // namespace statesman::pg
