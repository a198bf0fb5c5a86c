#include "metrics/alert_board.h"

#include <optional>

namespace inferd {

AlertRules DefaultAlertRules() {
  // Two minutes of seconds as the baseline, judged after half a minute. The minimum deviations
  // keep a quiet model quiet: 5 requests a second, 5 points of error ratio, 5 ms of p99.
  AlertRules rules;
  rules.request_rate.min_deviation = 5;
  rules.error_ratio.min_deviation = 0.05;
  rules.p99_seconds.min_deviation = 0.005;
  return rules;
}

void AlertBoard::Tick(const std::map<std::string, ModelTotals>& totals, int64_t now_unix_ms) {
  for (auto it = streams_.begin(); it != streams_.end();) {
    it = totals.contains(it->first) ? std::next(it) : streams_.erase(it);
  }
  auto active = std::make_shared<std::vector<Alert>>();
  for (const auto& [model, now] : totals) {
    Stream& stream = streams_.try_emplace(model, rules_).first->second;
    const bool restarted = now.requests < stream.last.requests || now.failures < stream.last.failures;
    if (stream.primed && !restarted) {
      const uint64_t requests = now.requests - stream.last.requests;
      const uint64_t failures = now.failures - stream.last.failures;
      const LatencyHistogram::Counts second = LatencyHistogram::Between(stream.last.latency, now.latency);
      const std::optional<double> samples[3] = {
          static_cast<double>(requests),
          requests == 0 ? 0.0 : static_cast<double>(failures) / static_cast<double>(requests),
          LatencyHistogram::Total(second) == 0 ? std::nullopt
                                               : std::optional<double>(LatencyHistogram::Quantile(second, 0.99))};
      for (int s = 0; s < 3; ++s) {
        if (!samples[s]) continue;
        const AnomalyDetector::Verdict verdict = stream.detectors[s].Add(*samples[s]);
        Alert& alert = stream.alerts[s];
        if (verdict.raised) alert = {.model = model, .series = kSeries[s], .since_unix_ms = now_unix_ms};
        if (verdict.anomalous && verdict.alerting) {
          alert.value = verdict.value;
          alert.mean = verdict.mean;
          alert.stddev = verdict.stddev;
        }
      }
    }
    stream.last = now;
    stream.primed = true;
    for (int s = 0; s < 3; ++s) {
      if (stream.detectors[s].alerting()) active->push_back(stream.alerts[s]);
    }
  }
  active_.store(std::move(active));
}

}  // namespace inferd
