// One loaded version of a model: its config, its scheduler, its instances, its stats and metrics.
// An ensemble's version has neither scheduler nor instances: its requests run through an
// EnsembleRunner (pipeline/ensemble_runner.h), whose steps queue at their own models; a router's
// the same through a RouterRunner (pipeline/router_runner.h).
// Load() is the expensive step (backend loads, warmup); the destructor stops taking requests,
// lets the queue drain and the instances finish, then releases the models.
// Its metric series are labelled by (model, version) and shared with a reload of the same version,
// so they are not removed here: the ModelManager removes them when that version leaves service.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/clock.h"
#include "common/infer_request.h"
#include "config/model_config.h"
#include "instances/instance_pool.h"
#include "lifecycle/memory_admission.h"
#include "lifecycle/model_metrics.h"
#include "lifecycle/model_stats.h"
#include "lifecycle/response_cache.h"
#include "lifecycle/response_orderer.h"
#include "metrics/drift_monitor.h"
#include "metrics/latency_histogram.h"
#include "metrics/quality_tracker.h"
#include "pipeline/ensemble_runner.h"
#include "pipeline/router_runner.h"
#include "scheduler/scheduler.h"

namespace inferd {

class ModelVersion {
 public:
  struct LoadContext {
    Backend* backend = nullptr;
    MetricsRegistry* metrics = nullptr;
    const Clock* clock = nullptr;
    int intra_op_threads = 1;  // for backends that parallelise one execution
    MemoryAdmission* memory = nullptr;  // refuses instances the memory limit has no room for; null: none
    ResponseCache* response_cache = nullptr;  // the server's (--cache-size); used when the config enables it
  };

  // Prepare, then Start.
  static StatusOr<std::shared_ptr<ModelVersion>> Load(const ModelConfig& config, int64_t version,
                                                      const std::filesystem::path& version_dir,
                                                      const LoadContext& context);
  // The expensive part: loads, prepares (planned batch sizes) and warms up the instances, on the
  // calling thread. The version takes no request until Start.
  static StatusOr<std::shared_ptr<ModelVersion>> Prepare(const ModelConfig& config, int64_t version,
                                                         const std::filesystem::path& version_dir,
                                                         const LoadContext& context);
  // An ensemble's version: its plan, validated against its members, and the server's door for
  // the steps' requests.
  static StatusOr<std::shared_ptr<ModelVersion>> PrepareEnsemble(const ModelConfig& config, int64_t version,
                                                       std::shared_ptr<const EnsemblePlan> plan,
                                                       StepDispatch dispatch, const std::filesystem::path& model_dir,
                                                       const LoadContext& context);
  // A router's version: its plan, validated against its local targets, and what it needs of the
  // server (RouterServices, its door among them).
  static StatusOr<std::shared_ptr<ModelVersion>> PrepareRouter(const ModelConfig& config, int64_t version,
                                                               std::shared_ptr<const RouterPlan> plan,
                                                               RouterServices services, const LoadContext& context);
  // Starts the instance threads, which inherit the calling thread's CPU priority: call it from a
  // thread of normal priority (the loads' work runs at idle priority, common/low_priority.h).
  void Start();
  ~ModelVersion();

  // Queues the request; on success `done` will be called exactly once. On failure (queue full,
  // stopped) `validated` keeps its request and this `done` is released without a call: the caller
  // answers through its own copy of the callback with the returned status (the failure is already
  // counted), or, when the version was stopped, may queue it on the one that replaced it.
  Status Enqueue(ValidatedRequest&& validated, InferCallback done);
  // Counts a request this version refused before queueing it (validation failed):
  // inferd_requests_total{outcome="invalid"}. Not in the statistics, which count what ran.
  void RecordInvalid() { metrics_.invalid->Increment(); }
  // Takes no new requests: a reload or unload retired it (StopAndDrain).
  bool stopped() const;

  // Queues a keep-warm run (keep_warm_interval_seconds): executed like a request, counted in
  // inferd_keep_warm_runs_total and not in the statistics. At most one is in flight.
  Status EnqueueKeepWarm(ValidatedRequest validated);
  // Zero when keep-warm is off.
  std::chrono::nanoseconds keep_warm_interval() const { return keep_warm_interval_; }
  const std::vector<Tensor>& keep_warm_inputs() const { return keep_warm_inputs_; }
  bool keep_warm_in_flight() const { return keep_warm_in_flight_.load(); }
  // When a request last finished (or a keep-warm run was queued), on the server's clock: the
  // completion's own clock read, so requests pay no extra one.
  TimePoint last_activity() const { return TimePoint(std::chrono::nanoseconds(last_activity_ns_.load())); }

  // How this version came to serve: whole load, its warmup part (planned batch sizes and
  // model_warmup samples), and the first request's end-to-end time (negative until one succeeded).
  struct Timings {
    double load_seconds = 0;
    double warmup_seconds = 0;
    double first_request_seconds = -1;
  };
  Timings timings() const;

  // Stops taking requests and waits until queued and running work is finished.
  void StopAndDrain();
  // Answers every queued (not yet running) request with CANCELLED.
  void CancelQueued();

  const ModelConfig& config() const { return config_; }
  const std::string& name() const { return config_.name(); }
  int64_t version() const { return version_; }
  const ModelStats& stats() const { return stats_; }
  // End-to-end latency of successful requests, fine-grained: a rollout compares versions by it.
  const LatencyHistogram& latency() const { return latency_; }
  // Requests waiting in the queue; for an ensemble, runs in flight (its steps queue at their models).
  size_t QueueDepth() const;
  // Set when the config has the parameter "quality": predictions kept for feedback
  // (metrics/quality_tracker.h). Internally synchronised.
  QualityTracker* quality() const { return quality_.get(); }
  // Set when the config has the parameter "drift" (metrics/drift_monitor.h). Internally synchronised.
  DriftMonitor* drift() const { return drift_.get(); }
  // Set for an ensemble's version: its plan and per-step statistics.
  const EnsembleRunner* ensemble() const { return ensemble_.get(); }
  // Set for a router's version: its plan and per-target statistics.
  const RouterRunner* router() const { return router_.get(); }
  // Once a second, from the server's ticker: a router's recent p99s and pools' forecasts.
  void Tick();
  // The labels of an output whose config sets label_filename (read at load); null otherwise.
  const std::vector<std::string>* OutputLabels(std::string_view output) const;

 private:
  ModelVersion(const ModelConfig& config, int64_t version, const LoadContext& context);
  // A composite version: an ensemble's or a router's (the other null).
  ModelVersion(const ModelConfig& config, int64_t version, std::shared_ptr<EnsembleRunner> ensemble,
               std::shared_ptr<RouterRunner> router, const LoadContext& context);
  bool composite() const { return ensemble_ || router_; }

  // A request the response cache answers: true when `done` was called with the cached answer;
  // otherwise `done` is wrapped to keep a successful answer.
  bool AnswerFromCache(const InferRequest& request, InferCallback& done);
  void BindCacheMetrics();
  void OnComplete(StatusOr<InferResponse> result, const RequestTimings& timings, int64_t batch_size,
                  uint64_t ticket, InferCallback& done);
  void OnExecution(const ExecutionReport& report);
  // An ensemble's or a router's run: its timings are its steps' or its target's.
  Status EnqueueCompositeRun(ValidatedRequest&& validated, InferCallback done);
  // An ensemble's per-step series (labels step, step_model): requests by outcome, the summed time
  // of successful answers, in flight; inferd_circuit_breaker_state for each step with a breaker.
  void RegisterStepMetrics();

  const ModelConfig config_;
  const int64_t version_;
  const uint64_t serial_;  // unique to this load, for the process's life: the response cache's key
  ResponseCache* const cache_;  // null unless the config enables the response cache and the server has one
  std::shared_ptr<Counter> cache_hits_, cache_misses_;
  const Clock* clock_;
  MetricsRegistry* registry_;
  std::chrono::nanoseconds keep_warm_interval_{0};
  std::vector<Tensor> keep_warm_inputs_;
  std::atomic<bool> keep_warm_in_flight_{false};
  std::atomic<int64_t> last_activity_ns_{0};
  double load_seconds_ = 0, warmup_seconds_ = 0;
  std::atomic<int64_t> first_request_ns_{-1};
  ModelStats stats_;
  LatencyHistogram latency_;
  ModelMetrics metrics_;
  std::unique_ptr<ResponseOrderer> orderer_;  // set when dynamic_batching.preserve_ordering
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Model>> prepared_;  // between Prepare and Start
  std::unique_ptr<InstancePool> instances_;
  std::shared_ptr<EnsembleRunner> ensemble_;  // an ensemble's (then no scheduler, no instances)
  std::shared_ptr<RouterRunner> router_;      // a router's (then no scheduler, no instances)
  std::map<std::string, std::vector<std::string>, std::less<>> output_labels_;
  std::optional<QualitySpec> quality_spec_;       // parameter "quality", read at Prepare
  std::unique_ptr<QualityTracker> quality_;       // made at Start from it
  std::unique_ptr<DriftMonitor> drift_;           // parameter "drift": made at Prepare, bound at Start
};

// Scheduler settings from the config's dynamic_batching (or its absence).
SchedulerOptions SchedulerOptionsFromConfig(const ModelConfig& config);

}  // namespace inferd
