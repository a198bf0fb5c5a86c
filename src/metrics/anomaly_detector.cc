#include "metrics/anomaly_detector.h"

#include <cmath>

namespace inferd {

Status AnomalyRule::Validate() const {
  if (window < 2) return Status::InvalidArgument("anomaly window must hold at least 2 samples");
  if (min_samples < 2 || min_samples > window) {
    return Status::InvalidArgument("anomaly min_samples must be in [2, window]");
  }
  if (!(sigmas > 0) || !std::isfinite(sigmas)) return Status::InvalidArgument("anomaly sigmas must be > 0");
  if (!(min_deviation >= 0) || !std::isfinite(min_deviation)) {
    return Status::InvalidArgument("anomaly min_deviation must be >= 0");
  }
  return Status::Ok();
}

AnomalyDetector::Verdict AnomalyDetector::Add(double value) {
  Verdict verdict;
  verdict.value = value;
  if (window_.size() >= rule_.min_samples) {
    // Two passes over at most `window` samples, once per sample: exact, with no running sums to
    // drift over a process's lifetime.
    double sum = 0;
    for (double sample : window_) sum += sample;
    verdict.mean = sum / static_cast<double>(window_.size());
    double squares = 0;
    for (double sample : window_) squares += (sample - verdict.mean) * (sample - verdict.mean);
    verdict.stddev = std::sqrt(squares / static_cast<double>(window_.size()));
    const double deviation = std::abs(value - verdict.mean);
    verdict.anomalous = deviation > rule_.sigmas * verdict.stddev && deviation > rule_.min_deviation;
  }
  if (alerting_) {
    if (!verdict.anomalous) {
      alerting_ = false;
      quiet_left_ = rule_.cool_down;
    }
  } else if (quiet_left_ > 0) {
    --quiet_left_;  // inside the cool-down: nothing is raised
  } else if (verdict.anomalous) {
    alerting_ = true;
    verdict.raised = true;
  }
  verdict.alerting = alerting_;
  window_.push_back(value);
  if (window_.size() > rule_.window) window_.pop_front();
  return verdict;
}

}  // namespace inferd
