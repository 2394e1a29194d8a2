// Conversion of C++ exceptions into PostgreSQL ERRORs at the SQL boundary (see guard.hpp).
#include "statesman/pg/guard.hpp"

#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>

namespace statesman::pg {
namespace {

// A backend is single-threaded and reports one error at a time, so static storage is enough;
// it keeps the report path free of allocation.
ErrorData *captured_edata = nullptr;
char captured_sqlstate[6] = "XX000";
char captured_message[4096];
char captured_hint[1024];

void CopyText(char *dst, std::size_t size, const char *src) {
  std::snprintf(dst, size, "%s", src != nullptr ? src : "");
}

}  // namespace

void CaptureCurrentException() noexcept {
  captured_edata = nullptr;
  captured_hint[0] = '\0';
  CopyText(captured_sqlstate, sizeof captured_sqlstate, sqlstate::kInternalError);
  try {
    // Only ever called from inside a catch handler (pg::Invoke), so there is one to rethrow.
    // cppcheck-suppress rethrowNoCurrentException
    throw;
  } catch (const PgError &e) {
    captured_edata = e.Data();
  } catch (const statesman::Error &e) {
    CopyText(captured_sqlstate, sizeof captured_sqlstate, e.Sqlstate());
    CopyText(captured_message, sizeof captured_message, e.what());
    CopyText(captured_hint, sizeof captured_hint, e.Hint().c_str());
  } catch (const std::bad_alloc &) {
    CopyText(captured_sqlstate, sizeof captured_sqlstate, "53200");
    CopyText(captured_message, sizeof captured_message, "out of memory in statesman");
  } catch (const std::exception &e) {
    CopyText(captured_message, sizeof captured_message, e.what());
  } catch (...) {
    CopyText(captured_message, sizeof captured_message, "unknown C++ exception in statesman");
  }
}

void ReportCapturedException() {
  if (captured_edata != nullptr) {
    ErrorData *edata = captured_edata;
    captured_edata = nullptr;
    ReThrowError(edata);
  }
  const char *s = captured_sqlstate;
  int code = MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
  if (captured_hint[0] != '\0')
    ereport(ERROR, (errcode(code), errmsg("%s", captured_message), errhint("%s", captured_hint)));
  ereport(ERROR, (errcode(code), errmsg("%s", captured_message)));
  pg_unreachable();
}

}  // namespace statesman::pg

// ---- A self-test of pg::Call, for test/sql/guard.sql --------------------------------------------
// No SQL object of the extension calls it: no body passed to pg::Call throws a C++ exception
// today, so no SQL call reaches that path (see ErrorStackScope). A superuser's test declares
// it (CREATE FUNCTION … AS 'statesman', 'statesman_check_call_guard' LANGUAGE C) and checks
// that an exception thrown inside pg::Call leaves PostgreSQL's error stacks as they were, and
// that an ERROR after it is caught by the pg::Call around it.
extern "C" {
PG_FUNCTION_INFO_V1(statesman_check_call_guard);
}

extern "C" Datum statesman_check_call_guard(PG_FUNCTION_ARGS) {
  using namespace statesman::pg;
  bool ok = Invoke([] {
    sigjmp_buf *exception_stack = PG_exception_stack;
    ErrorContextCallback *context_stack = error_context_stack;
    try {
      Call([] { throw std::runtime_error("thrown inside pg::Call"); });
    } catch (const std::runtime_error &) {
    }
    bool restored = PG_exception_stack == exception_stack && error_context_stack == context_stack;
    bool caught = false;
    try {
      Call([] { elog(ERROR, "raised inside pg::Call"); });
    } catch (const PgError &) {
      caught = true;
    }
    return restored && caught && PG_exception_stack == exception_stack;
  });
  PG_RETURN_BOOL(ok);
}
