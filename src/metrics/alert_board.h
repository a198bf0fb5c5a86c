// The 3-sigma alerts on each model's request rate, error ratio and p99 (anomaly_detector.h), fed
// once a second by the server's ticker with each model's running totals; read from any thread
// (GET /v2/alerts, the inferd_anomaly_alert gauge).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "metrics/anomaly_detector.h"
#include "metrics/latency_histogram.h"

namespace inferd {

// A model's running totals (summed over its versions) at one tick.
struct ModelTotals {
  uint64_t requests = 0;  // answered, successfully or not
  uint64_t failures = 0;
  LatencyHistogram::Counts latency{};  // successful requests' end-to-end latency
};

// One rule per series; the minimum deviations are in each series' unit.
struct AlertRules {
  AnomalyRule request_rate;  // requests per second
  AnomalyRule error_ratio;   // failures / requests in the second
  AnomalyRule p99_seconds;   // of the second's successful requests
};
AlertRules DefaultAlertRules();

struct Alert {
  std::string model;
  std::string series;  // "request_rate", "error_ratio", "p99_seconds"
  double value = 0;    // the sample that raised it, then the latest anomalous one
  double mean = 0;
  double stddev = 0;
  int64_t since_unix_ms = 0;
};

class AlertBoard {
 public:
  static constexpr const char* kSeries[3] = {"request_rate", "error_ratio", "p99_seconds"};

  explicit AlertBoard(AlertRules rules) : rules_(rules) {}

  // Once a second, from one thread. A model missing from `totals` is forgotten; totals below the
  // last (a version left) restart the count from them. A second without successful requests
  // gives the p99 series no sample.
  void Tick(const std::map<std::string, ModelTotals>& totals, int64_t now_unix_ms);

  // The alerts active after the last tick, by model then series.
  std::vector<Alert> Active() const { return *active_.load(); }

 private:
  struct Stream {
    explicit Stream(const AlertRules& rules)
        : detectors{AnomalyDetector(rules.request_rate), AnomalyDetector(rules.error_ratio),
                    AnomalyDetector(rules.p99_seconds)} {}
    ModelTotals last;
    bool primed = false;  // `last` holds a tick's totals
    AnomalyDetector detectors[3];
    Alert alerts[3];  // valid while the detector is alerting
  };

  const AlertRules rules_;
  std::map<std::string, Stream> streams_;  // the ticking thread's
  std::atomic<std::shared_ptr<const std::vector<Alert>>> active_{std::make_shared<const std::vector<Alert>>()};
};

}  // namespace inferd
