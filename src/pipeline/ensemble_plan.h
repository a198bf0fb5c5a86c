// Triton's ensembles: a model (`platform: "ensemble"`) whose `ensemble_scheduling` lists steps,
// each another model, wired by tensor names: a step's `input_map` takes each of its model's inputs
// from an ensemble tensor (one of the ensemble's inputs, or another step's output), its
// `output_map` names the ensemble tensors its model's outputs become. The ensemble's outputs are
// such tensors.
//
// PlanEnsemble checks the whole graph at load, against the members' configs, and every error
// names the step: an unknown model, a member input left unmapped or a map key the member does not
// have, a tensor nothing produces or two steps produce, an ensemble output no step produces, a
// type or shape that differs between the producer and the consumer, and cycles. What it returns is
// what a run needs (pipeline/ensemble_run.h): each step's wiring and who waits on whom.
//
// Per-step time limits come from the ensemble's `parameters { key: "step_timeout_ms" value {
// string_value: "preprocess=30,classifier=50" } }`: model name = milliseconds, for every step that
// runs that model (Triton's step message has no parameters of its own). Circuit breakers come
// from `parameters { key: "circuit_breaker.MODEL" value { string_value: "consecutive_failures=5,
// cool_down_seconds=5,fallback=OTHER" } }` (pipeline/circuit_breaker.h); a fallback model must take
// the step's inputs and give its outputs, with the same types and shapes.
//
// Pipeline sizing: `parameters { key: "target_qps" value { string_value: "500" } }` bounds each
// step's queue by the seeds' rule (EnsembleStep::queue_capacity); `step_queue_capacity`
// ("model=N,...") sets a step's queue capacity outright. Workers per step are its model's
// instance_group count.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "config/model_config.h"
#include "pipeline/circuit_breaker.h"

namespace inferd {

struct EnsembleStep {
  std::string model_name;
  int64_t model_version = 0;  // 0: the member's newest ready version (Triton's -1)
  // (member tensor name, ensemble tensor name), in the order of the member's config.
  std::vector<std::pair<std::string, std::string>> inputs;
  std::vector<std::pair<std::string, std::string>> outputs;
  // Steps that take at least one of this step's outputs, and how many distinct steps this one
  // waits for (0: it takes only the ensemble's inputs and starts at once).
  std::vector<size_t> consumers;
  size_t producers = 0;
  // The step's own time limit (the ensemble's parameters[step_timeout_ms]); 0: a share of what is
  // left of the request's deadline (pipeline/ensemble_runner.h says how much).
  uint64_t timeout_us = 0;
  // Pipeline sizing: how many of this ensemble's requests the step holds at once is at most
  // executing_capacity (what its model's instances execute at once: instances x max_batch_size)
  // plus its queue capacity: queue_capacity when the config sets it (parameters
  // [step_queue_capacity]), else, with parameters[target_qps], the seeds' rule mean processing
  // time (ms) x target QPS / 1000 (pipeline/ensemble_runner.h); else unbounded.
  int64_t queue_capacity = 0;
  int64_t executing_capacity = 1;
  // The step's model's circuit breaker (parameters[circuit_breaker.MODEL]); steps that run the
  // same model share one.
  std::optional<BreakerPolicy> breaker;
};

struct EnsemblePlan {
  std::string name;
  std::vector<EnsembleStep> steps;  // in config order; the graph is acyclic
  std::vector<std::string> outputs;  // the ensemble's outputs, in config order
  double target_qps = 0;             // parameters[target_qps]; 0: not given
  // parameters[max_runs_in_flight] (0: no limit) and [max_waiting_runs]: pipeline/ensemble_runner.h.
  int64_t max_runs_in_flight = 0;
  int64_t max_waiting_runs = 1000;
};

// A member's config, as loaded now (`version` 0: its newest), or why there is none.
using MemberConfigs = std::function<StatusOr<ModelConfig>(const std::string& model, int64_t version)>;

// The step's label in messages: "ensemble 'E' step 2 (model 'classifier')".
std::string StepLabel(const EnsemblePlan& plan, size_t step);

StatusOr<EnsemblePlan> PlanEnsemble(const ModelConfig& ensemble, const MemberConfigs& members);

// The member models an ensemble's config names (to load them before it), in step order, once each,
// then its breakers' fallbacks.
std::vector<std::string> EnsembleMembers(const ModelConfig& ensemble);

}  // namespace inferd
