#include "scheduler/latency_model.h"

#include <algorithm>
#include <cmath>

namespace inferd {
namespace {

// Weight of the newest execution time: about the last ten executions count, so a change shows
// within a few batches and one outlier does not swing the choice.
constexpr double kSmoothing = 0.125;

}  // namespace

LatencyModel::LatencyModel(int64_t max_batch_size, Nanos rate_window)
    : by_rows_(static_cast<size_t>(std::max<int64_t>(1, max_batch_size))),
      window_seconds_(std::max(1e-6, std::chrono::duration<double>(rate_window).count())) {}

void LatencyModel::RecordExecution(int64_t rows, Nanos took) {
  if (rows < 1) return;
  rows = std::min<int64_t>(rows, static_cast<int64_t>(by_rows_.size()));
  SizeStats& stats = by_rows_[static_cast<size_t>(rows - 1)];
  const double sample = static_cast<double>(took.count());
  if (stats.samples == 0) {
    stats.mean_ns = sample;
    stats.deviation_ns = sample / 4;  // unknown spread: assume some until measured
  } else {
    stats.deviation_ns += kSmoothing * (std::abs(sample - stats.mean_ns) - stats.deviation_ns);
    stats.mean_ns += kSmoothing * (sample - stats.mean_ns);
  }
  ++stats.samples;
  UpdateEstimates();
}

double LatencyModel::FadedCount(TimePoint now) const {
  if (!last_arrival_) return 0;
  const double age = std::max(0.0, std::chrono::duration<double>(now - *last_arrival_).count());
  return recent_rows_ * std::exp(-age / window_seconds_);
}

void LatencyModel::RecordArrival(int64_t rows, TimePoint at) {
  recent_rows_ = FadedCount(at) + static_cast<double>(std::max<int64_t>(1, rows));
  last_arrival_ = at;
}

std::optional<Nanos> LatencyModel::ExecutionTime(int64_t rows) const {
  if (estimates_.empty()) return std::nullopt;
  rows = std::clamp<int64_t>(rows, 1, static_cast<int64_t>(estimates_.size()));
  return estimates_[static_cast<size_t>(rows - 1)];
}

void LatencyModel::UpdateEstimates() {
  const size_t sizes = by_rows_.size();
  // The nearest measured size at or above each size, from a backward pass.
  std::vector<std::optional<size_t>> above(sizes);
  for (size_t i = sizes; i-- > 0;) {
    if (by_rows_[i].samples > 0) {
      above[i] = i;
    } else if (i + 1 < sizes) {
      above[i] = above[i + 1];
    }
  }
  estimates_.assign(sizes, Nanos(0));
  std::optional<size_t> below;  // the nearest measured size under the current one
  for (size_t i = 0; i < sizes; ++i) {
    double estimate = 0;
    if (by_rows_[i].samples > 0) {
      estimate = by_rows_[i].High();
      below = i;
    } else if (!below) {
      estimate = by_rows_[*above[i]].High();  // some size is measured: the caller recorded one
    } else {
      const double low = by_rows_[*below].High();
      const double below_rows = static_cast<double>(*below + 1);
      const double rows = static_cast<double>(i + 1);
      if (!above[i]) {
        estimate = low * rows / below_rows;
      } else {
        const double high = std::max(low, by_rows_[*above[i]].High());
        estimate = low + (rows - below_rows) / static_cast<double>(*above[i] - *below) * (high - low);
      }
    }
    estimates_[i] = Nanos(static_cast<int64_t>(estimate));
  }
}

double LatencyModel::ArrivalRate(TimePoint now) const { return FadedCount(now) / window_seconds_; }

}  // namespace inferd
