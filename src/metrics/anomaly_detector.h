// The 3-sigma rule on one series sampled at a fixed interval (a model's request rate, error rate or
// p99, once a second): a sample further than `sigmas` standard deviations from the mean of the
// samples before it is anomalous. What keeps noise from paging anyone: nothing is flagged before
// the window holds `min_samples`; a deviation must also exceed `min_deviation` (a flat series has
// a standard deviation of 0, and any wobble would be infinitely many sigmas); and once an alert
// clears, none is raised again for `cool_down` samples.
//
// deploy/prometheus/ holds the same rule for Prometheus (avg_over_time, stddev_over_time); there
// the window includes the sample itself, which makes Prometheus slightly less eager.
#pragma once

#include <cstddef>
#include <deque>

#include "common/status.h"

namespace inferd {

struct AnomalyRule {
  size_t window = 120;        // samples in the rolling mean and standard deviation
  size_t min_samples = 30;    // samples seen before any can be anomalous
  double sigmas = 3.0;
  double min_deviation = 0;   // in the series' unit
  size_t cool_down = 60;      // samples after an alert clears before another is raised

  Status Validate() const;
};

class AnomalyDetector {
 public:
  explicit AnomalyDetector(AnomalyRule rule) : rule_(rule) {}

  struct Verdict {
    double value = 0;
    double mean = 0;    // of the window before this sample
    double stddev = 0;  // population standard deviation of that window
    bool anomalous = false;  // this sample breaks the rule
    bool alerting = false;   // the alert is active after this sample
    bool raised = false;     // this sample raised it
  };

  // Judges `value` against the window, then adds it to the window.
  Verdict Add(double value);

  bool alerting() const { return alerting_; }
  size_t samples() const { return window_.size(); }

 private:
  AnomalyRule rule_;
  std::deque<double> window_;
  bool alerting_ = false;
  size_t quiet_left_ = 0;  // samples of cool-down still to pass
};

}  // namespace inferd
