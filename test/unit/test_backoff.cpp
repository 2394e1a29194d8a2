// The workers' timing rules (src/worker/backoff.cpp): retry backoff, parking, the sink call's
// deadline under the lease, the rate limit on failure warnings, the gathering between ticks.
#include "statesman/worker/backoff.hpp"

#include <cmath>

#include "tap.hpp"

using statesman::worker::GatherMillis;
using statesman::worker::LeaseClock;
using statesman::worker::Millis;
using statesman::worker::OutboxSettings;
using statesman::worker::PositionRate;
using statesman::worker::RetryDelay;
using statesman::worker::ShouldPark;
using statesman::worker::WarningLimiter;

static void TestRetryDelay() {
  OutboxSettings s;  // min_retry_delay 200, max_retry_delay 15000
  CHECK_EQ(RetryDelay(s, 1), Millis{200}, "RetryDelay: the first failure waits min_retry_delay");
  CHECK_EQ(RetryDelay(s, 2), Millis{400}, "RetryDelay: the second failure waits twice as long");
  CHECK_EQ(RetryDelay(s, 3), Millis{800}, "RetryDelay: doubles per further failure");
  CHECK_EQ(RetryDelay(s, 7), Millis{12800}, "RetryDelay: 200 * 2^6 after 7 failures, under the cap");
  CHECK_EQ(RetryDelay(s, 8), Millis{15000}, "RetryDelay: capped at max_retry_delay (25600 > 15000)");
  CHECK_EQ(RetryDelay(s, 1000000), Millis{15000}, "RetryDelay: a huge attempt count stays at the cap (no overflow)");
  CHECK_EQ(RetryDelay(s, 0), Millis{200}, "RetryDelay: attempts below 1 wait min_retry_delay");

  OutboxSettings zero;
  zero.min_retry_delay = 0;
  CHECK_EQ(RetryDelay(zero, 1), Millis{1}, "RetryDelay: min_retry_delay 0 still waits 1 ms");
  CHECK_EQ(RetryDelay(zero, 4), Millis{8}, "RetryDelay: and doubles from 1 ms");

  OutboxSettings inverted;
  inverted.min_retry_delay = 20000;
  inverted.max_retry_delay = 15000;
  CHECK_EQ(RetryDelay(inverted, 1), Millis{15000}, "RetryDelay: max_retry_delay wins over a larger min");

  OutboxSettings big;
  big.min_retry_delay = 1000;
  big.max_retry_delay = int64_t{1} << 62;
  CHECK_EQ(RetryDelay(big, 40), Millis{1000} << 39, "RetryDelay: 2^39 s after 40 failures with a huge cap");
}

// A sink's wish for a wait (sink::Outcome::retry_after_ms, an HTTP Retry-After).
static void TestRetryAfter() {
  OutboxSettings s;  // min_retry_delay 200, max_retry_delay 15000
  CHECK_EQ(RetryDelay(s, 1, 0), Millis{200}, "RetryDelay with no wish (0): the backoff");
  CHECK_EQ(RetryDelay(s, 1, -5), Millis{200}, "RetryDelay: a negative wish is no wish");
  CHECK_EQ(RetryDelay(s, 1, 2000), Millis{2000}, "RetryDelay: a wish longer than the backoff is waited");
  CHECK_EQ(RetryDelay(s, 5, 2000), Millis{3200}, "RetryDelay: a wish shorter than the backoff waits the backoff");
  CHECK_EQ(RetryDelay(s, 1, 60000), Millis{15000}, "RetryDelay: a wish beyond max_retry_delay waits max_retry_delay");
  CHECK_EQ(RetryDelay(s, 1, int64_t{1} << 62), Millis{15000}, "RetryDelay: a huge wish stays at the cap");
  OutboxSettings small;
  small.max_retry_delay = 1000;
  CHECK_EQ(RetryDelay(small, 1, 2000), Millis{1000}, "RetryDelay: Retry-After 2 s under a 1 s cap waits 1 s");
}

static void TestShouldPark() {
  OutboxSettings s;
  CHECK(!ShouldPark(s, 1000000), "ShouldPark: never without skip_poison_after_attempts");
  s.skip_poison_after_attempts = 3;
  CHECK(!ShouldPark(s, 2), "ShouldPark: not before skip_poison_after_attempts failures");
  CHECK(ShouldPark(s, 3), "ShouldPark: at skip_poison_after_attempts failures");
  CHECK(ShouldPark(s, 4), "ShouldPark: and after");
  s.skip_poison_after_attempts = 1;
  CHECK(ShouldPark(s, 1), "ShouldPark: skip_poison_after_attempts 1 parks after the first failure");
}

static void TestLeaseClock() {
  OutboxSettings s;  // lease_ttl 30000, renew every 10000, sink_timeout 5000
  LeaseClock clock;
  clock.Acquired(1000);
  CHECK(!clock.RenewDue(s, 10999), "LeaseClock: no renewal due before lease_renew_interval");
  CHECK(clock.RenewDue(s, 11000), "LeaseClock: renewal due lease_renew_interval after acquiring");
  CHECK_EQ(clock.NextRenewal(s), Millis{11000}, "LeaseClock: NextRenewal is acquisition + interval");
  CHECK_EQ(clock.SinkDeadline(s, 2000), Millis{7000}, "SinkDeadline: now + sink timeout while the lease is young");
  // Margin min(1000, 30000 / 10) = 1000: the call ends 1 s before the lease would expire.
  CHECK_EQ(clock.SinkDeadline(s, 27000), Millis{30000},
           "SinkDeadline: capped at lease expiry (1000 + 30000) minus a 1000 ms margin");
  CHECK_EQ(clock.SinkDeadline(s, 40000), Millis{30000}, "SinkDeadline: an expired lease leaves a deadline in the past");
  clock.Renewed(25000);
  CHECK_EQ(clock.SinkDeadline(s, 27000), Millis{32000}, "SinkDeadline: a renewal moves the cap on");
  CHECK(!clock.RenewDue(s, 34999), "LeaseClock: renewal interval counts from the last renewal");
  CHECK_EQ(clock.NextRenewal(s), Millis{35000}, "LeaseClock: NextRenewal follows the renewal");

  OutboxSettings short_lease;
  short_lease.lease_ttl = 5000;
  short_lease.sink_timeout = 10000;
  LeaseClock c2;
  c2.Acquired(0);
  CHECK_EQ(c2.SinkDeadline(short_lease, 0), Millis{4500},
           "SinkDeadline: a 5 s lease leaves a margin of a tenth (500 ms) to a longer sink timeout");
}

static void TestWarningLimiter() {
  WarningLimiter limiter(1000);
  int64_t suppressed = -1;
  CHECK(limiter.Allow(0, &suppressed), "WarningLimiter: the first warning passes");
  CHECK_EQ(suppressed, int64_t{0}, "WarningLimiter: with nothing suppressed before it");
  suppressed = -1;
  CHECK(!limiter.Allow(500, &suppressed), "WarningLimiter: a second within the interval is held back");
  CHECK(!limiter.Allow(999, &suppressed), "WarningLimiter: and a third");
  CHECK_EQ(suppressed, int64_t{-1}, "WarningLimiter: a held-back warning leaves *suppressed alone");
  CHECK(limiter.Allow(1000, &suppressed), "WarningLimiter: one passes once the interval is over");
  CHECK_EQ(suppressed, int64_t{2}, "WarningLimiter: and says two were suppressed");
  CHECK(!limiter.Allow(1999, &suppressed), "WarningLimiter: the interval counts from the last one let through");
  CHECK(limiter.Allow(5000, &suppressed), "WarningLimiter: passes after a long quiet spell");
  CHECK_EQ(suppressed, int64_t{1}, "WarningLimiter: the count restarts after each warning let through");
}

// The database worker's gathering between ticks: 1.5 ms per position a millisecond up to 1.3 a
// millisecond, 6 ms per position a millisecond above, 1 to 10 ms, whole milliseconds down.
static void TestGatherMillis() {
  CHECK_EQ(GatherMillis(0.0), Millis{1}, "GatherMillis: never less than 1 ms");
  CHECK_EQ(GatherMillis(0.2), Millis{1}, "GatherMillis: 200 a second waits 1 ms");
  CHECK_EQ(GatherMillis(1.0), Millis{1}, "GatherMillis: 1,000 a second: 1.5 ms, whole milliseconds down");
  CHECK_EQ(GatherMillis(1.3), Millis{1}, "GatherMillis: 1,300 a second: 1.95 ms, still 1 ms");
  CHECK_EQ(GatherMillis(1.5), Millis{3}, "GatherMillis: 1,500 a second: 1.95 + 1.2 ms");
  CHECK_EQ(GatherMillis(2.0), Millis{6}, "GatherMillis: 2,000 a second: 1.95 + 4.2 ms");
  CHECK_EQ(GatherMillis(2.6), Millis{9}, "GatherMillis: 2,600 a second: 9.75 ms");
  CHECK_EQ(GatherMillis(3.0), Millis{10}, "GatherMillis: 3,000 a second is capped at 10 ms");
  CHECK_EQ(GatherMillis(1e9), Millis{10}, "GatherMillis: a huge rate stays at the cap");
  CHECK_EQ(GatherMillis(-3.0), Millis{1}, "GatherMillis: a negative rate waits 1 ms");
}

// The rate the gathering follows: positions over time, the older ticks weighing less.
static void TestPositionRate() {
  PositionRate none;
  CHECK_EQ(none.PerMs(), 0.0, "PositionRate: no tick yet is a rate of 0");

  // A steady 1,000 a second, ticked every 2 ms: 1 a millisecond.
  PositionRate steady;
  for (int i = 0; i < 100; ++i) steady.Note(2, 2000);
  CHECK(std::fabs(steady.PerMs() - 1.0) < 1e-9, "PositionRate: 2 positions every 2 ms is 1 a millisecond");

  // A few commits that fall into one short gathering are no burst: 5 positions in 2 ms after a
  // steady 1,000 a second raise the rate by less than a tenth, where that tick alone says 2.5.
  steady.Note(5, 2000);
  CHECK(steady.PerMs() < 1.1, "PositionRate: one full tick barely moves a steady rate");
  CHECK_EQ(GatherMillis(steady.PerMs()), Millis{1}, "PositionRate: so the gathering stays at 1 ms");

  // A change of load shows within some tens of milliseconds: 2,000 a second after 1,000.
  for (int i = 0; i < 50; ++i) steady.Note(12, 6000);
  CHECK(std::fabs(steady.PerMs() - 2.0) < 0.05, "PositionRate: 300 ms at 2,000 a second reads as 2 a millisecond");

  // After a quiet spell the past is forgotten: one position after 5 s is a slow rate.
  steady.Note(1, 5000000);
  CHECK(steady.PerMs() < 0.001, "PositionRate: a tick after 5 s of quiet is a slow rate, whatever came before");
  CHECK_EQ(GatherMillis(steady.PerMs()), Millis{1}, "PositionRate: and waits 1 ms");

  // The rate, not the tick's size: 40 positions over 40 ms after a quiet spell is 1,000 a second.
  PositionRate big;
  big.Note(40, 40000);
  CHECK(std::fabs(big.PerMs() - 1.0) < 1e-9, "PositionRate: a big tick after a long gap is a slow rate");

  // Odd inputs: a head that went back counts as no position, no time elapsed as a microsecond.
  PositionRate odd;
  odd.Note(-3, 1000);
  CHECK_EQ(odd.PerMs(), 0.0, "PositionRate: a head that went back adds no position");
  PositionRate instant;
  instant.Note(5, 0);
  CHECK_EQ(instant.PerMs(), 5000.0, "PositionRate: no time elapsed counts as a microsecond (no division by 0)");
}

int main() {
  TestRetryDelay();
  TestRetryAfter();
  TestShouldPark();
  TestLeaseClock();
  TestWarningLimiter();
  TestGatherMillis();
  TestPositionRate();
  return unit::Done();
}
