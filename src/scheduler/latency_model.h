// What the latency-target batcher knows of a model version's recent past: how long an execution
// of each batch size takes and how fast rows arrive. Not thread-safe: the Scheduler holds it under
// its lock.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/clock.h"

namespace inferd {

class LatencyModel {
 public:
  // `rate_window`: the time constant of the arrival rate (recent arrivals count, older ones fade).
  explicit LatencyModel(int64_t max_batch_size, Nanos rate_window = std::chrono::seconds(1));

  // One execution of `rows` rows took `took` (the instance was busy that long).
  void RecordExecution(int64_t rows, Nanos took);
  // `rows` rows were queued at `at`.
  void RecordArrival(int64_t rows, TimePoint at);

  // A high estimate of an execution of `rows` rows (mean plus two mean deviations, so that most
  // executions take less); nullopt before the first execution. Sizes not yet seen are
  // interpolated between their measured neighbours, held at the smallest measured time below
  // them, and grown in proportion to the rows above the largest: an execution never gets cheaper
  // per row by assumption, so the batcher only reaches for larger batches once it has seen them.
  std::optional<Nanos> ExecutionTime(int64_t rows) const;

  // Rows per second lately: an exponentially fading count of arrived rows over the rate window,
  // so simultaneous arrivals (a closed loop's clients all answered at once) count as what they
  // are, not as an infinite rate, and the rate falls off once nothing arrives. 0 at first.
  double ArrivalRate(TimePoint now) const;

 private:
  struct SizeStats {
    int64_t samples = 0;
    double mean_ns = 0;
    double deviation_ns = 0;  // mean absolute deviation
    double High() const { return mean_ns + 2 * deviation_ns; }
  };

  double FadedCount(TimePoint now) const;
  void UpdateEstimates();

  std::vector<SizeStats> by_rows_;  // index rows - 1
  // ExecutionTime for every size, rebuilt after each execution (O(sizes)) so that a batch
  // decision, made under the scheduler's lock, reads each size in O(1). Empty until the first.
  std::vector<Nanos> estimates_;
  double window_seconds_;
  std::optional<TimePoint> last_arrival_;
  double recent_rows_ = 0;  // rows arrived, each weighted by exp(-age / window), as of last_arrival_
};

}  // namespace inferd
