// The workers' timing rules (src/worker/backoff.cpp): retry backoff, parking, the sink call's
// deadline under the lease, the rate limit on failure warnings, the gathering between ticks.
#include "statesman/worker/backoff.hpp"

#include "tap.hpp"

using statesman::worker::GatherMillis;
using statesman::worker::LeaseClock;
using statesman::worker::Millis;
using statesman::worker::OutboxSettings;
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

// The database worker's gathering between ticks: 1.5 ms per position a millisecond, 1 to 10 ms.
static void TestGatherMillis() {
  CHECK_EQ(GatherMillis(1, 5000000), Millis{1}, "GatherMillis: one position after a quiet spell waits 1 ms");
  CHECK_EQ(GatherMillis(0, 1000), Millis{1}, "GatherMillis: never less than 1 ms");
  CHECK_EQ(GatherMillis(2, 2000), Millis{1}, "GatherMillis: 1,000 a second: 1.5 ms, whole milliseconds down");
  CHECK_EQ(GatherMillis(4, 2000), Millis{3}, "GatherMillis: 2,000 a second waits 3 ms");
  CHECK_EQ(GatherMillis(15, 5000), Millis{4}, "GatherMillis: 3,000 a second waits 4 ms");
  CHECK_EQ(GatherMillis(100, 10000), Millis{10}, "GatherMillis: 10,000 a second is capped at 10 ms");
  CHECK_EQ(GatherMillis(1000000, 1), Millis{10}, "GatherMillis: a huge rate stays at the cap");
  CHECK_EQ(GatherMillis(5, 0), Millis{10}, "GatherMillis: no time elapsed counts as a microsecond (no division by 0)");
  CHECK_EQ(GatherMillis(-3, 1000), Millis{1}, "GatherMillis: a head that went back waits 1 ms");
  // The rate, not the tick's size: 40 positions over 40 ms is 1,000 a second.
  CHECK_EQ(GatherMillis(40, 40000), Millis{1}, "GatherMillis: a big tick after a long gap is a slow rate");
}

int main() {
  TestRetryDelay();
  TestRetryAfter();
  TestShouldPark();
  TestLeaseClock();
  TestWarningLimiter();
  TestGatherMillis();
  return unit::Done();
}
