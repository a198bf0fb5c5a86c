// A circuit breaker for one ensemble step's model: after enough failures it opens, and requests
// fail fast (or go to a fallback model) instead of queueing behind a model that is failing; after
// a cool-down it lets a few probe requests through (half-open), and closes again when they
// succeed, or opens again when one fails.
//
// It opens on either rule the policy sets: `consecutive_failures` failures in a row, or an error
// rate above `error_rate` over the last `window` (once at least `min_requests` answered in it).
// Failures are the model's, not the client's: INTERNAL, UNAVAILABLE, DEADLINE_EXCEEDED and
// RESOURCE_EXHAUSTED count; a bad request (INVALID_ARGUMENT, NOT_FOUND) or a cancel does not.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"

namespace inferd {

struct BreakerPolicy {
  int64_t consecutive_failures = 0;  // 0: this rule is off
  double error_rate = 0;             // 0: this rule is off; else in (0, 1]
  std::chrono::nanoseconds window = std::chrono::seconds(10);
  int64_t min_requests = 10;
  std::chrono::nanoseconds cool_down = std::chrono::seconds(5);
  int64_t probes = 1;     // requests let through at a time while half-open
  std::string fallback;   // a model that takes the step's requests while open ("": fail fast)
};

// "consecutive_failures=5,error_rate=0.5,window_seconds=10,min_requests=10,cool_down_seconds=5,
// probes=1,fallback=model"; every key optional, at least one opening rule.
StatusOr<BreakerPolicy> ParseBreakerPolicy(const std::string& text);

enum class BreakerState { kClosed = 0, kOpen = 1, kHalfOpen = 2 };
std::string_view BreakerStateName(BreakerState state);

// Whether a step's answer counts against its model.
bool CountsAsFailure(const Status& status);

class CircuitBreaker {
 public:
  CircuitBreaker(BreakerPolicy policy, const Clock* clock);

  // Whether a request may go to the model now. Half-open, at most `probes` at a time are let
  // through; every request let through must be answered with Record.
  bool Allow();
  void Record(const Status& status);

  BreakerState state() const;
  const BreakerPolicy& policy() const { return policy_; }

 private:
  void Open(TimePoint now) REQUIRES(mu_);
  void Forget(TimePoint now) REQUIRES(mu_);

  const BreakerPolicy policy_;
  const Clock* const clock_;
  mutable Mutex mu_;
  BreakerState state_ GUARDED_BY(mu_) = BreakerState::kClosed;
  TimePoint opened_at_ GUARDED_BY(mu_){};
  int64_t consecutive_ GUARDED_BY(mu_) = 0;
  int64_t probes_in_flight_ GUARDED_BY(mu_) = 0;
  // The window's answers, oldest first: (when, failed).
  std::deque<std::pair<TimePoint, bool>> recent_ GUARDED_BY(mu_);
  int64_t recent_failures_ GUARDED_BY(mu_) = 0;
};

}  // namespace inferd
