// What a frontend sees of one loaded model version: its config, version and statistics, read-only.
// A view keeps the version alive while it is held (a frontend holds one for a call), but offers no
// way to queue, drain or cancel: requests go through InferenceServer::InferAsync, and the
// lifecycle stays with the server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/model_config.h"
#include "lifecycle/model_stats.h"

#include <vector>

namespace inferd {

class ModelVersion;

// One step of an ensemble, as its statistics read now (pipeline/ensemble_runner.h's StepStats).
struct EnsembleStepView {
  std::string model_name;
  int64_t model_version = 0;  // 0: the newest
  int64_t in_flight = 0;  // the step's queue depth: this ensemble's requests there now
  int64_t capacity = 0;   // the most it may hold now (EnsembleRunner::StepCapacity); 0: unbounded
  uint64_t success = 0, fail = 0;
  uint64_t queue_ns = 0, compute_ns = 0, total_ns = 0;
};

// One target of a router, as its statistics read now (pipeline/router_runner.h's RouterTargetStats).
struct RouterTargetView {
  std::string target;  // "model NAME[@V]" or "pool NAME"
  uint64_t requests = 0, errors = 0;
  int64_t in_flight = 0;
  double recent_p99_ms = 0;
  double predicted_rps = 0;       // pools: this router's requests there, forecast
  std::string breaker;            // "closed" / "open" / "half-open"; "" without a breaker
  std::string channel;            // pools: the gRPC channel's state
};

class ModelView {
 public:
  explicit ModelView(std::shared_ptr<const ModelVersion> model);

  const ModelConfig& config() const;
  const std::string& name() const;
  int64_t version() const;
  const ModelStats& stats() const;
  bool is_ensemble() const;
  // An ensemble's steps in config order (empty for other models).
  std::vector<EnsembleStepView> EnsembleSteps() const;
  bool is_router() const;
  // A router's targets, and how often each rule matched (empty for other models).
  std::vector<RouterTargetView> RouterTargets() const;
  std::vector<std::pair<std::string, uint64_t>> RouterRuleMatches() const;

 private:
  std::shared_ptr<const ModelVersion> model_;
};

}  // namespace inferd
