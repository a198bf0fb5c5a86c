// Time in the serving path. Components take `now` as an argument (pure decisions) or hold a Clock
// so tests can drive time by hand instead of sleeping.
#pragma once

#include <atomic>
#include <chrono>

namespace inferd {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
using Micros = std::chrono::microseconds;
using Nanos = std::chrono::nanoseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

class RealClock final : public Clock {
 public:
  TimePoint Now() const override { return SteadyClock::now(); }
};

// A clock that moves only when told to.
class ManualClock final : public Clock {
 public:
  TimePoint Now() const override { return TimePoint(Nanos(now_ns_.load())); }
  void Advance(Nanos delta) { now_ns_ += delta.count(); }

 private:
  std::atomic<int64_t> now_ns_{1'000'000'000};
};

inline int64_t ToNanos(Nanos d) { return d.count(); }
inline int64_t NanosBetween(TimePoint from, TimePoint to) {
  return std::chrono::duration_cast<Nanos>(to - from).count();
}
// Nanoseconds as seconds, the unit of every exported duration.
inline double NanosToSeconds(int64_t nanoseconds) { return static_cast<double>(nanoseconds) * 1e-9; }

}  // namespace inferd
