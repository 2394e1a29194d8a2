// Timing rules of the workers (see backoff.hpp).
#include "statesman/worker/backoff.hpp"

#include <algorithm>
#include <cmath>

namespace statesman::worker {

Millis RetryDelay(const OutboxSettings &settings, int attempts) {
  Millis delay = std::max<Millis>(settings.min_retry_delay, 1);
  for (int i = 1; i < attempts && delay < settings.max_retry_delay; ++i) delay *= 2;
  return std::min(delay, settings.max_retry_delay);
}

Millis RetryDelay(const OutboxSettings &settings, int attempts, Millis retry_after) {
  Millis delay = RetryDelay(settings, attempts);
  if (retry_after <= 0) return delay;
  return std::max(delay, std::min(retry_after, std::max<Millis>(settings.max_retry_delay, 1)));
}

bool ShouldPark(const OutboxSettings &settings, int attempts) {
  return settings.skip_poison_after_attempts.has_value() && attempts >= *settings.skip_poison_after_attempts;
}

Millis LeaseClock::SinkDeadline(const OutboxSettings &settings, Millis now) const {
  // The margin leaves time to commit the page and renew before the watchdog would call the
  // lease stuck.
  Millis margin = std::min<Millis>(1000, settings.lease_ttl / 10);
  return std::min(now + settings.sink_timeout, last_renewal_ + settings.lease_ttl - margin);
}

bool WarningLimiter::Allow(Millis now, int64_t *suppressed) {
  if (last_.has_value() && now - *last_ < interval_) {
    ++held_back_;
    return false;
  }
  *suppressed = held_back_;
  held_back_ = 0;
  last_ = now;
  return true;
}

namespace {
constexpr double kRateMemoryUs = 50000;    // a tick's count weighs e^-1 after this long
constexpr double kGatherPerRate = 1.5;     // ms of gathering per position a millisecond, up to:
constexpr double kSteepFromPerMs = 1.3;    // positions a millisecond, and above it:
constexpr double kGatherPerRateAbove = 6;  // ms per position a millisecond
constexpr Millis kGatherMinMs = 1;
constexpr Millis kGatherMaxMs = 10;
}  // namespace

void PositionRate::Note(int64_t positions, int64_t elapsed_us) {
  double elapsed = static_cast<double>(std::max<int64_t>(elapsed_us, 1));
  double keep = std::exp(-elapsed / kRateMemoryUs);
  positions_ = positions_ * keep + static_cast<double>(std::max<int64_t>(positions, 0));
  elapsed_us_ = elapsed_us_ * keep + elapsed;
}

double PositionRate::PerMs() const { return elapsed_us_ > 0 ? positions_ * 1000.0 / elapsed_us_ : 0; }

Millis GatherMillis(double per_ms) {
  double gather = kGatherPerRate * std::min(per_ms, kSteepFromPerMs) +
                  kGatherPerRateAbove * std::max(per_ms - kSteepFromPerMs, 0.0);
  gather = std::min(gather, static_cast<double>(kGatherMaxMs));
  return std::max<Millis>(static_cast<Millis>(gather), kGatherMinMs);
}

}  // namespace statesman::worker
