#include "pipeline/circuit_breaker.h"

#include "config/model_config.h"

namespace inferd {

namespace {

Status Invalid(const std::string& message) { return Status::InvalidArgument("circuit breaker: " + message); }

std::chrono::nanoseconds Seconds(double seconds) {
  return std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9));
}

}  // namespace

StatusOr<BreakerPolicy> ParseBreakerPolicy(const std::string& text) {
  BreakerPolicy policy;
  auto options = ParseOptionList(text);
  if (!options.ok()) return Invalid(options.status().message());
  for (const auto& [key, value] : *options) {
    if (key == "fallback") {
      if (value.empty()) return Invalid("fallback names no model");
      policy.fallback = value;
      continue;
    }
    auto parsed = ParseNonNegativeNumber(key, value);
    if (!parsed.ok()) return Invalid(parsed.status().message());
    const double number = *parsed;
    if (key == "consecutive_failures") {
      policy.consecutive_failures = static_cast<int64_t>(number);
    } else if (key == "error_rate") {
      if (number > 1) return Invalid("error_rate is a fraction in (0, 1], not " + value);
      policy.error_rate = number;
    } else if (key == "window_seconds") {
      policy.window = Seconds(number);
    } else if (key == "min_requests") {
      policy.min_requests = static_cast<int64_t>(number);
    } else if (key == "cool_down_seconds") {
      policy.cool_down = Seconds(number);
    } else if (key == "probes") {
      policy.probes = std::max<int64_t>(1, static_cast<int64_t>(number));
    } else {
      return Invalid("unknown key '" + key +
                     "' (expected consecutive_failures, error_rate, window_seconds, min_requests, "
                     "cool_down_seconds, probes, fallback)");
    }
  }
  if (policy.consecutive_failures == 0 && policy.error_rate == 0) {
    return Invalid("set consecutive_failures or error_rate, or it never opens");
  }
  if (policy.error_rate > 0 && policy.window.count() == 0) return Invalid("error_rate needs a window_seconds above 0");
  return policy;
}

std::string_view BreakerStateName(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half-open";
  }
  return "closed";
}

bool CountsAsFailure(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInternal:
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

CircuitBreaker::CircuitBreaker(BreakerPolicy policy, const Clock* clock) : policy_(std::move(policy)), clock_(clock) {}

bool CircuitBreaker::Allow() {
  MutexLock lock(&mu_);
  if (state_ == BreakerState::kClosed) return true;
  if (state_ == BreakerState::kOpen) {
    if (clock_->Now() - opened_at_ < policy_.cool_down) return false;
    state_ = BreakerState::kHalfOpen;
    probes_in_flight_ = 0;
  }
  if (probes_in_flight_ >= policy_.probes) return false;
  ++probes_in_flight_;
  return true;
}

void CircuitBreaker::Record(const Status& status) {
  const bool failed = CountsAsFailure(status);
  const TimePoint now = clock_->Now();
  MutexLock lock(&mu_);
  if (state_ == BreakerState::kHalfOpen) {
    --probes_in_flight_;
    if (failed) return Open(now);
    state_ = BreakerState::kClosed;  // the probe succeeded: start afresh
    consecutive_ = 0;
    recent_.clear();
    recent_failures_ = 0;
    return;
  }
  if (state_ == BreakerState::kOpen) return;  // let through before it opened
  consecutive_ = failed ? consecutive_ + 1 : 0;
  recent_.emplace_back(now, failed);
  recent_failures_ += failed ? 1 : 0;
  Forget(now);
  if (policy_.consecutive_failures > 0 && consecutive_ >= policy_.consecutive_failures) return Open(now);
  const auto answered = static_cast<int64_t>(recent_.size());
  if (policy_.error_rate > 0 && answered >= std::max<int64_t>(1, policy_.min_requests) &&
      static_cast<double>(recent_failures_) > policy_.error_rate * static_cast<double>(answered)) {
    Open(now);
  }
}

void CircuitBreaker::Open(TimePoint now) {
  state_ = BreakerState::kOpen;
  opened_at_ = now;
  consecutive_ = 0;
  recent_.clear();
  recent_failures_ = 0;
}

void CircuitBreaker::Forget(TimePoint now) {
  while (!recent_.empty() && now - recent_.front().first > policy_.window) {
    recent_failures_ -= recent_.front().second ? 1 : 0;
    recent_.pop_front();
  }
}

BreakerState CircuitBreaker::state() const {
  MutexLock lock(&mu_);
  // An open breaker whose cool-down passed reads half-open: the next request is a probe.
  if (state_ == BreakerState::kOpen && clock_->Now() - opened_at_ >= policy_.cool_down) return BreakerState::kHalfOpen;
  return state_;
}

}  // namespace inferd
