// Every per-model metric inferd exports, declared in one list (RegisterModelMetricFamilies) and
// bound to one model version's labels (ModelMetrics::Bind).
#pragma once

#include <memory>
#include <string>

#include "metrics/metrics_registry.h"

namespace inferd {

void RegisterModelMetricFamilies(MetricsRegistry* registry);

struct ModelMetrics {
  std::shared_ptr<Counter> success, invalid, rejected, timeout, cancelled, failed;
  std::shared_ptr<Counter> inferences, executions, shape_preparations, keep_warm_runs;
  std::shared_ptr<Histogram> request_duration, queue_duration, compute_duration, batch_size;
  std::shared_ptr<Gauge> inflight, load_duration, warmup_duration;

  static ModelMetrics Bind(MetricsRegistry* registry, const std::string& model, int64_t version);
};


}  // namespace inferd
