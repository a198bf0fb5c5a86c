// One loaded version of a model: its config, its scheduler, its instances, its stats and metrics.
// Load() is the expensive step (backend loads, warmup); the destructor stops taking requests,
// lets the queue drain and the instances finish, then releases the models.
// Its metric series are labelled by (model, version) and shared with a reload of the same version,
// so they are not removed here: the ModelManager removes them when that version leaves service.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "common/clock.h"
#include "common/infer_request.h"
#include "config/model_config.h"
#include "instances/instance_pool.h"
#include "lifecycle/model_metrics.h"
#include "lifecycle/model_stats.h"
#include "lifecycle/response_orderer.h"
#include "metrics/latency_histogram.h"
#include "scheduler/scheduler.h"

namespace inferd {

class ModelVersion {
 public:
  struct LoadContext {
    Backend* backend = nullptr;
    MetricsRegistry* metrics = nullptr;
    const Clock* clock = nullptr;
    int intra_op_threads = 1;  // for backends that parallelise one execution
  };

  static StatusOr<std::shared_ptr<ModelVersion>> Load(const ModelConfig& config, int64_t version,
                                                      const std::filesystem::path& version_dir,
                                                      const LoadContext& context);
  ~ModelVersion();

  // Queues the request; on success `done` will be called exactly once. On failure (queue full,
  // stopped) the request and this `done` are released without a call: the caller answers through
  // its own copy of the callback with the returned status (the failure is already counted).
  Status Enqueue(ValidatedRequest validated, InferCallback done);

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
  size_t QueueDepth() const { return scheduler_->QueueDepth(); }

 private:
  ModelVersion(const ModelConfig& config, int64_t version, const LoadContext& context);

  void OnComplete(StatusOr<InferResponse> result, const RequestTimings& timings, int64_t batch_size,
                  uint64_t ticket, InferCallback& done);
  void OnExecution(const ExecutionReport& report);

  const ModelConfig config_;
  const int64_t version_;
  const Clock* clock_;
  ModelStats stats_;
  LatencyHistogram latency_;
  ModelMetrics metrics_;
  std::unique_ptr<ResponseOrderer> orderer_;  // set when dynamic_batching.preserve_ordering
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<InstancePool> instances_;
};

// Scheduler settings from the config's dynamic_batching (or its absence).
SchedulerOptions SchedulerOptionsFromConfig(const ModelConfig& config);

}  // namespace inferd
