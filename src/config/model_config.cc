#include "config/model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace inferd {
namespace {

namespace fs = std::filesystem;

// Collects the first text-format error with its (1-based) line and column.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (!first_.empty()) return;
    first_ = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) + ": " + message;
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

std::string Field(const std::string& file, const std::string& field) { return file + ": " + field; }

Status ValidateDims(const google::protobuf::RepeatedField<int64_t>& dims, const std::string& where,
                    bool allow_empty) {
  if (dims.empty() && !allow_empty) {
    return Status::InvalidArgument(where + ": dims must not be empty when max_batch_size is 0");
  }
  for (int64_t dim : dims) {
    if (dim == 0 || dim < -1) {
      return Status::InvalidArgument(where + ": dims contains " + std::to_string(dim) +
                                     " (each dim must be -1 or positive)");
    }
  }
  return Status::Ok();
}

Status ValidateReshape(const google::protobuf::RepeatedField<int64_t>& dims,
                       const inference::ModelTensorReshape& reshape, const std::string& where) {
  for (int64_t dim : reshape.shape()) {
    if (dim == 0 || dim < -1) {
      return Status::InvalidArgument(where + ": reshape contains " + std::to_string(dim));
    }
  }
  bool dims_fixed = std::none_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; });
  bool reshape_fixed =
      std::none_of(reshape.shape().begin(), reshape.shape().end(), [](int64_t d) { return d < 0; });
  if (dims_fixed && reshape_fixed) {
    int64_t a = 1, b = 1;
    for (int64_t d : dims) a *= d;
    for (int64_t d : reshape.shape()) b *= d;
    if (a != b) {
      return Status::InvalidArgument(where + ": reshape has " + std::to_string(b) +
                                     " elements but dims have " + std::to_string(a));
    }
  }
  return Status::Ok();
}

template <typename TensorList>
Status ValidateTensors(const TensorList& tensors, const std::string& file, const std::string& kind,
                       bool batching) {
  std::set<std::string> names;
  for (int i = 0; i < tensors.size(); ++i) {
    const auto& tensor = tensors[i];
    std::string where = Field(file, kind + "[" + std::to_string(i) + "]");
    if (tensor.name().empty()) return Status::InvalidArgument(where + ": name is empty");
    where = Field(file, kind + " '" + tensor.name() + "'");
    if (!names.insert(tensor.name()).second) {
      return Status::InvalidArgument(where + ": duplicate " + kind + " name");
    }
    if (tensor.data_type() == inference::TYPE_INVALID) {
      return Status::InvalidArgument(where + ": data_type is missing or TYPE_INVALID");
    }
    RETURN_IF_ERROR(ValidateDims(tensor.dims(), where, batching || tensor.has_reshape()));
    if (tensor.has_reshape()) RETURN_IF_ERROR(ValidateReshape(tensor.dims(), tensor.reshape(), where));
  }
  return Status::Ok();
}

Status ValidateDynamicBatching(const ModelConfig& config, const std::string& file) {
  const auto& batching = config.dynamic_batching();
  for (int size : batching.preferred_batch_size()) {
    if (size <= 0 || size > config.max_batch_size()) {
      return Status::InvalidArgument(
          Field(file, "dynamic_batching.preferred_batch_size") + ": " + std::to_string(size) +
          " is not in [1, max_batch_size=" + std::to_string(config.max_batch_size()) + "]");
    }
  }
  if (batching.priority_levels() > 0 && (batching.default_priority_level() == 0 ||
                                         batching.default_priority_level() > batching.priority_levels())) {
    return Status::InvalidArgument(Field(file, "dynamic_batching.default_priority_level") +
                                   ": must be in [1, priority_levels]");
  }
  for (const auto& [level, policy] : batching.priority_queue_policy()) {
    if (level == 0 || level > batching.priority_levels()) {
      return Status::InvalidArgument(Field(file, "dynamic_batching.priority_queue_policy") + ": level " +
                                     std::to_string(level) + " is not in [1, priority_levels]");
    }
  }
  return Status::Ok();
}

// A version folder holds an ONNX file (model.onnx, or the config's default_model_filename *.onnx).
bool HasOnnxModelFile(const fs::path& model_dir, const ModelConfig& config) {
  std::string file = config.default_model_filename().empty() ? "model.onnx" : config.default_model_filename();
  if (file.size() < 5 || file.substr(file.size() - 5) != ".onnx") return false;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(model_dir, ignored)) {
    if (entry.is_directory() && fs::exists(entry.path() / file)) return true;
  }
  return false;
}

}  // namespace

StatusOr<ModelConfig> ParseModelConfigText(const std::string& text, const std::string& file_label) {
  ModelConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    return Status::InvalidArgument(file_label + ": " + errors.first());
  }
  return config;
}

void NormalizeModelConfig(ModelConfig* config, const std::string& model_name) {
  if (config->name().empty()) config->set_name(model_name);
  if (config->instance_group().empty() && !IsComposite(*config)) {  // an ensemble or router runs no instance
    auto* group = config->add_instance_group();
    group->set_count(1);
    group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  }
  for (auto& group : *config->mutable_instance_group()) {
    if (group.count() == 0) group.set_count(1);
    if (group.name().empty()) group.set_name(config->name());
  }
  if (config->version_policy().policy_choice_case() == inference::ModelVersionPolicy::POLICY_CHOICE_NOT_SET) {
    config->mutable_version_policy()->mutable_latest()->set_num_versions(1);
  }
}

Status ValidateModelConfig(const ModelConfig& config, const std::string& file) {
  if (config.max_batch_size() < 0) {
    return Status::InvalidArgument(Field(file, "max_batch_size") + ": " +
                                   std::to_string(config.max_batch_size()) + " is negative");
  }
  if (config.backend().empty() && config.platform().empty() && !config.has_ensemble_scheduling()) {
    return Status::InvalidArgument(Field(file, "backend") + ": neither backend nor platform is set");
  }
  bool batching = config.max_batch_size() > 0;
  if (auto sizes = PlannedBatchSizes(config); !sizes.ok()) {
    return Status::InvalidArgument(Field(file, "parameters[planned_batch_sizes]") + ": " + sizes.status().message());
  }
  if (auto labels = VersionLabels(config); !labels.ok()) {
    return Status::InvalidArgument(Field(file, "parameters[version_labels]") + ": " + labels.status().message());
  }
  if (auto lazy = LoadsLazily(config); !lazy.ok()) {
    return Status::InvalidArgument(Field(file, "parameters[load]") + ": " + lazy.status().message());
  }
  if (auto split = TrafficSplitParameter(config); !split.ok()) {
    return Status::InvalidArgument(Field(file, "parameters[traffic_split]") + ": " + split.status().message());
  }
  if (auto cpus = InstanceCpus(config); !cpus.ok()) {
    return Status::InvalidArgument(Field(file, "parameters[cpus]") + ": " + cpus.status().message());
  }
  if (auto threads = IntraOpThreadCount(config); !threads.ok()) {
    return Status::InvalidArgument(Field(file, "parameters[intra_op_thread_count]") + ": " + threads.status().message());
  }
  if (auto nice = ConfigParameter(config, "nice")) {
    if (auto parsed = ParseNice(*nice); !parsed.ok()) {
      return Status::InvalidArgument(Field(file, "parameters[nice]") + ": " + parsed.status().message());
    }
  }
  if (ConfigParameter(config, "cpu_weight")) {
    if (auto policy = InstanceCpuPolicyOf(config); !policy.ok()) {
      return Status::InvalidArgument(Field(file, "parameters[cpu_weight]") + ": " + policy.status().message());
    }
  }
  if (auto target = LatencyTargetMs(config); !target.ok()) {
    return Status::InvalidArgument(Field(file, "parameters[latency_target_ms]") + ": " + target.status().message());
  }
  for (const char* key : {"rollback_retention_seconds", "keep_warm_interval_seconds"}) {
    if (auto seconds = SecondsParameter(config, key, 0); !seconds.ok()) {
      return Status::InvalidArgument(Field(file, std::string("parameters[") + key + "]") + ": " +
                                     seconds.status().message());
    }
  }
  RETURN_IF_ERROR(ValidateTensors(config.input(), file, "input", batching));
  RETURN_IF_ERROR(ValidateTensors(config.output(), file, "output", batching));
  if (config.has_dynamic_batching()) RETURN_IF_ERROR(ValidateDynamicBatching(config, file));
  for (const auto& group : config.instance_group()) {
    if (group.count() < 0) {
      return Status::InvalidArgument(Field(file, "instance_group.count") + ": is negative");
    }
  }
  if (config.version_policy().has_latest() && config.version_policy().latest().num_versions() == 0) {
    return Status::InvalidArgument(Field(file, "version_policy.latest.num_versions") + ": must be >= 1");
  }
  return Status::Ok();
}

namespace {

// What every parsed config goes through: its name, Triton's defaults, the backend an ONNX file
// implies, validation.
StatusOr<ModelConfig> CompleteParsedConfig(ModelConfig config, const std::string& model_name, const fs::path& model_dir,
                                           const std::string& label) {
  if (!config.name().empty() && config.name() != model_name) {
    return Status::InvalidArgument(Field(label, "name") + ": '" + config.name() +
                                   "' does not match the folder name '" + model_name + "'");
  }
  NormalizeModelConfig(&config, model_name);
  if (config.backend().empty() && config.platform().empty() && HasOnnxModelFile(model_dir, config)) {
    config.set_backend("onnxruntime");  // Triton, too, picks the backend from the model file
  }
  RETURN_IF_ERROR(ValidateModelConfig(config, label));
  return config;
}

}  // namespace

StatusOr<ModelConfig> LoadModelConfig(const fs::path& model_dir) {
  const std::string model_name = model_dir.filename().string();
  const fs::path file = model_dir / "config.pbtxt";
  const std::string label = "model '" + model_name + "' (" + file.string() + ")";
  std::ifstream in(file);
  if (!in) return Status::NotFound(label + ": cannot read config.pbtxt");
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(ModelConfig config, ParseModelConfigText(text.str(), label));
  return CompleteParsedConfig(std::move(config), model_name, model_dir, label);
}

StatusOr<ModelConfig> ParseModelConfigJson(const std::string& json, const std::string& model_name,
                                           const fs::path& model_dir) {
  const std::string label = "model '" + model_name + "' (config override)";
  ASSIGN_OR_RETURN(ModelConfig config, ModelConfigFromJson(json, label));
  return CompleteParsedConfig(std::move(config), model_name, model_dir, label);
}

StatusOr<ModelConfig> ModelConfigFromJson(const std::string& json, const std::string& label) {
  ModelConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  if (auto parsed = google::protobuf::util::JsonStringToMessage(json, &config, options); !parsed.ok()) {
    return Status::InvalidArgument(label + ": " + std::string(parsed.message()));
  }
  return config;
}

inference::DataType ConfigDataTypeFrom(DataType type) {
  switch (type) {
    case DataType::kBool: return inference::TYPE_BOOL;
    case DataType::kUint8: return inference::TYPE_UINT8;
    case DataType::kUint16: return inference::TYPE_UINT16;
    case DataType::kUint32: return inference::TYPE_UINT32;
    case DataType::kUint64: return inference::TYPE_UINT64;
    case DataType::kInt8: return inference::TYPE_INT8;
    case DataType::kInt16: return inference::TYPE_INT16;
    case DataType::kInt32: return inference::TYPE_INT32;
    case DataType::kInt64: return inference::TYPE_INT64;
    case DataType::kFp16: return inference::TYPE_FP16;
    case DataType::kFp32: return inference::TYPE_FP32;
    case DataType::kFp64: return inference::TYPE_FP64;
    case DataType::kBytes: return inference::TYPE_STRING;
    case DataType::kBf16: return inference::TYPE_BF16;
    default: return inference::TYPE_INVALID;
  }
}

DataType DataTypeFromConfig(inference::DataType type) {
  switch (type) {
    case inference::TYPE_BOOL:
      return DataType::kBool;
    case inference::TYPE_UINT8:
      return DataType::kUint8;
    case inference::TYPE_UINT16:
      return DataType::kUint16;
    case inference::TYPE_UINT32:
      return DataType::kUint32;
    case inference::TYPE_UINT64:
      return DataType::kUint64;
    case inference::TYPE_INT8:
      return DataType::kInt8;
    case inference::TYPE_INT16:
      return DataType::kInt16;
    case inference::TYPE_INT32:
      return DataType::kInt32;
    case inference::TYPE_INT64:
      return DataType::kInt64;
    case inference::TYPE_FP16:
      return DataType::kFp16;
    case inference::TYPE_FP32:
      return DataType::kFp32;
    case inference::TYPE_FP64:
      return DataType::kFp64;
    case inference::TYPE_STRING:
      return DataType::kBytes;
    case inference::TYPE_BF16:
      return DataType::kBf16;
    default:
      return DataType::kInvalid;
  }
}

std::vector<int64_t> SelectVersions(const inference::ModelVersionPolicy& policy,
                                    std::vector<int64_t> available) {
  std::sort(available.begin(), available.end());
  if (policy.has_all()) return available;
  if (policy.has_specific()) {
    std::vector<int64_t> chosen;
    for (int64_t v : available) {
      const auto& wanted = policy.specific().versions();
      if (std::find(wanted.begin(), wanted.end(), v) != wanted.end()) chosen.push_back(v);
    }
    return chosen;
  }
  size_t keep = policy.has_latest() ? policy.latest().num_versions() : 1;
  if (available.size() > keep) available.erase(available.begin(), available.end() - keep);
  return available;
}

namespace {

// "key:number,key:number" (a parameter's entries), each number a positive integer (or, with
// `allow_zero`, zero too). `shape` names the expected form in the message.
StatusOr<std::vector<std::pair<std::string, int64_t>>> NumberedEntries(const std::string& text, bool allow_zero,
                                                                       std::string_view shape) {
  std::vector<std::pair<std::string, int64_t>> entries;
  std::istringstream list(text);
  for (std::string entry; std::getline(list, entry, ',');) {
    const size_t colon = entry.find(':');
    int64_t number = -1;
    size_t used = 0;
    try {
      if (colon != std::string::npos) number = std::stoll(entry.substr(colon + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (colon == std::string::npos || colon == 0 || number < (allow_zero ? 0 : 1) ||
        used != entry.size() - colon - 1) {
      return Status::InvalidArgument("entry '" + entry + "' is not " + std::string(shape));
    }
    entries.emplace_back(entry.substr(0, colon), number);
  }
  return entries;
}

}  // namespace

StatusOr<std::map<std::string, int64_t, std::less<>>> VersionLabels(const ModelConfig& config) {
  std::map<std::string, int64_t, std::less<>> labels;
  const std::optional<std::string> text = ConfigParameter(config, "version_labels");
  if (!text) return labels;
  ASSIGN_OR_RETURN(auto entries, NumberedEntries(*text, false, "label:version (e.g. stable:1,canary:2)"));
  for (auto& [label, version] : entries) labels[label] = version;
  return labels;
}

StatusOr<std::map<int64_t, uint32_t>> TrafficSplitParameter(const ModelConfig& config) {
  const std::optional<std::string> text = ConfigParameter(config, "traffic_split");
  if (!text) return std::map<int64_t, uint32_t>();
  return ParseTrafficSplit(*text);
}

StatusOr<std::map<int64_t, uint32_t>> ParseTrafficSplit(const std::string& text) {
  std::map<int64_t, uint32_t> split;
  ASSIGN_OR_RETURN(auto entries, NumberedEntries(text, true, "version:weight (e.g. 1:95,2:5)"));
  uint64_t total = 0;
  for (const auto& [version_text, weight] : entries) {
    const bool digits = version_text.find_first_not_of("0123456789") == std::string::npos && version_text.size() < 19;
    const int64_t version = digits ? std::stoll(version_text) : 0;
    if (version <= 0) return Status::InvalidArgument("'" + version_text + "' is not a version number (e.g. 1:95,2:5)");
    if (weight > 1000000) return Status::InvalidArgument("weight " + std::to_string(weight) + " is above 1000000");
    if (!split.emplace(version, static_cast<uint32_t>(weight)).second) {
      return Status::InvalidArgument("version " + version_text + " is given twice");
    }
    total += static_cast<uint64_t>(weight);
  }
  if (total == 0) return Status::InvalidArgument("the weights add up to 0");
  return split;
}

StatusOr<bool> LoadsLazily(const ModelConfig& config) {
  const std::string mode = ConfigParameter(config, "load").value_or("eager");
  if (mode != "lazy" && mode != "eager") return Status::InvalidArgument("'" + mode + "' is not lazy or eager");
  return mode == "lazy";
}

StatusOr<double> ParseNonNegativeNumber(const std::string& what, std::string_view text) {
  double number = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || number < 0 || !std::isfinite(number)) {
    return Status::InvalidArgument("'" + what + "' needs a non-negative number, got '" + std::string(text) + "'");
  }
  return number;
}

StatusOr<std::vector<CpuList>> InstanceCpus(const ModelConfig& config) {
  const std::optional<std::string> text = ConfigParameter(config, "cpus");
  if (!text) return std::vector<CpuList>();
  ASSIGN_OR_RETURN(CpuList cpus, ParseCpuList(*text));
  return SplitAmongInstances(cpus, InstanceCount(config));
}

StatusOr<int> IntraOpThreadCount(const ModelConfig& config) {
  const std::optional<std::string> text = ConfigParameter(config, "intra_op_thread_count");
  if (!text) return 0;
  int threads = 0;
  if (!ParseWholeNumber(*text, &threads) || threads < 1 || threads > 1024) {
    return Status::InvalidArgument("'intra_op_thread_count' needs an integer from 1 to 1024, got '" + *text + "'");
  }
  return threads;
}

StatusOr<InstanceCpuPolicy> InstanceCpuPolicyOf(const ModelConfig& config) {
  InstanceCpuPolicy policy;
  ASSIGN_OR_RETURN(policy.cpus, InstanceCpus(config));
  if (auto text = ConfigParameter(config, "nice")) {
    ASSIGN_OR_RETURN(int nice, ParseNice(*text));
    policy.nice = nice;
  }
  if (auto text = ConfigParameter(config, "cpu_weight")) {
    if (policy.nice) {
      return Status::InvalidArgument("set one of 'cpu_weight' and 'nice': both decide the model's share of the CPU");
    }
    ASSIGN_OR_RETURN(int weight, ParseCpuWeight(*text));
    policy.cpu_weight = weight;
  }
  return policy;
}

StatusOr<double> LatencyTargetMs(const ModelConfig& config) {
  const std::optional<std::string> text = ConfigParameter(config, "latency_target_ms");
  if (!text) return 0.0;
  ASSIGN_OR_RETURN(double target, ParseNonNegativeNumber("latency_target_ms", *text));
  if (target <= 0) return Status::InvalidArgument("'latency_target_ms' must be above 0");
  if (!config.has_dynamic_batching() || config.max_batch_size() <= 0) {
    return Status::InvalidArgument(
        "'latency_target_ms' sets how the dynamic batcher forms batches: the model needs dynamic_batching and "
        "max_batch_size > 0");
  }
  return target;
}

StatusOr<int64_t> SecondsParameter(const ModelConfig& config, const std::string& key, int64_t fallback) {
  const std::optional<std::string> text = ConfigParameter(config, key);
  if (!text) return fallback;
  int64_t seconds = -1;
  size_t used = 0;
  try {
    seconds = std::stoll(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text->size() || seconds < 0) {
    return Status::InvalidArgument("'" + *text + "' is not a whole number of seconds");
  }
  return seconds;
}

StatusOr<std::vector<int64_t>> PlannedBatchSizes(const ModelConfig& config) {
  const int64_t max_batch = config.max_batch_size();
  std::set<int64_t, std::greater<>> sizes;
  const std::string text = ConfigParameter(config, "planned_batch_sizes").value_or("");
  if (text == "none" || max_batch <= 0) return std::vector<int64_t>();
  if (text == "all") {
    for (int64_t size = 1; size <= max_batch; ++size) sizes.insert(size);
  } else if (text.empty()) {
    // Every size up to 8, where one execution's fixed cost is a large share and real-time traffic
    // batches; powers of two above, where the time per row is flat and parts cost little more.
    for (int64_t size = 1; size <= std::min<int64_t>(max_batch, 8); ++size) sizes.insert(size);
    for (int64_t size = 16; size < max_batch; size *= 2) sizes.insert(size);
    for (int size : config.dynamic_batching().preferred_batch_size()) sizes.insert(std::clamp<int64_t>(size, 1, max_batch));
    sizes.insert(max_batch);
  } else {
    std::istringstream entries(text);
    for (std::string entry; std::getline(entries, entry, ',');) {
      int64_t size = 0;
      size_t used = 0;
      try {
        size = std::stoll(entry, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != entry.size() || size < 1 || size > max_batch) {
        return Status::InvalidArgument("'" + entry + "' is not a batch size in [1, max_batch_size=" +
                                       std::to_string(max_batch) + "] (the value is a list like 1,2,4,8, or all, or none)");
      }
      sizes.insert(size);
    }
  }
  return std::vector<int64_t>(sizes.begin(), sizes.end());
}

std::optional<std::string> ConfigParameter(const ModelConfig& config, const std::string& key) {
  auto it = config.parameters().find(key);
  if (it == config.parameters().end()) return std::nullopt;
  return it->second.string_value();
}

std::string ModelConfigToJson(const ModelConfig& config) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  if (!google::protobuf::util::MessageToJsonString(config, &json, options).ok()) return "{}";
  return json;
}

int InstanceCount(const ModelConfig& config) {
  int count = 0;
  for (const auto& group : config.instance_group()) count += std::max(1, group.count());
  return std::max(1, count);
}

bool IsRouter(const ModelConfig& config) { return config.platform() == "router"; }

bool IsEnsemble(const ModelConfig& config) {
  return config.platform() == "ensemble" || config.has_ensemble_scheduling();
}

}  // namespace inferd
