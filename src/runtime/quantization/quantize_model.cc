#include "runtime/quantization/quantize_model.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "runtime/onnx/onnx_import.h"
#include "runtime/onnx/qdq_writer.h"
#include "runtime/session.h"

namespace inferd::runtime {
namespace {

// Where each calibrated activation is read from in a run: a graph input, or an output added for it.
struct Probe {
  std::string name;
  bool is_input = false;
  size_t index = 0;  // into the inputs, or into the outputs
  RangeCollector range;
};

StatusOr<std::vector<Probe>> AddProbes(const std::vector<QuantizableNode>& nodes, Graph* graph) {
  std::vector<Probe> probes;
  std::map<std::string, size_t> seen;
  for (const QuantizableNode& node : nodes) {
    if (seen.count(node.activation)) continue;
    seen[node.activation] = probes.size();
    std::optional<ValueId> id = graph->FindValue(node.activation);
    if (!id) return Status::Internal("activation '" + node.activation + "' is not in the imported graph");
    Probe probe{.name = node.activation};
    if (auto in = std::find(graph->inputs.begin(), graph->inputs.end(), *id); in != graph->inputs.end()) {
      probe.is_input = true;
      probe.index = static_cast<size_t>(in - graph->inputs.begin());
    } else {
      probe.index = graph->outputs.size();
      graph->outputs.push_back(*id);
    }
    probes.push_back(std::move(probe));
  }
  return probes;
}

Status Observe(const Tensor& tensor, const std::string& name, RangeCollector* range) {
  if (tensor.dtype != DataType::kFp32) {
    return Status::InvalidArgument("activation '" + name + "' is " + std::string(DataTypeName(tensor.dtype)) +
                                   ", not FP32: only fp32 models are quantised");
  }
  range->Add(tensor.values<float>());
  return Status::Ok();
}

// A calibration sample saved without the batch dim is a batch of one.
void AddMissingBatchDims(const Session& session, std::vector<Tensor>* inputs) {
  for (size_t i = 0; i < inputs->size() && i < session.input_count(); ++i) {
    const auto& shape = session.input(i).shape;
    Tensor& tensor = (*inputs)[i];
    if (shape && tensor.shape.size() + 1 == shape->size()) tensor.shape.insert(tensor.shape.begin(), 1);
  }
}

// An activation's quantisation from its calibrated range, and the threshold T chosen.
std::pair<ActivationQuantization, float> ChooseQuantization(const RangeCollector& range, const QuantizeOptions& options) {
  const bool negative = !range.never_negative();
  const bool is_signed = negative && !options.asymmetric;
  const int levels = is_signed ? 127 : 255;
  float threshold = range.Threshold(options.method, levels, options.percentile);
  if (!(threshold > 0)) threshold = 1;  // never anything but zeros: any scale represents them
  if (!negative || is_signed) return {{.scale = threshold / levels, .is_signed = is_signed}, threshold};
  // Asymmetric: the seen range clipped to [-T, T], with 0 exactly representable.
  const float low = std::max(range.min(), -threshold), high = std::max(std::min(range.max(), threshold), 0.0f);
  const float scale = (high - low) / 255.0f;
  const auto zero_point = static_cast<uint8_t>(std::clamp(std::nearbyint(-low / scale), 0.0f, 255.0f));
  return {{.scale = scale, .is_signed = false, .zero_point = zero_point}, threshold};
}

}  // namespace

StatusOr<QuantizeReport> QuantizeModel(const std::filesystem::path& model_path, const CalibrationBatches& batch,
                                       size_t batch_count, const QuantizeOptions& options,
                                       const std::filesystem::path& out_path) {
  if (batch_count == 0) return Status::InvalidArgument("the calibration set is empty");
  onnx::ModelProto model;
  RETURN_IF_ERROR(ReadOnnxModel(model_path, &model));
  const std::vector<QuantizableNode> nodes = FindQuantizableNodes(model);
  if (nodes.empty()) return Status::InvalidArgument(model_path.string() + " has no Conv, MatMul or Gemm with constant weights to quantise");
  const std::filesystem::path base_dir = model_path.parent_path();
  ASSIGN_OR_RETURN(Graph graph, ImportOnnxModel(model, base_dir));
  ASSIGN_OR_RETURN(std::vector<Probe> probes, AddProbes(nodes, &graph));
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                   Session::FromGraph(std::move(graph), {.tune = TuneMode::kOff, .intra_op_threads = options.threads}));
  std::vector<std::string> input_names;
  for (size_t i = 0; i < session->input_count(); ++i) input_names.push_back(session->input(i).name);
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < batch_count; ++i) {
    const std::string which = "calibration batch " + std::to_string(i);
    auto read = batch(i, input_names);
    if (!read.ok()) return read.status().WithPrefix(which);
    std::vector<Tensor> inputs = std::move(read).value();
    AddMissingBatchDims(*session, &inputs);
    Status run = session->Run(inputs, &outputs);
    if (!run.ok()) return run.WithPrefix(which);
    for (Probe& probe : probes) {
      const Tensor& seen = probe.is_input ? inputs[probe.index] : outputs[probe.index];
      RETURN_IF_ERROR(Observe(seen, probe.name, &probe.range));
    }
    if (options.on_batch) options.on_batch(i + 1, batch_count);
  }
  QuantizeReport report{.quantized_nodes = static_cast<int>(nodes.size())};
  std::map<std::string, ActivationQuantization> activations;
  for (const Probe& probe : probes) {
    const auto [quantization, threshold] = ChooseQuantization(probe.range, options);
    activations[probe.name] = quantization;
    report.activations.push_back({.name = probe.name, .min = probe.range.min(), .max = probe.range.max(),
                                  .threshold = threshold, .is_signed = quantization.is_signed,
                                  .zero_point = quantization.zero_point});
  }
  RETURN_IF_ERROR(WriteQdq(&model, nodes, activations, base_dir));
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out || !model.SerializeToOstream(&out)) return Status::Internal("cannot write " + out_path.string());
  return report;
}

}  // namespace inferd::runtime
