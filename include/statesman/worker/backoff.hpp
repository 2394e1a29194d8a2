// The workers' timing rules, free of PostgreSQL: the dispatcher's retry backoff, lease renewal
// and rate limit on failure warnings, and the database worker's gathering between ticks. Pure C++, no shared state:
// each object belongs to one dispatcher (not thread-safe by itself, and never needs to be).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace statesman::worker {

using Millis = int64_t;

// One outbox's settings as the dispatcher uses them (docs/design.md §4), durations in milliseconds.
struct OutboxSettings {
  std::string outbox_id;
  std::string sink;
  std::string sink_options;    // JSON text, as stored (may hold secrets: never log it)
  Millis sink_timeout = 5000;  // one sink call's limit (the options' timeout_ms)
  bool enabled = false;
  bool require_lease = true;
  int batch_size = 1000;
  Millis poll_interval = 1000;
  Millis lease_ttl = 30000;
  Millis lease_renew_interval = 10000;  // already resolved: lease_ttl / 3 when not set
  Millis min_retry_delay = 200;
  Millis max_retry_delay = 15000;
  std::optional<int> skip_poison_after_attempts;
};

// The wait before the next attempt after `attempts` consecutive failures (attempts >= 1):
// min_retry_delay doubled per further failure, capped at max_retry_delay.
Millis RetryDelay(const OutboxSettings &settings, int attempts);

// The same when the sink asked for a wait of its own (sink::Outcome::retry_after_ms, an HTTP
// receiver's Retry-After): the longer of the two, but never beyond max_retry_delay. A wish of 0
// or less is no wish.
Millis RetryDelay(const OutboxSettings &settings, int attempts, Millis retry_after);

// True when a batch that failed `attempts` times in a row is to be skipped and parked.
bool ShouldPark(const OutboxSettings &settings, int attempts);

// When the leader renews: every lease_renew_interval measured from the last successful
// renewal, never from the volume of work, so lease traffic scales with time only.
class LeaseClock {
 public:
  void Acquired(Millis now) { last_renewal_ = now; }
  void Renewed(Millis now) { last_renewal_ = now; }
  bool RenewDue(const OutboxSettings &settings, Millis now) const {
    return now - last_renewal_ >= settings.lease_renew_interval;
  }
  Millis NextRenewal(const OutboxSettings &settings) const { return last_renewal_ + settings.lease_renew_interval; }
  // When a sink call that starts at `now` must have ended: its timeout, but never later than
  // shortly before the lease would expire, so a hung sink cannot outlive the lease.
  Millis SinkDeadline(const OutboxSettings &settings, Millis now) const;

 private:
  Millis last_renewal_ = 0;
};

// Lets one failure warning through per `interval`; counts the ones held back meanwhile, so a
// long outage cannot flood the log and the next line says how many were suppressed.
class WarningLimiter {
 public:
  explicit WarningLimiter(Millis interval) : interval_(interval) {}
  // True when a warning may be logged now; *suppressed is set to how many were held back.
  bool Allow(Millis now, int64_t *suppressed);

 private:
  Millis interval_;
  std::optional<Millis> last_;
  int64_t held_back_ = 0;
};

// The rate at which a feed's positions come, as the database worker sees it from tick to tick:
// an average that forgets with time (a tick's count weighs e^-1 after 50 ms), so that it follows
// a change of load within some tens of milliseconds, yet a few commits that happen to fall
// into one short gathering do not look like a burst.
class PositionRate {
 public:
  // A tick found `positions` new positions, `elapsed_us` microseconds after the tick before it
  // that found some began.
  void Note(int64_t positions, int64_t elapsed_us);
  // Positions a millisecond (0 before the first tick).
  double PerMs() const;

 private:
  double positions_ = 0;
  double elapsed_us_ = 0;
};

// The database worker's wait after a tick that found records, before the next one, at a rate of
// `per_ms` positions a millisecond: one and a half milliseconds per position a millisecond up to
// 1,300 a second (a wait of 1 ms, whole milliseconds down), six more per position a millisecond
// above that, from 1 ms up to 10 ms. So a quiet or moderately busy feed (up to about 1,300
// appends a second) ticks after 1 ms; 2,000 a second after 6 ms (some 13 positions a tick);
// 2,650 a second or more after 10 ms. Each tick costs a row of statesman.ticks, its index entries
// and its commit, about 400 bytes of WAL. With a slope of one and a half throughout, 1,900 a second
// waited 2 ms and a tick held some seven records (measured): about 75 bytes of WAL per record
// over the record's own 490. The steeper part starts above 1,300 a second, so that at 1,000 a
// second (where latency is measured) the wait stays 1 ms (docs/feed.md "What the ticks cost").
Millis GatherMillis(double per_ms);

}  // namespace statesman::worker
