#include "runtime/quantization/range_calibrator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace inferd::runtime {

StatusOr<CalibrationMethod> ParseCalibrationMethod(std::string_view text) {
  if (text == "minmax") return CalibrationMethod::kMinMax;
  if (text == "percentile") return CalibrationMethod::kPercentile;
  if (text == "entropy") return CalibrationMethod::kEntropy;
  return Status::InvalidArgument("calibration method must be entropy, percentile or minmax, got '" +
                                 std::string(text) + "'");
}

void RangeCollector::Add(std::span<const float> values) {
  if (values.empty()) return;
  float low = std::numeric_limits<float>::infinity(), high = -low;
  for (float v : values) {
    if (!std::isfinite(v)) continue;  // a NaN or inf says nothing about a useful range
    low = std::min(low, v);
    high = std::max(high, v);
  }
  if (low > high) return;
  if (count_ == 0) {
    min_ = low;
    max_ = high;
  } else {
    min_ = std::min(min_, low);
    max_ = std::max(max_, high);
  }
  const float abs_max = std::max(std::fabs(low), std::fabs(high));
  if (abs_max > range_) Widen(abs_max);
  if (range_ > 0) {
    const float per_bin = kBins / range_;
    for (float v : values) {
      if (!std::isfinite(v)) continue;
      const int bin = std::min(kBins - 1, static_cast<int>(std::fabs(v) * per_bin));
      histogram_[static_cast<size_t>(bin)] += 1;
    }
  } else {
    histogram_[0] += static_cast<double>(values.size());  // all zeros so far
  }
  count_ += static_cast<int64_t>(values.size());
}

void RangeCollector::Widen(float new_range) {
  if (range_ > 0) {
    std::vector<double> widened(kBins, 0.0);
    const double old_width = bin_width(), new_width = new_range / kBins;
    for (int b = 0; b < kBins; ++b) {
      const double centre = (b + 0.5) * old_width;
      const int to = std::min(kBins - 1, static_cast<int>(centre / new_width));
      widened[static_cast<size_t>(to)] += histogram_[static_cast<size_t>(b)];
    }
    histogram_ = std::move(widened);
  }
  range_ = new_range;
}

float RangeCollector::Threshold(CalibrationMethod method, int levels, double percentile) const {
  const float abs_max = std::max(std::fabs(min_), std::fabs(max_));
  if (count_ == 0 || abs_max == 0) return 0;
  switch (method) {
    case CalibrationMethod::kMinMax:
      return abs_max;
    case CalibrationMethod::kPercentile:
      return PercentileThreshold(percentile);
    case CalibrationMethod::kEntropy:
      return EntropyThreshold(levels);
  }
  return abs_max;
}

float RangeCollector::PercentileThreshold(double percentile) const {
  double total = 0;
  for (double c : histogram_) total += c;
  const double wanted = total * std::clamp(percentile, 0.0, 100.0) / 100.0;
  double seen = 0;
  for (int b = 0; b < kBins; ++b) {
    seen += histogram_[static_cast<size_t>(b)];
    if (seen >= wanted) return std::min(range_, (b + 1) * bin_width());
  }
  return range_;
}

namespace {

// KL(P || Q) over the bins where P has mass, both normalised here; a bin Q left empty where P is
// not gets a tiny mass instead of an infinite divergence (TensorRT does the same).
double KlDivergence(const std::vector<double>& p, const std::vector<double>& q) {
  double p_sum = 0, q_sum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    p_sum += p[i];
    q_sum += q[i];
  }
  if (p_sum == 0 || q_sum == 0) return std::numeric_limits<double>::infinity();
  double divergence = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) continue;
    const double pi = p[i] / p_sum, qi = std::max(q[i] / q_sum, 1e-12);
    divergence += pi * std::log(pi / qi);
  }
  return divergence;
}

}  // namespace

// For each candidate cut i (in bins, from the number of quantised levels up to all of them): P is
// the histogram cut at i with the clipped tail added to its last bin; Q is the cut histogram merged
// into the quantised levels and spread back over the bins that had mass. The cut with the least
// KL(P || Q) wins.
float RangeCollector::EntropyThreshold(int levels) const {
  const int target = levels + 1;  // quantised values 0..levels of |x|
  int last_used = kBins;
  while (last_used > 0 && histogram_[static_cast<size_t>(last_used - 1)] == 0) --last_used;
  if (last_used <= target) return std::min(range_, last_used * bin_width());
  std::vector<double> tail_sum(kBins + 1, 0.0);
  for (int b = kBins - 1; b >= 0; --b) tail_sum[static_cast<size_t>(b)] = tail_sum[static_cast<size_t>(b) + 1] + histogram_[static_cast<size_t>(b)];
  double best_divergence = std::numeric_limits<double>::infinity();
  int best_cut = last_used;
  std::vector<double> p, q;
  for (int cut = target; cut <= last_used; ++cut) {
    p.assign(histogram_.begin(), histogram_.begin() + cut);
    p.back() += tail_sum[static_cast<size_t>(cut)];
    q.assign(static_cast<size_t>(cut), 0.0);
    const double bins_per_level = static_cast<double>(cut) / target;
    for (int level = 0; level < target; ++level) {
      const int begin = static_cast<int>(std::floor(level * bins_per_level));
      const int end = level + 1 == target ? cut : static_cast<int>(std::floor((level + 1) * bins_per_level));
      double mass = 0;
      int nonzero = 0;
      for (int b = begin; b < end; ++b) {
        mass += histogram_[static_cast<size_t>(b)];
        nonzero += histogram_[static_cast<size_t>(b)] != 0;
      }
      if (nonzero == 0) continue;
      for (int b = begin; b < end; ++b) {
        if (histogram_[static_cast<size_t>(b)] != 0) q[static_cast<size_t>(b)] = mass / nonzero;
      }
    }
    const double divergence = KlDivergence(p, q);
    if (divergence < best_divergence) {
      best_divergence = divergence;
      best_cut = cut;
    }
  }
  return std::min(range_, (best_cut + 0.5f) * bin_width());
}

}  // namespace inferd::runtime
