// Transactions, SPI and waiting for statesman's processes (see work.hpp).
#include "statesman/pg/work.hpp"

extern "C" {
#include "access/xact.h"
#include "postmaster/bgworker.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include <malloc.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <unordered_map>

#include "statesman/worker/workers.hpp"

namespace statesman::pg {
namespace {

// True while Query runs a statement: a shutdown request then cancels it (HandleShutdownSignal).
volatile sig_atomic_t statement_running = false;
// Until the exit work begins: its own statements must run to the end.
volatile sig_atomic_t cancel_on_shutdown = true;

void CancelStatement() {
  InterruptPending = true;
  QueryCancelPending = true;
}

// Marks a statement as running for its lifetime (also when it ends by an exception). A shutdown
// requested just before it started cancels it too: the handler saw no statement running.
class RunningStatement {
 public:
  RunningStatement() noexcept {
    statement_running = true;
    if (ShutdownRequestPending && cancel_on_shutdown) CancelStatement();
  }
  ~RunningStatement() { statement_running = false; }
  RunningStatement(const RunningStatement &) = delete;
  RunningStatement &operator=(const RunningStatement &) = delete;
};

// The statements Query ran, prepared once per process and kept (SPI_keepplan): a worker runs
// the same few statements over and over (a tick every few milliseconds under load), and
// parsing and planning each again took a sixth of the database worker's time. The plan cache
// replans a kept statement when what it depends on changes (an ALTER, search_path). At most
// kKeptPlans statements are kept; the others are prepared for each call, as before.
constexpr std::size_t kKeptPlans = 128;
std::unordered_map<std::string, SPIPlanPtr> *kept_plans = nullptr;

// The kept plan of sql with nargs text parameters, or nullptr when none is kept and no more
// can be (the caller then runs sql unprepared).
SPIPlanPtr KeptPlan(const char *sql, int nargs, Oid *types) {
  if (kept_plans == nullptr) kept_plans = new std::unordered_map<std::string, SPIPlanPtr>();
  std::string key = std::to_string(nargs) + ':' + sql;
  auto found = kept_plans->find(key);
  if (found != kept_plans->end()) return found->second;
  if (kept_plans->size() >= kKeptPlans) return nullptr;
  SPIPlanPtr plan = Call([&] { return PrepareAndKeep(sql, nargs, types); });
  kept_plans->emplace(std::move(key), plan);
  return plan;
}

}  // namespace

SPIPlanPtr PrepareAndKeep(const char *sql, int nargs, const Oid *types) {
  SPIPlanPtr plan = SPI_prepare(sql, nargs, const_cast<Oid *>(types));
  if (plan == nullptr) elog(ERROR, "statesman: SPI_prepare failed (%s): %s", SPI_result_code_string(SPI_result), sql);
  if (SPI_keepplan(plan) != 0) elog(ERROR, "statesman: SPI_keepplan failed: %s", sql);
  return plan;
}

void KeepPageMemory() {
  static bool kept = false;
  if (kept) return;
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 32 << 20);
  kept = true;
}

void GiveBackPageMemory() { malloc_trim(0); }

StatementScope::StatementScope() noexcept {
  statement_running = true;
  if (ShutdownRequestPending && cancel_on_shutdown) CancelStatement();
}
StatementScope::~StatementScope() { statement_running = false; }

void HandleShutdownSignal(SIGNAL_ARGS) {
  int save_errno = errno;
  // Sets ShutdownRequestPending and the latch.
  SignalHandlerForShutdownRequest(postgres_signal_arg);
  if (statement_running && cancel_on_shutdown && !proc_exit_inprogress) CancelStatement();
  errno = save_errno;
}

bool ShutdownRequested() { return ShutdownRequestPending; }

void BeginExitWork() {
  cancel_on_shutdown = false;
  Call([] {
    AbortCurrentTransaction();
    pgstat_report_activity(STATE_IDLE, nullptr);
    // The cancel may have come after the statement's last CHECK_FOR_INTERRUPTS.
    QueryCancelPending = false;
  });
  BeginWork("statesman: stopping");
  // A server shutdown waits for this process: the exit work must not wait long for a lock.
  if (ShutdownRequestPending) QueryValue("SELECT pg_catalog.set_config('lock_timeout', '1s', true)");
}

int64 NowMillis() {
  return Call([] { return static_cast<int64>(GetCurrentTimestamp() / 1000); });
}

void BeginWork(const char *activity) {
  Call([&] {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "statesman: SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, activity);
  });
}

void EndWork() {
  Call([] {
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    pgstat_report_stat(false);
    pgstat_report_activity(STATE_IDLE, nullptr);
  });
}

std::vector<Row> Query(const char *sql, const std::vector<Value> &params) {
  const int nargs = static_cast<int>(params.size());
  // Parameters and results cross as palloc'd C strings, so that no C++ object is created
  // while PostgreSQL may raise an error.
  std::vector<Oid> types(nargs, TEXTOID);
  std::vector<Datum> values(nargs);
  std::vector<char> nulls(nargs, ' ');
  std::vector<const char *> texts(nargs, nullptr);
  for (int i = 0; i < nargs; ++i) {
    if (params[i].has_value())
      texts[i] = params[i]->c_str();
    else
      nulls[i] = 'n';
  }
  uint64 nrows = 0;
  int ncols = 0;
  RunningStatement running;
  SPIPlanPtr plan = KeptPlan(sql, nargs, types.data());
  char **cells = Call([&] {
    for (int i = 0; i < nargs; ++i)
      if (texts[i] != nullptr) values[i] = CStringGetTextDatum(texts[i]);
    int rc = plan != nullptr ? SPI_execute_plan(plan, values.data(), nulls.data(), false, 0)
                             : SPI_execute_with_args(sql, nargs, types.data(), values.data(), nulls.data(), false, 0);
    if (rc < 0) elog(ERROR, "statesman: query failed (%s): %s", SPI_result_code_string(rc), sql);
    nrows = SPI_processed;
    char **out = nullptr;
    if (SPI_tuptable != nullptr && nrows > 0) {
      ncols = SPI_tuptable->tupdesc->natts;
      out = static_cast<char **>(palloc0(sizeof(char *) * nrows * ncols));
      for (uint64 r = 0; r < nrows; ++r)
        for (int c = 0; c < ncols; ++c)
          out[r * ncols + c] = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, c + 1);
    }
    SPI_freetuptable(SPI_tuptable);
    return out;
  });
  std::vector<Row> rows;
  rows.reserve(nrows);
  for (uint64 r = 0; r < nrows; ++r) {
    Row row(ncols);
    for (int c = 0; c < ncols; ++c)
      if (cells[r * ncols + c] != nullptr) row[c] = std::string(cells[r * ncols + c]);
    rows.push_back(std::move(row));
  }
  return rows;
}

Value QueryValue(const char *sql, const std::vector<Value> &params) {
  std::vector<Row> rows = Query(sql, params);
  if (rows.empty() || rows[0].empty()) return std::nullopt;
  return rows[0][0];
}

std::optional<std::string> InSubtransaction(const std::function<void()> &query) {
  MemoryContext context = CurrentMemoryContext;
  ResourceOwner owner = CurrentResourceOwner;
  Call([&] {
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(context);
  });
  try {
    query();
  } catch (const PgError &e) {
    bool cancel = e.Data() != nullptr && e.Data()->sqlerrcode == ERRCODE_QUERY_CANCELED;
    std::string message = e.what();
    Call([&] {
      RollbackAndReleaseCurrentSubTransaction();
      MemoryContextSwitchTo(context);
      CurrentResourceOwner = owner;
    });
    if (cancel) throw;
    return message;
  } catch (...) {
    // Any other exception (a C++ error of the body) still ends the subtransaction it began.
    Call([&] {
      RollbackAndReleaseCurrentSubTransaction();
      MemoryContextSwitchTo(context);
      CurrentResourceOwner = owner;
    });
    throw;
  }
  Call([&] {
    ReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(context);
    CurrentResourceOwner = owner;
  });
  return std::nullopt;
}

bool HandleInterrupts() {
  Call([] {
    CHECK_FOR_INTERRUPTS();
    if (ConfigReloadPending) {
      ConfigReloadPending = false;
      ProcessConfigFile(PGC_SIGHUP);
    }
  });
  return guc_enabled && !ShutdownRequestPending;
}

void CheckForInterrupts() {
  Call([] { CHECK_FOR_INTERRUPTS(); });
}

bool StopRequested() { return ProcDiePending || QueryCancelPending || ShutdownRequestPending || !PostmasterIsAlive(); }

bool ExtensionInstalled() {
  return QueryValue("SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'statesman'").has_value();
}

bool WaitForLatch(int64_t timeout_ms) {
  if (timeout_ms < 0) timeout_ms = 0;
  int rc = Call([&] {
    int events = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, static_cast<long>(timeout_ms),
                           PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    return events;
  });
  HandleInterrupts();
  return (rc & WL_LATCH_SET) != 0;
}

void SleepWithoutHints(int64_t timeout_ms) {
  if (timeout_ms <= 0) return;
  Call([&] {
    (void)WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, static_cast<long>(timeout_ms), PG_WAIT_EXTENSION);
  });
}

void ResetHints() {
  Call([] { ResetLatch(MyLatch); });
}

void WaitUntil(int64_t deadline_ms) {
  for (int64_t now = NowMillis(); now < deadline_ms; now = NowMillis()) {
    WaitForLatch(deadline_ms - now);
    if (!guc_enabled || ShutdownRequestPending) return;
  }
}

void Log(LogLevel level, const std::string &message, const std::string &detail) {
  const char *msg = message.c_str();
  const char *det = detail.empty() ? nullptr : detail.c_str();
  if (level == LogLevel::kError) {
    // An ERROR-level line in the log without aborting anything: raise, then report and
    // swallow it right here.
    MemoryContext context = CurrentMemoryContext;
    PG_TRY();
    {
      ereport(ERROR, (errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION), errmsg_internal("%s", msg),
                      det != nullptr ? errdetail_internal("%s", det) : 0));
    }
    PG_CATCH();
    {
      MemoryContextSwitchTo(context);
      EmitErrorReport();
      FlushErrorState();
    }
    PG_END_TRY();
    return;
  }
  Call([&] {
    ereport(level == LogLevel::kWarning ? WARNING : LOG,
            (errmsg_internal("%s", msg), det != nullptr ? errdetail_internal("%s", det) : 0));
  });
}

int64_t ToInt(const Value &value, int64_t fallback) {
  if (!value.has_value() || value->empty()) return fallback;
  return std::stoll(*value);
}

void RunUntilExtensionDropped(const std::function<void()> &loop) {
  try {
    loop();
  } catch (const PgError &e) {
    // Copy what the report needs: the error's memory goes with the aborted transaction.
    const char *sqlstate = Call([&] { return unpack_sql_state(e.Data()->sqlerrcode); });
    std::string state(sqlstate);
    std::string message = e.what();
    Call([] {
      AbortCurrentTransaction();
      pgstat_report_activity(STATE_IDLE, nullptr);
    });
    BeginWork("statesman: checking the extension");
    bool installed = ExtensionInstalled();
    EndWork();
    if (!installed) {
      Log(LogLevel::kLog, "statesman: the extension was dropped; " + std::string(MyBgworkerEntry->bgw_type) + " stops");
      return;
    }
    static char saved_state[6];
    strlcpy(saved_state, state.c_str(), sizeof saved_state);
    throw Error(saved_state, message);
  }
}

}  // namespace statesman::pg
