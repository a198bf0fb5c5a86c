#include "backends/onnx/onnx_backend.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "backends/backend.h"
#include "config/model_config.h"
#include "runtime/onnx/onnx_import.h"
#include "runtime/session.h"
#include "runtime/threading.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;
using runtime::Session;
using runtime::ValueInfo;

// Triton's ONNX Runtime backend uses 4 when it turns batching on by itself.
constexpr int kAutoMaxBatchSize = 4;

bool FirstDimIsDynamic(const ValueInfo& info) {
  return info.shape && !info.shape->empty() && !(*info.shape)[0].is_known();
}

template <typename ConfigTensor>
Status FillTensor(const ValueInfo& info, bool batching, ConfigTensor* tensor) {
  inference::DataType type = ConfigDataTypeFrom(info.dtype);
  if (type == inference::TYPE_INVALID) {
    return Status::Unimplemented("tensor '" + info.name + "' has a type inferd cannot serve");
  }
  tensor->set_name(info.name);
  tensor->set_data_type(type);
  if (!info.shape) return Status::InvalidArgument("tensor '" + info.name + "' has no shape in the model");
  for (size_t d = batching ? 1 : 0; d < info.shape->size(); ++d) {
    const runtime::Dim& dim = (*info.shape)[d];
    tensor->add_dims(dim.is_known() ? dim.value : -1);
  }
  return Status::Ok();
}

// Adds model tensors the config does not list; checks the types of those it does.
template <typename ConfigList>
Status CompleteTensors(const std::vector<const ValueInfo*>& model_tensors, bool batching, const std::string& kind,
                       const std::string& model, ConfigList* listed) {
  for (const auto& configured : *listed) {
    auto it = std::find_if(model_tensors.begin(), model_tensors.end(),
                           [&](const ValueInfo* info) { return info->name == configured.name(); });
    if (it == model_tensors.end()) {
      return Status::InvalidArgument("model '" + model + "': config " + kind + " '" + configured.name() +
                                     "' is not an " + kind + " of the ONNX model");
    }
    if (ConfigDataTypeFrom((*it)->dtype) != configured.data_type()) {
      return Status::InvalidArgument("model '" + model + "': config " + kind + " '" + configured.name() +
                                     "' has data_type " + inference::DataType_Name(configured.data_type()) +
                                     ", the model has " + std::string(DataTypeName((*it)->dtype)));
    }
  }
  for (const ValueInfo* info : model_tensors) {
    bool listed_already = std::any_of(listed->begin(), listed->end(),
                                      [&](const auto& configured) { return configured.name() == info->name; });
    if (listed_already) continue;
    Status status = FillTensor(*info, batching, listed->Add());
    if (!status.ok()) return status.WithPrefix("model '" + model + "'");
  }
  return Status::Ok();
}

class OnnxModel final : public Model {
 public:
  OnnxModel(const ModelConfig& config, std::unique_ptr<Session> session, int threads)
      : session_(std::move(session)), threads_(threads) {
    // Config order -> session order, resolved once.
    for (size_t i = 0; i < session_->input_count(); ++i) input_names_.push_back(session_->input(i).name);
    for (const auto& output : config.output()) {
      for (size_t i = 0; i < session_->output_count(); ++i) {
        if (session_->output(i).name == output.name()) output_indices_.push_back(i);
      }
    }
  }

  Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) override {
    runtime::SetIntraOpThreads(threads_);
    inputs_.clear();
    for (const std::string& name : input_names_) {
      const Tensor* tensor = batch.FindInput(name);
      if (tensor == nullptr) return Status::InvalidArgument("input '" + name + "' is required by the ONNX model");
      inputs_.push_back(*tensor);
    }
    RETURN_IF_ERROR(session_->Run(inputs_, &results_));
    outputs->clear();
    for (size_t index : output_indices_) outputs->push_back(std::move(results_[index]));
    return Status::Ok();
  }

  bool PreparesPerShape() const override { return true; }
  int64_t PreparedShapes() const override { return static_cast<int64_t>(session_->shape_preparations()); }
  std::optional<MemoryFootprint> Footprint() const override {
    const runtime::SessionMemory memory = session_->memory();
    return MemoryFootprint{.weights_bytes = static_cast<int64_t>(memory.weight_bytes + memory.packed_weight_bytes),
                           .working_bytes = static_cast<int64_t>(memory.arena_bytes + memory.scratch_bytes)};
  }

 private:
  std::unique_ptr<Session> session_;
  int threads_;
  std::vector<std::string> input_names_;
  std::vector<size_t> output_indices_;
  std::vector<Tensor> inputs_;   // reused between executions
  std::vector<Tensor> results_;
};

// Input shape sets a session keeps prepared beyond the planned batch sizes.
constexpr size_t kUnplannedShapeSets = 8;

class OnnxBackend final : public Backend {
 public:
  std::string_view name() const override { return "onnxruntime"; }
  std::string DefaultModelFilename() const override { return "model.onnx"; }
  bool UsesIntraOpThreads() const override { return true; }

  StatusOr<std::unique_ptr<Model>> Load(const ModelConfig& config, const LoadOptions& options) override {
    const fs::path file = options.version_dir / ModelFile(config);
    // Loading runs kernels too (constant folding, tuning): on this thread's OpenMP team, whose
    // default size is libgomp's (every CPU in the affinity mask), not the container's quota.
    runtime::SetIntraOpThreads(options.intra_op_threads);
    runtime::SessionOptions session_options;
    session_options.intra_op_threads = options.intra_op_threads;
    session_options.persist_tuning = true;  // MODEL.onnx.tuning next to the model: a restart skips the timing
    // parameters { key: "tune" value: { string_value: "off|fast|full" } }: kernel auto-tuning.
    if (auto tune = ConfigParameter(config, "tune")) {
      auto mode = runtime::ParseTuneMode(*tune);
      if (!mode.ok()) return mode.status().WithPrefix("model '" + config.name() + "': parameter 'tune'");
      session_options.tune = *mode;
    }
    // parameters { key: "precision" value: { string_value: "fp32|bf16" } }: the convolutions'
    // arithmetic (runtime/precision.h); bf16 falls back to fp32, with a warning, on a CPU without it.
    if (auto precision = ConfigParameter(config, "precision")) {
      auto parsed = runtime::ParsePrecision(*precision);
      if (!parsed.ok()) return parsed.status().WithPrefix("model '" + config.name() + "': parameter 'precision'");
      session_options.precision = *parsed;
    }
    // Every planned batch size stays prepared (instances/planned_batches.h), with room besides for
    // shapes that no plan covers (a free sequence length), which take turns beyond that.
    if (auto planned = PlannedBatchSizes(config); planned.ok()) {
      session_options.max_shape_sets = std::max(session_options.max_shape_sets, planned->size() + kUnplannedShapeSets);
    }
    auto session = Session::Load(file, session_options);
    if (!session.ok()) return session.status().WithPrefix("model '" + config.name() + "'");
    for (const auto& input : config.input()) {
      bool found = false;
      for (size_t i = 0; i < (*session)->input_count(); ++i) found |= (*session)->input(i).name == input.name();
      if (!found) {
        return Status::InvalidArgument("model '" + config.name() + "': config input '" + input.name() +
                                       "' is not an input of " + file.string());
      }
    }
    if (!(*session)->precision_fallback().empty()) {
      spdlog::warn("model '{}': {}", config.name(), (*session)->precision_fallback());
    }
    spdlog::info("model '{}': loaded {} ({} nodes, opset {}, {}), {} intra-op threads", config.name(), file.string(),
                 (*session)->graph().nodes.size(), (*session)->graph().opset,
                 runtime::PrecisionName((*session)->precision()), options.intra_op_threads);
    return std::unique_ptr<Model>(
        std::make_unique<OnnxModel>(config, std::move(session).value(), options.intra_op_threads));
  }

  Status CompleteConfig(const fs::path& version_dir, ModelConfig* config) const override {
    auto graph = runtime::ImportOnnxFile(version_dir / ModelFile(*config));
    if (!graph.ok()) return graph.status().WithPrefix("model '" + config->name() + "'");
    std::vector<const ValueInfo*> inputs, outputs;
    for (auto id : graph->inputs) inputs.push_back(&graph->value(id));
    for (auto id : graph->outputs) outputs.push_back(&graph->value(id));
    const bool unspecified = config->input().empty() && config->output().empty() && config->max_batch_size() == 0;
    if (unspecified) {
      bool batchable = !inputs.empty();
      for (const ValueInfo* info : inputs) batchable &= FirstDimIsDynamic(*info);
      for (const ValueInfo* info : outputs) batchable &= FirstDimIsDynamic(*info);
      if (batchable) {
        config->set_max_batch_size(kAutoMaxBatchSize);
        if (!config->has_dynamic_batching()) config->mutable_dynamic_batching();
      }
    }
    const bool batching = config->max_batch_size() > 0;
    RETURN_IF_ERROR(CompleteTensors(inputs, batching, "input", config->name(), config->mutable_input()));
    RETURN_IF_ERROR(CompleteTensors(outputs, batching, "output", config->name(), config->mutable_output()));
    return Status::Ok();
  }

 private:
  std::string ModelFile(const ModelConfig& config) const {
    return config.default_model_filename().empty() ? DefaultModelFilename() : config.default_model_filename();
  }
};

}  // namespace

void RegisterOnnxBackend(BackendRegistry* registry) { registry->Register(std::make_unique<OnnxBackend>()); }

}  // namespace inferd
