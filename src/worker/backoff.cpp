// Timing rules of the dispatcher (see backoff.hpp).
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

}  // namespace statesman::worker
