// The sink interface (docs/design.md §6). A sink takes pages of statesman.state-change/v1 messages and
// says whether every one of them was durably accepted. Sink code is plain C++: it never
// includes PostgreSQL headers and never calls PostgreSQL; the dispatcher (src/worker/dispatcher.cpp)
// reads the page, calls the sink, and moves the cursor only after the sink said yes.
//
// Adding a sink: one file under src/sinks/ that defines a SinkType (its name, its option
// check, how to open it), one line in src/sinks/sink_types.cpp, one line in the Makefile, and
// its tests against a real server.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace statesman::sink {

using Clock = std::chrono::steady_clock;

// One message of a page.
struct Message {
  int64_t position = 0;  // the record's globalPosition
  std::string id;        // messageId, "{store}/{address}#{revision}"
  std::string json;      // the whole message, as JSON text
};

// What a sink did with a page.
struct Outcome {
  bool ok = false;           // every message is in the sink (published or already there)
  int64_t published = 0;     // newly accepted
  int64_t deduplicated = 0;  // found already there (a re-delivery)
  std::string error;         // why not ok; never holds a secret
  // When not ok: how long the sink asked to wait before the next attempt (an HTTP receiver's
  // Retry-After), 0 for no wish. The dispatcher waits at least that long, but never longer than
  // the outbox's max_retry_delay (worker::RetryDelay).
  int64_t retry_after_ms = 0;
};

// The limits of one call into a sink. A sink never blocks past `deadline`, and while it waits
// for I/O it calls `cancelled()` at least every kCancelCheck; when that returns true (a
// SIGTERM, the postmaster's death, a query cancel) it gives up at once with !ok.
struct Budget {
  Clock::time_point deadline;
  std::function<bool()> cancelled;

  static constexpr std::chrono::milliseconds kCancelCheck{100};
};

class Sink {
 public:
  virtual ~Sink() = default;
  // Hands one page to the sink, in globalPosition order. Connects (or reconnects) as needed.
  // ok only when every message was durably accepted; otherwise the dispatcher keeps its
  // cursor and retries the whole page later, so a sink must accept a page it already took
  // (counting those messages as deduplicated).
  virtual Outcome Publish(const std::vector<Message> &page, const Budget &budget) = 0;

  // The same in two steps, so that the dispatcher can prepare its next page while the sink
  // works: Start sends what it can without waiting for the sink's answer, Finish waits for the
  // answer (within the budget given to Start). `page` must stay alive until Finish. A Start
  // without its Finish (the dispatcher failed in between) is abandoned by the next Start. By
  // default Start only remembers the page and Finish publishes it.
  virtual void Start(const std::vector<Message> &page, const Budget &budget) {
    started_page_ = &page;
    started_budget_ = budget;
  }
  virtual Outcome Finish() {
    const std::vector<Message> *page = started_page_;
    started_page_ = nullptr;
    if (page == nullptr) return Outcome{false, 0, 0, "sink: Finish without Start"};
    return Publish(*page, started_budget_);
  }
  // The dispatcher is about to free the started page, finished or not (it may have failed before
  // Finish): when this returns, the sink no longer reads it (a sink that works on the page in a
  // thread of its own stops that work). An unfinished page's fate is left to the next Start.
  virtual void Forget() noexcept { started_page_ = nullptr; }

 private:
  const std::vector<Message> *started_page_ = nullptr;
  Budget started_budget_;
};

// A kind of sink, as registered in src/sinks/sink_types.cpp.
struct SinkType {
  const char *name;
  // A sink that writes into the dispatcher's own database: SQL delivers its pages inside the
  // page's transaction (exactly-once), and it has no Sink object. Only `table` is one.
  bool in_database;
  // Checks the options (a JSON object as text) and returns them as stored, defaults filled in.
  // Throws statesman::Error (22023) naming the option and the rule. Not used when in_database.
  std::string (*check_options)(const std::string &options_json);
  // Opens a sink on options that check_options returned. Does no I/O: Publish connects.
  std::unique_ptr<Sink> (*open)(const std::string &options_json);
  // For a sink that logs in with the server's OS identity (libpq: trust, peer, a password
  // file): whether the options carry a password of their own, which an outbox of a
  // non-superuser must give (postgres_fdw's password_required). nullptr: the rule does not apply.
  bool (*gives_password)(const std::string &options_json);
};

// Every sink this build knows, `table` first.
const std::vector<const SinkType *> &SinkTypes();
// The sink named `name`, or nullptr.
const SinkType *FindSink(const std::string &name);

// The common "timeout_ms" option: 1 ms … 1 hour, and shorter than the outbox's lease_ttl
// (statesman._check_sink_timeout). A sink stores it only when given; without it a call gets
// kDefaultTimeoutMillis, or half the lease when that is shorter (the dispatcher decides).
inline constexpr int64_t kDefaultTimeoutMillis = 5000;

// The per-call timeout of a sink's options ("timeout_ms"), or `fallback` when it has none.
int64_t TimeoutMillis(const std::string &options_json, int64_t fallback);

}  // namespace statesman::sink
