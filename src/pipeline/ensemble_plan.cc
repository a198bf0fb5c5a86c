#include "pipeline/ensemble_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <sstream>
#include <map>
#include <set>

namespace inferd {

namespace {

Status Invalid(const std::string& message) { return Status::InvalidArgument(message); }

// A tensor as the ensemble's graph sees it: its type and its shape with the batch dim (-1) when
// the config that declares it batches, so that batching and non-batching members compare alike.
struct TensorType {
  DataType dtype = DataType::kInvalid;
  Shape shape;
};

template <typename Tensor>
TensorType TypeOf(const ModelConfig& config, const Tensor& tensor) {
  TensorType type{DataTypeFromConfig(tensor.data_type()), {}};
  if (config.max_batch_size() > 0) type.shape.push_back(-1);
  type.shape.insert(type.shape.end(), tensor.dims().begin(), tensor.dims().end());
  return type;
}

bool ShapesMatch(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != -1 && b[i] != -1 && a[i] != b[i]) return false;
  }
  return true;
}

std::string Describe(const TensorType& type) {
  return fmt::format("{} {}", DataTypeName(type.dtype), ShapeToString(type.shape));
}

// Where an ensemble tensor comes from: the request (step -1) or a step's output.
struct Source {
  TensorType type;
  int step = -1;
};

template <typename Tensors>
const auto* FindTensor(const Tensors& tensors, const std::string& name) {
  auto it = std::ranges::find_if(tensors, [&](const auto& t) { return t.name() == name; });
  return it == tensors.end() ? nullptr : &*it;
}

// Wires one step's outputs and registers them as sources; the member's config is `member`.
Status WireOutputs(const EnsemblePlan& plan, size_t index, const inference::ModelEnsembling::Step& step,
                   const ModelConfig& member, std::map<std::string, Source>* sources, EnsembleStep* planned) {
  const std::string label = StepLabel(plan, index);
  std::map<std::string, std::string> sorted(step.output_map().begin(), step.output_map().end());
  for (const auto& [member_output, tensor] : sorted) {
    const auto* declared = FindTensor(member.output(), member_output);
    if (declared == nullptr) return Invalid(label + ": output_map names '" + member_output + "', which the model has no output of");
    if (tensor.empty()) return Invalid(label + ": output_map gives '" + member_output + "' an empty tensor name");
    auto [it, inserted] = sources->emplace(tensor, Source{TypeOf(member, *declared), static_cast<int>(index)});
    if (!inserted) {
      return Invalid(label + ": tensor '" + tensor + "' is already " +
                     (it->second.step < 0 ? std::string("an input of the ensemble")
                                          : "produced by " + StepLabel(plan, it->second.step)));
    }
    planned->outputs.emplace_back(member_output, tensor);
  }
  return Status::Ok();
}

// Wires one step's inputs to their sources; records whom it waits for.
Status WireInputs(const EnsemblePlan& plan, size_t index, const inference::ModelEnsembling::Step& step,
                  const ModelConfig& member, const std::map<std::string, Source>& sources, EnsembleStep* planned,
                  std::set<size_t>* waits_for) {
  const std::string label = StepLabel(plan, index);
  for (const auto& [member_input, tensor] : step.input_map()) {
    if (FindTensor(member.input(), member_input) == nullptr) {
      return Invalid(label + ": input_map names '" + member_input + "', which the model has no input of");
    }
  }
  for (const auto& input : member.input()) {
    auto mapped = step.input_map().find(input.name());
    if (mapped == step.input_map().end()) {
      if (input.optional()) continue;
      return Invalid(label + ": the model's input '" + input.name() + "' is not in the step's input_map");
    }
    const std::string& tensor = mapped->second;
    auto source = sources.find(tensor);
    if (source == sources.end()) {
      return Invalid(label + ": input '" + input.name() + "' takes tensor '" + tensor +
                     "', which is neither an input of the ensemble nor an output of any step");
    }
    const TensorType wanted = TypeOf(member, input);
    const TensorType& given = source->second.type;
    if (wanted.dtype != given.dtype || !ShapesMatch(wanted.shape, given.shape)) {
      return Invalid(label + ": input '" + input.name() + "' is " + Describe(wanted) + " but tensor '" + tensor +
                     "' is " + Describe(given));
    }
    if (source->second.step == static_cast<int>(index)) {
      return Invalid(label + ": input '" + input.name() + "' takes the step's own output '" + tensor + "' (a cycle)");
    }
    if (source->second.step >= 0) waits_for->insert(static_cast<size_t>(source->second.step));
    planned->inputs.emplace_back(input.name(), tensor);
  }
  return Status::Ok();
}

// Kahn's algorithm over the steps; a step left over is on a cycle (or behind one).
Status CheckAcyclic(const EnsemblePlan& plan, const std::vector<std::set<size_t>>& waits_for) {
  std::vector<size_t> pending(plan.steps.size());
  std::vector<size_t> ready;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    pending[i] = waits_for[i].size();
    if (pending[i] == 0) ready.push_back(i);
  }
  size_t done = 0;
  while (!ready.empty()) {
    const size_t step = ready.back();
    ready.pop_back();
    ++done;
    for (size_t consumer : plan.steps[step].consumers) {
      if (--pending[consumer] == 0) ready.push_back(consumer);
    }
  }
  if (done == plan.steps.size()) return Status::Ok();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (pending[i] > 0) return Invalid(StepLabel(plan, i) + ": its inputs depend on its own outputs (a cycle among the steps)");
  }
  return Status::Ok();
}

// parameters[key]: "model=N,model=N" with N a positive integer; every model named must be a step's.
// `apply` sets N on each step that runs the model.
Status ApplyPerModel(const ModelConfig& ensemble, const std::string& key, std::string_view example,
                     EnsemblePlan* plan, const std::function<void(EnsembleStep&, int64_t)>& apply) {
  const std::optional<std::string> text = ConfigParameter(ensemble, key);
  if (!text) return Status::Ok();
  const std::string where = "ensemble '" + plan->name + "': parameters[" + key + "] ";
  std::stringstream items(*text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t equals = item.find('=');
    const std::string model = item.substr(0, equals);
    int64_t value = 0;
    const char* begin = equals == std::string::npos ? nullptr : item.data() + equals + 1;
    const char* end = item.data() + item.size();
    if (begin == nullptr || std::from_chars(begin, end, value).ptr != end || value <= 0) {
      return Invalid(where + "has '" + item + "'; write model=N, like \"" + std::string(example) + "\"");
    }
    bool found = false;
    for (EnsembleStep& step : plan->steps) {
      if (step.model_name != model) continue;
      apply(step, value);
      found = true;
    }
    if (!found) return Invalid(where + "names model '" + model + "', which no step runs");
  }
  return Status::Ok();
}

// Time limits (step_timeout_ms) and pipeline sizing (target_qps, step_queue_capacity).
Status ApplyStepLimits(const ModelConfig& ensemble, const std::vector<ModelConfig>& member_configs, EnsemblePlan* plan) {
  RETURN_IF_ERROR(ApplyPerModel(ensemble, "step_timeout_ms", "classifier=50", plan, [](EnsembleStep& step, int64_t ms) {
    step.timeout_us = static_cast<uint64_t>(ms) * 1000;
  }));
  RETURN_IF_ERROR(ApplyPerModel(ensemble, "step_queue_capacity", "classifier=64", plan,
                                [](EnsembleStep& step, int64_t n) { step.queue_capacity = n; }));
  if (const std::optional<std::string> qps = ConfigParameter(ensemble, "target_qps")) {
    double value = 0;
    const char* end = qps->data() + qps->size();
    if (std::from_chars(qps->data(), end, value).ptr != end || !(value > 0) || value > 1e9) {
      return Invalid("ensemble '" + plan->name + "': parameters[target_qps] '" + *qps + "' is not a positive number");
    }
    plan->target_qps = value;
  }
  for (const auto& [key, field] : {std::pair{"max_runs_in_flight", &plan->max_runs_in_flight},
                                   std::pair{"max_waiting_runs", &plan->max_waiting_runs}}) {
    const std::optional<std::string> text = ConfigParameter(ensemble, key);
    if (!text) continue;
    int64_t value = 0;
    const char* end = text->data() + text->size();
    if (std::from_chars(text->data(), end, value).ptr != end || value < 1) {
      return Invalid("ensemble '" + plan->name + "': parameters[" + key + "] '" + *text + "' is not a positive integer");
    }
    *field = value;
  }
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const ModelConfig& member = member_configs[i];
    int64_t instances = 0;
    for (const auto& group : member.instance_group()) instances += std::max(1, group.count());
    plan->steps[i].executing_capacity = std::max<int64_t>(1, instances) * std::max(1, member.max_batch_size());
  }
  return Status::Ok();
}

// A fallback takes the step's place: every input the step feeds and every output it maps must be
// the fallback's too, with the type the step's model has.
Status CheckFallback(const EnsemblePlan& plan, size_t index, const ModelConfig& member, const ModelConfig& fallback) {
  const EnsembleStep& step = plan.steps[index];
  const std::string label = StepLabel(plan, index) + ": fallback model '" + fallback.name() + "'";
  auto same = [&](const auto& theirs, const auto& ours, const std::string& kind) -> Status {
    if (theirs == nullptr) return Invalid(label + " has no " + kind + " '" + ours->name() + "'");
    const TensorType a = TypeOf(fallback, *theirs), b = TypeOf(member, *ours);
    if (a.dtype != b.dtype || !ShapesMatch(a.shape, b.shape)) {
      return Invalid(label + ": " + kind + " '" + ours->name() + "' is " + Describe(a) + ", the step's model has " +
                     Describe(b));
    }
    return Status::Ok();
  };
  for (const auto& wiring : step.inputs) {
    RETURN_IF_ERROR(same(FindTensor(fallback.input(), wiring.first), FindTensor(member.input(), wiring.first), "input"));
  }
  for (const auto& wiring : step.outputs) {
    RETURN_IF_ERROR(same(FindTensor(fallback.output(), wiring.first), FindTensor(member.output(), wiring.first), "output"));
  }
  return Status::Ok();
}

// parameters[circuit_breaker.MODEL] for the steps that run MODEL.
Status ApplyBreakers(const ModelConfig& ensemble, const std::vector<ModelConfig>& member_configs,
                     const MemberConfigs& members, EnsemblePlan* plan) {
  constexpr std::string_view kPrefix = "circuit_breaker.";
  for (const auto& [key, value] : ensemble.parameters()) {
    if (!key.starts_with(kPrefix)) continue;
    const std::string model = key.substr(kPrefix.size());
    const std::string where = "ensemble '" + plan->name + "': parameters[" + key + "]";
    auto policy = ParseBreakerPolicy(value.string_value());
    if (!policy.ok()) return policy.status().WithPrefix(where);
    bool found = false;
    for (size_t i = 0; i < plan->steps.size(); ++i) {
      if (plan->steps[i].model_name != model) continue;
      found = true;
      if (!policy->fallback.empty()) {
        auto fallback = members(policy->fallback, 0);
        if (!fallback.ok()) return Invalid(StepLabel(*plan, i) + ": fallback: " + fallback.status().message());
        RETURN_IF_ERROR(CheckFallback(*plan, i, member_configs[i], *fallback));
      }
      plan->steps[i].breaker = *policy;
    }
    if (!found) return Invalid(where + " names model '" + model + "', which no step runs");
  }
  return Status::Ok();
}

}  // namespace

std::string StepLabel(const EnsemblePlan& plan, size_t step) {
  return fmt::format("ensemble '{}' step {} (model '{}')", plan.name, step + 1, plan.steps[step].model_name);
}

std::vector<std::string> EnsembleMembers(const ModelConfig& ensemble) {
  std::vector<std::string> members;
  for (const auto& step : ensemble.ensemble_scheduling().step()) {
    if (std::ranges::find(members, step.model_name()) == members.end()) members.push_back(step.model_name());
  }
  for (const auto& [key, value] : ensemble.parameters()) {
    if (!key.starts_with("circuit_breaker.")) continue;
    auto policy = ParseBreakerPolicy(value.string_value());
    if (policy.ok() && !policy->fallback.empty() && std::ranges::find(members, policy->fallback) == members.end()) {
      members.push_back(policy->fallback);
    }
  }
  return members;
}

StatusOr<EnsemblePlan> PlanEnsemble(const ModelConfig& ensemble, const MemberConfigs& members) {
  EnsemblePlan plan;
  plan.name = ensemble.name();
  const auto& steps = ensemble.ensemble_scheduling().step();
  if (steps.empty()) return Invalid("ensemble '" + plan.name + "': ensemble_scheduling has no step");
  for (const auto& step : steps) {
    plan.steps.push_back({.model_name = step.model_name(), .model_version = std::max<int64_t>(0, step.model_version())});
  }
  std::map<std::string, Source> sources;
  for (const auto& input : ensemble.input()) sources.emplace(input.name(), Source{TypeOf(ensemble, input), -1});

  std::vector<ModelConfig> member_configs;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const std::string label = StepLabel(plan, i);
    if (plan.steps[i].model_name.empty()) return Invalid(label + ": the step has no model_name");
    if (plan.steps[i].model_name == plan.name) return Invalid(label + ": an ensemble cannot be its own step");
    auto member = members(plan.steps[i].model_name, plan.steps[i].model_version);
    if (!member.ok()) return Invalid(label + ": " + member.status().message());
    if (ensemble.max_batch_size() > member->max_batch_size()) {
      return Invalid(fmt::format("{}: the ensemble batches up to {} but the model's max_batch_size is {}", label,
                                 ensemble.max_batch_size(), member->max_batch_size()));
    }
    RETURN_IF_ERROR(WireOutputs(plan, i, steps[static_cast<int>(i)], *member, &sources, &plan.steps[i]));
    member_configs.push_back(std::move(member).value());
  }
  std::vector<std::set<size_t>> waits_for(plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    RETURN_IF_ERROR(WireInputs(plan, i, steps[static_cast<int>(i)], member_configs[i], sources, &plan.steps[i],
                               &waits_for[i]));
    plan.steps[i].producers = waits_for[i].size();
    for (size_t producer : waits_for[i]) plan.steps[producer].consumers.push_back(i);
  }
  for (const auto& output : ensemble.output()) {
    auto source = sources.find(output.name());
    if (source == sources.end() || source->second.step < 0) {
      return Invalid("ensemble '" + plan.name + "': its output '" + output.name() + "' is produced by no step");
    }
    const TensorType declared = TypeOf(ensemble, output);
    if (declared.dtype != source->second.type.dtype || !ShapesMatch(declared.shape, source->second.type.shape)) {
      return Invalid("ensemble '" + plan.name + "': its output '" + output.name() + "' is declared " +
                     Describe(declared) + " but " + StepLabel(plan, source->second.step) + " makes it " +
                     Describe(source->second.type));
    }
    plan.outputs.push_back(output.name());
  }
  RETURN_IF_ERROR(CheckAcyclic(plan, waits_for));
  RETURN_IF_ERROR(ApplyStepLimits(ensemble, member_configs, &plan));
  RETURN_IF_ERROR(ApplyBreakers(ensemble, member_configs, members, &plan));
  return plan;
}

}  // namespace inferd
