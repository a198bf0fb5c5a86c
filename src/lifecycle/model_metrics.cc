#include "lifecycle/model_metrics.h"

#include "metrics/drift_monitor.h"
#include "metrics/quality_tracker.h"

namespace inferd {

void RegisterModelMetricFamilies(MetricsRegistry* registry) {
  using Type = MetricsRegistry::Type;
  QualityTracker::RegisterMetricFamilies(registry);
  DriftMonitor::RegisterMetricFamilies(registry);
  registry->Declare("inferd_requests_total", Type::kCounter,
                    "Inference requests by outcome: success; invalid (the request did not match the model: "
                    "HTTP 400, INVALID_ARGUMENT); rejected (queue full or version stopping: 503, UNAVAILABLE); "
                    "timeout (its deadline or queue timeout passed); cancelled (client gone, or unloaded while "
                    "queued); failed (the execution failed).");
  registry->Declare("inferd_inferences_total", Type::kCounter,
                    "Inferences performed: the sum of the batch sizes of successful requests.");
  registry->Declare("inferd_executions_total", Type::kCounter,
                    "Model executions; inferences / executions is the batch efficiency.");
  registry->Declare("inferd_shape_preparations_total", Type::kCounter,
                    "Input shapes a model had to prepare (kernel tuning, memory planning) during a request's "
                    "execution; 0 when its batch sizes were prepared at load.");
  registry->Declare("inferd_request_duration_seconds", Type::kHistogram,
                    "End-to-end request time inside the server, queue included.");
  registry->Declare("inferd_queue_duration_seconds", Type::kHistogram,
                    "Time a request waited in the scheduler queue.");
  registry->Declare("inferd_compute_duration_seconds", Type::kHistogram,
                    "Time of the execution a request was part of (input, infer, output).");
  registry->Declare("inferd_batch_size", Type::kHistogram, "Batch size of each model execution.");
  registry->Declare("inferd_queue_depth", Type::kGauge, "Requests waiting in the scheduler queue.");
  registry->Declare("inferd_batch_size_limit", Type::kGauge,
                    "Largest batch the latency target (parameters[latency_target_ms]) lets the batcher form now.");
  registry->Declare("inferd_inflight_requests", Type::kGauge, "Requests accepted and not yet answered.");
  registry->Declare("inferd_model_load_duration_seconds", Type::kGauge,
                    "Time the last load of this model version took.");
  registry->Declare("inferd_model_warmup_duration_seconds", Type::kGauge,
                    "The part of the load spent warming up: planned batch sizes and model_warmup samples.");
  registry->Declare("inferd_model_first_request_duration_seconds", Type::kGauge,
                    "End-to-end time of the first successful request after the load (absent until then).");
  registry->Declare("inferd_keep_warm_runs_total", Type::kCounter,
                    "Warmup samples run because the model was idle for keep_warm_interval_seconds.");
  registry->Declare("inferd_circuit_breaker_state", Type::kGauge,
                    "An ensemble step's or a router target's circuit breaker: 0 closed, 1 open (failing fast or "
                    "to its fallback), 2 half-open (letting probes through).");
  registry->Declare("inferd_ensemble_step_requests_total", Type::kCounter,
                    "Requests an ensemble sent to one of its steps (labels step, step_model), by outcome: success, "
                    "failed (the step's model failed, its queue or breaker refused, or its time limit passed).");
  registry->Declare("inferd_ensemble_step_duration_seconds_total", Type::kCounter,
                    "Summed sent-to-answered time of a step's successful answers: divided by the success rate, the "
                    "step's mean latency.");
  registry->Declare("inferd_ensemble_step_inflight_requests", Type::kGauge,
                    "Requests an ensemble has sent to a step and not yet had answered.");
  registry->Declare("inferd_router_rule_matches_total", Type::kCounter,
                    "Requests a router's rule (route.N, route.default) sent to its target.");
  registry->Declare("inferd_router_target_requests_total", Type::kCounter,
                    "Requests a router sent to one of its targets (a cascade's tiers count each).");
  registry->Declare("inferd_router_target_errors_total", Type::kCounter, "A router's target's failed answers.");
  registry->Declare("inferd_router_target_duration_seconds", Type::kHistogram,
                    "A router's target's successful answers, sent to answered.");
  registry->Declare("inferd_predicted_requests_per_second", Type::kGauge,
                    "Forecast request rate `horizon` seconds ahead (Holt / Holt-Winters over per-second counts), "
                    "per model, and per router pool.");
  registry->Declare("inferd_anomaly_alert", Type::kGauge,
                    "1 while a 3-sigma alert is active on a model's `series` (request_rate, error_ratio, "
                    "p99_seconds; metrics/alert_board.h), else 0.");
  registry->Declare("inferd_model_max_batch_size", Type::kGauge,
                    "The version's max_batch_size (batching models only): batch efficiency is "
                    "rate(inferd_inferences_total) / rate(inferd_executions_total) / this.");
  registry->Declare("inferd_model_load_failures_total", Type::kCounter,
                    "Loads of a model (or of one of its versions) that failed; what served before keeps serving.");
}

ModelMetrics ModelMetrics::Bind(MetricsRegistry* registry, const std::string& model, int64_t version) {
  const MetricLabels labels = ModelLabels(model, version);
  auto with_outcome = [&](const char* outcome) {
    MetricLabels l = labels;
    l.emplace_back("outcome", outcome);
    return registry->AddCounter("inferd_requests_total", l);
  };
  ModelMetrics m;
  m.success = with_outcome("success");
  m.invalid = with_outcome("invalid");
  m.rejected = with_outcome("rejected");
  m.timeout = with_outcome("timeout");
  m.cancelled = with_outcome("cancelled");
  m.failed = with_outcome("failed");
  m.inferences = registry->AddCounter("inferd_inferences_total", labels);
  m.executions = registry->AddCounter("inferd_executions_total", labels);
  m.shape_preparations = registry->AddCounter("inferd_shape_preparations_total", labels);
  m.request_duration = registry->AddHistogram("inferd_request_duration_seconds", labels, DurationBuckets());
  m.queue_duration = registry->AddHistogram("inferd_queue_duration_seconds", labels, DurationBuckets());
  m.compute_duration = registry->AddHistogram("inferd_compute_duration_seconds", labels, DurationBuckets());
  m.batch_size = registry->AddHistogram("inferd_batch_size", labels, BatchSizeBuckets());
  m.inflight = registry->AddGauge("inferd_inflight_requests", labels);
  m.load_duration = registry->AddGauge("inferd_model_load_duration_seconds", labels);
  m.warmup_duration = registry->AddGauge("inferd_model_warmup_duration_seconds", labels);
  m.keep_warm_runs = registry->AddCounter("inferd_keep_warm_runs_total", labels);
  return m;
}

}  // namespace inferd
