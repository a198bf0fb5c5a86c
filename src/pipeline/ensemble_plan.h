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
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "config/model_config.h"

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
};

struct EnsemblePlan {
  std::string name;
  std::vector<EnsembleStep> steps;  // in config order; the graph is acyclic
  std::vector<std::string> outputs;  // the ensemble's outputs, in config order
};

// A member's config, as loaded now (`version` 0: its newest), or why there is none.
using MemberConfigs = std::function<StatusOr<ModelConfig>(const std::string& model, int64_t version)>;

// The step's label in messages: "ensemble 'E' step 2 (model 'classifier')".
std::string StepLabel(const EnsemblePlan& plan, size_t step);

StatusOr<EnsemblePlan> PlanEnsemble(const ModelConfig& ensemble, const MemberConfigs& members);

// The member models an ensemble's config names (to load them before it), in step order, once each.
std::vector<std::string> EnsembleMembers(const ModelConfig& ensemble);

}  // namespace inferd
