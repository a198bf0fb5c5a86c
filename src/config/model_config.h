// Parsing, normalising and validating config.pbtxt in one place. Every error names the model,
// the file and the field (or line) at fault.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/cpu_placement.h"
#include "common/option_list.h"  // ParseOptionList, for the parameters read here
#include "common/status.h"
#include "common/tensor.h"
#include "model_config.pb.h"

namespace inferd {

using ModelConfig = inference::ModelConfig;

// Parses protobuf text format; unknown fields and syntax errors name `file_label` and the line.
StatusOr<ModelConfig> ParseModelConfigText(const std::string& text, const std::string& file_label);

// Reads <model_dir>/config.pbtxt, fills defaults (name from the folder, one CPU instance) and
// validates. A missing config.pbtxt is an error for built-in backends (they have no model file to
// complete it from).
StatusOr<ModelConfig> LoadModelConfig(const std::filesystem::path& model_dir);

// A config given as JSON (the protobuf JSON mapping Triton's load API uses: `{"max_batch_size": 8,
// "input": [...]}`) for the model in `model_dir`, completed and validated as LoadModelConfig does.
// Unknown fields are errors.
StatusOr<ModelConfig> ParseModelConfigJson(const std::string& json, const std::string& model_name,
                                           const std::filesystem::path& model_dir);

// The JSON alone, parsed as it is (no defaults, no checks): a config as a server reports it.
// Unknown fields are errors, named with `label`.
StatusOr<ModelConfig> ModelConfigFromJson(const std::string& json, const std::string& label);

// Fills defaults that Triton fills: name, instance_group (1 x KIND_CPU), version policy latest 1.
void NormalizeModelConfig(ModelConfig* config, const std::string& model_name);

// Structural checks; `file_label` is used in the messages.
Status ValidateModelConfig(const ModelConfig& config, const std::string& file_label);

DataType DataTypeFromConfig(inference::DataType type);
// The inverse; TYPE_INVALID for kInvalid.
inference::DataType ConfigDataTypeFrom(DataType type);

// The versions (from those present on disk) that `policy` says to serve, ascending.
std::vector<int64_t> SelectVersions(const inference::ModelVersionPolicy& policy,
                                    std::vector<int64_t> available);

// The string value of parameters[key], if present.
std::optional<std::string> ConfigParameter(const ModelConfig& config, const std::string& key);

// parameters { key: "version_labels" value: { string_value: "stable:1,canary:2" } }: label ->
// version, for TF Serving's /labels/L paths. Empty without the parameter; an error when malformed
// (checked at load by ValidateModelConfig).
StatusOr<std::map<std::string, int64_t, std::less<>>> VersionLabels(const ModelConfig& config);

// parameters { key: "traffic_split" value: { string_value: "1:95,2:5" } }: version -> weight, the
// share of the requests that name no version (lifecycle/traffic.h). Empty without the parameter;
// an error when malformed or when the weights add up to 0 (checked at load).
StatusOr<std::map<int64_t, uint32_t>> TrafficSplitParameter(const ModelConfig& config);
// The same form, "1:95,2:5", as the command line takes it.
StatusOr<std::map<int64_t, uint32_t>> ParseTrafficSplit(const std::string& text);

// parameters { key: "load" value: { string_value: "lazy" } } (instances/lazy_model.h); "eager",
// the default, loads at load time. An error for another value (checked at load).
StatusOr<bool> LoadsLazily(const ModelConfig& config);

// A parameter holding whole seconds (rollback_retention_seconds, keep_warm_interval_seconds):
// `fallback` when absent, an error when it is not a non-negative integer (checked at load).
StatusOr<int64_t> SecondsParameter(const ModelConfig& config, const std::string& key, int64_t fallback);

// parameters { key: "latency_target_ms" value: { string_value: "50" } }: the p99 latency (queue
// plus execution, in milliseconds) the dynamic batcher plans batch sizes and waits for
// (scheduler/batch_policy.h). 0 without the parameter. An error when it is not a positive number,
// or when the model has no dynamic_batching or max_batch_size 0 (checked at load).
StatusOr<double> LatencyTargetMs(const ModelConfig& config);

// parameters { key: "cpus" value: { string_value: "2-5" } }: each instance's CPUs
// (common/cpu_placement.h); empty without the parameter (instances run wherever the process may).
// An error when the list is malformed (checked at load; whether the process may use those CPUs is
// checked when the model loads, by the model manager).
StatusOr<std::vector<CpuList>> InstanceCpus(const ModelConfig& config);

// parameters { key: "intra_op_thread_count" value: { string_value: "4" } } (the name Triton's ONNX
// Runtime backend uses): the threads each instance runs one execution on. 0 without the parameter
// (the model manager derives it from the cores and the instance count). An error when it is not an
// integer in [1, 1024] (checked at load).
StatusOr<int> IntraOpThreadCount(const ModelConfig& config);

// Where and how a model's instance threads run: parameters "cpus" and "nice"
// (common/cpu_placement.h), or "cpu_weight" (common/cpu_weight_groups.h; not with "nice").
struct InstanceCpuPolicy {
  std::vector<CpuList> cpus;     // per instance; empty: anywhere
  std::optional<int> nice;       // unset: the process's
  std::optional<int> cpu_weight;  // unset: the process's group
};
StatusOr<InstanceCpuPolicy> InstanceCpuPolicyOf(const ModelConfig& config);

// A non-negative decimal number (an option's or parameter's value); the error names `what`.
StatusOr<double> ParseNonNegativeNumber(const std::string& what, std::string_view text);

// The batch sizes a model that prepares itself per input shape (kernel tuning, memory planning)
// gets ready for at load, largest first (instances/planned_batches.h). From
//   parameters { key: "planned_batch_sizes" value: { string_value: "1,2,4,8" | "all" | "none" } }
// or by default every size up to 8, the powers of two above it below max_batch_size, the
// preferred batch sizes and max_batch_size itself. Empty when the model does not batch, or for "none". An error names a
// malformed list or a size outside [1, max_batch_size].
StatusOr<std::vector<int64_t>> PlannedBatchSizes(const ModelConfig& config);

// Effective config as JSON with Triton's field names, for GET /v2/models/M/config.
std::string ModelConfigToJson(const ModelConfig& config);

// Total instances over all instance groups (at least 1).
int InstanceCount(const ModelConfig& config);

// Triton's ensembles: platform "ensemble" (or an ensemble_scheduling section); no backend of their
// own, their steps are other models (pipeline/ensemble_plan.h).
bool IsEnsemble(const ModelConfig& config);
// inferd's routers: platform "router"; no backend, their targets are other models or remote pools
// (pipeline/router_plan.h).
bool IsRouter(const ModelConfig& config);
// A model that runs no instance of its own: an ensemble or a router.
inline bool IsComposite(const ModelConfig& config) { return IsEnsemble(config) || IsRouter(config); }

}  // namespace inferd
