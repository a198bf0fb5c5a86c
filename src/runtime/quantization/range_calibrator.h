// Activation ranges for post-training quantisation. A RangeCollector watches one tensor over the
// calibration batches (its min, max and a histogram of |x|); Threshold() then turns that into the
// T of a symmetric range [-T, T] (or [0, T] for a tensor never negative, e.g. after Relu) by one of
// three methods:
//   minmax      T = max |x| seen: nothing clips, small values get the coarsest steps.
//   percentile  T = the p-th percentile of |x| (99.999 by default): a few outliers clip.
//   entropy     TensorRT's calibration: the T whose quantised histogram is closest to the real one
//               in KL divergence (Migacz, "8-bit Inference with TensorRT", GTC 2017).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inferd::runtime {

enum class CalibrationMethod { kMinMax, kPercentile, kEntropy };

StatusOr<CalibrationMethod> ParseCalibrationMethod(std::string_view text);

class RangeCollector {
 public:
  static constexpr int kBins = 2048;

  void Add(std::span<const float> values);

  bool empty() const { return count_ == 0; }
  float min() const { return min_; }
  float max() const { return max_; }
  bool never_negative() const { return min_ >= 0; }

  // T for a quantised type with `levels` steps above zero (127 for int8, 255 for uint8).
  // `percentile` is read by kPercentile only.
  float Threshold(CalibrationMethod method, int levels, double percentile = 99.999) const;

 private:
  // Makes the histogram cover [0, new_range]: each old bin's count moves to the new bin holding
  // its centre (the range only grows, so new bins are at least as wide as old ones).
  void Widen(float new_range);
  float PercentileThreshold(double percentile) const;
  float EntropyThreshold(int levels) const;
  float bin_width() const { return range_ / kBins; }

  std::vector<double> histogram_ = std::vector<double>(kBins, 0.0);
  float range_ = 0;  // the histogram covers |x| in [0, range_]
  float min_ = 0, max_ = 0;
  int64_t count_ = 0;
};

}  // namespace inferd::runtime
