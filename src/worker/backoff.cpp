// Timing rules of the workers (see backoff.hpp).
#include "statesman/worker/backoff.hpp"

#include <algorithm>

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
constexpr double kGatherPerRate = 1.5;  // ms of gathering per position a millisecond
constexpr Millis kGatherMinMs = 1;
constexpr Millis kGatherMaxMs = 10;
}  // namespace

Millis GatherMillis(int64_t positions, int64_t elapsed_us) {
  double per_ms = static_cast<double>(std::max<int64_t>(positions, 0)) * 1000.0 /
                  static_cast<double>(std::max<int64_t>(elapsed_us, 1));
  double gather = std::min(kGatherPerRate * per_ms, static_cast<double>(kGatherMaxMs));
  return std::max<Millis>(static_cast<Millis>(gather), kGatherMinMs);
}

}  // namespace statesman::worker
