// The two guards between PostgreSQL's longjmp-based errors and C++ exceptions.
//
//  * pg::Call(f)   runs f, which calls PostgreSQL, under PG_TRY. An ereport(ERROR) inside f is
//                  copied out of ErrorContext and thrown as pg::PgError, so C++ frames unwind
//                  normally instead of being skipped by longjmp.
//  * pg::Invoke(f) is the boundary of every SQL-callable function: it runs the C++ body and turns
//                  any exception back into an ERROR (re-throwing a captured ErrorData as it was,
//                  keeping its SQLSTATE). Nothing with a destructor is live when it reports.
//
// Only the code that talks to PostgreSQL (src/pg/, src/store/, src/feed/, src/worker/, the SQL
// entries of src/sinks/) includes this header (it pulls in postgres.h).
#pragma once

extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "utils/elog.h"
#include "utils/memutils.h"
}

#include <exception>
#include <type_traits>
#include <utility>

#include "statesman/error.hpp"

namespace statesman::pg {

// A PostgreSQL ERROR captured by pg::Call. The ErrorData lives in the memory context that was
// current when Call was entered, which outlives the unwinding up to Invoke.
class PgError : public std::exception {
 public:
  explicit PgError(ErrorData *edata) noexcept : edata_(edata) {}
  const char *what() const noexcept override {
    return edata_ != nullptr && edata_->message != nullptr ? edata_->message : "PostgreSQL error";
  }
  ErrorData *Data() const noexcept { return edata_; }

 private:
  ErrorData *edata_;
};

// Puts PG_exception_stack and error_context_stack back as they were when it was made, however
// its scope is left. PG_TRY's own restore (in PG_CATCH and PG_END_TRY) runs only when control
// reaches those macros; a C++ exception thrown inside the PG_TRY block skips both and would leave
// PG_exception_stack pointing at the sigjmp_buf of a frame that no longer exists, so that the
// next ereport(ERROR), until an enclosing PG_TRY ends and restores its own, would longjmp into
// it. No body passed to Call throws today (the bodies call PostgreSQL and plain C only; none
// nests a Call or calls C++ that throws), so no SQL call reaches that path; but nothing stops
// the next body from doing so, and this scope turns what would be a crash at some unrelated
// later ERROR into a plain exception. test/sql/guard.sql checks it through
// statesman_check_call_guard (src/pg/guard.cpp).
class ErrorStackScope {
 public:
  ErrorStackScope() noexcept : exception_stack_(PG_exception_stack), context_stack_(error_context_stack) {}
  ~ErrorStackScope() {
    PG_exception_stack = exception_stack_;
    error_context_stack = context_stack_;
  }
  ErrorStackScope(const ErrorStackScope &) = delete;
  ErrorStackScope &operator=(const ErrorStackScope &) = delete;

 private:
  sigjmp_buf *exception_stack_;
  ErrorContextCallback *context_stack_;
};

// Runs f() and converts an ereport(ERROR) raised inside it into a thrown PgError. A C++
// exception thrown by f() passes through unchanged, with PostgreSQL's error stacks restored.
// f must return void or a trivially destructible value (a Datum, a pointer, an integer).
// (result is read only when no longjmp happened, so -Wclobbered does not apply to it.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wclobbered"
template <typename F>
auto Call(F &&f) -> decltype(f()) {
  using Result = decltype(f());
  static_assert(std::is_void_v<Result> || std::is_trivially_destructible_v<Result>,
                "pg::Call results must be trivially destructible");
  // Made before PG_TRY, so it lives in this frame, which the longjmp into PG_CATCH keeps.
  ErrorStackScope restore_error_stacks;
  MemoryContext caller_context = CurrentMemoryContext;
  ErrorData *volatile captured = nullptr;
  std::conditional_t<std::is_void_v<Result>, int, Result> result{};

  PG_TRY();
  {
    if constexpr (std::is_void_v<Result>)
      f();
    else
      result = f();
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(caller_context);
    captured = CopyErrorData();
    FlushErrorState();
  }
  PG_END_TRY();

  if (captured != nullptr) throw PgError(captured);
  if constexpr (!std::is_void_v<Result>) return result;
}
#pragma GCC diagnostic pop

// Inside a catch handler: copies what is needed to report the current exception into
// static storage, so that nothing of it is still alive when the ERROR longjmps.
void CaptureCurrentException() noexcept;

// After the handler has ended: reports the captured exception as an ERROR; never returns.
[[noreturn]] void ReportCapturedException();

// Runs the C++ body of a SQL-callable function. body returns a Datum (or another trivially
// destructible value). Any exception becomes an ERROR after the C++ frames have unwound.
template <typename F>
auto Invoke(F &&body) -> decltype(body()) {
  try {
    return body();
  } catch (...) {
    CaptureCurrentException();
  }
  ReportCapturedException();
}

}  // namespace statesman::pg
