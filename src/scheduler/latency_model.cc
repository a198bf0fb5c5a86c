#include "scheduler/latency_model.h"

#include <algorithm>
#include <cmath>

namespace inferd {
namespace {

// Weight of the newest sample: about the last ten executions (or arrivals) count, so a burst
// shows within a few requests and one outlier does not swing the choice.
constexpr double kSmoothing = 0.125;

}  // namespace

LatencyModel::LatencyModel(int64_t max_batch_size) : by_rows_(static_cast<size_t>(std::max<int64_t>(1, max_batch_size))) {}

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
}

void LatencyModel::RecordArrival(int64_t rows, TimePoint at) {
  rows = std::max<int64_t>(1, rows);
  if (last_arrival_) {
    const double gap = std::max(0.0, std::chrono::duration<double>(at - *last_arrival_).count()) / static_cast<double>(rows);
    seconds_per_row_ = arrivals_ == 1 ? gap : seconds_per_row_ + kSmoothing * (gap - seconds_per_row_);
  }
  last_arrival_ = at;
  ++arrivals_;
}

std::optional<Nanos> LatencyModel::ExecutionTime(int64_t rows) const {
  rows = std::clamp<int64_t>(rows, 1, static_cast<int64_t>(by_rows_.size()));
  const auto index = static_cast<size_t>(rows - 1);
  if (by_rows_[index].samples > 0) return Nanos(static_cast<int64_t>(by_rows_[index].High()));
  std::optional<size_t> below;
  std::optional<size_t> above;
  for (size_t i = index; i-- > 0;) {
    if (by_rows_[i].samples > 0) {
      below = i;
      break;
    }
  }
  for (size_t i = index + 1; i < by_rows_.size(); ++i) {
    if (by_rows_[i].samples > 0) {
      above = i;
      break;
    }
  }
  if (!below && !above) return std::nullopt;
  if (!below) return Nanos(static_cast<int64_t>(by_rows_[*above].High()));
  const double low = by_rows_[*below].High();
  const double below_rows = static_cast<double>(*below + 1);
  if (!above) return Nanos(static_cast<int64_t>(low * static_cast<double>(rows) / below_rows));
  const double high = std::max(low, by_rows_[*above].High());
  const double fraction = (static_cast<double>(rows) - below_rows) / static_cast<double>(*above - *below);
  return Nanos(static_cast<int64_t>(low + fraction * (high - low)));
}

double LatencyModel::ArrivalRate(TimePoint now) const {
  if (arrivals_ < 2) return 0;
  const double silence = std::max(0.0, std::chrono::duration<double>(now - *last_arrival_).count());
  const double seconds_per_row = std::max(seconds_per_row_, silence);
  return seconds_per_row <= 0 ? 1e9 : 1.0 / seconds_per_row;
}

}  // namespace inferd
