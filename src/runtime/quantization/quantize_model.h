// Post-training static quantisation of an ONNX model (`inferd quantize`): runs the fp32 model over
// a calibration set, collects the range of every activation a quantised op reads
// (range_calibrator.h), and writes the model in QDQ form (onnx/qdq_writer.h): per-channel
// symmetric int8 weights, per-tensor activations. The runtime then runs the quantised ops in int8
// (passes/qdq_fusion.cc); so can ONNX Runtime, from the same file.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/quantization/range_calibrator.h"

namespace inferd::runtime {

struct QuantizeOptions {
  CalibrationMethod method = CalibrationMethod::kPercentile;
  double percentile = 99.999;  // for CalibrationMethod::kPercentile
  // Activations that go negative: int8 over [-T, T] (symmetric, the default), or uint8 over
  // [max(min, -T), min(max, T)] with a zero point (asymmetric, as ONNX Runtime's quantiser does):
  // twice the levels for a range like HardSwish's [-0.375, T].
  bool asymmetric = false;
  int threads = 0;             // intra-op threads for the calibration runs (0: all)
  // After each calibration batch, with how many are done (a progress bar).
  std::function<void(size_t done, size_t total)> on_batch;
};

// One calibrated activation, for the report.
struct CalibratedActivation {
  std::string name;
  float min = 0, max = 0;  // seen over the calibration set
  float threshold = 0;     // the T chosen: the range is [-T, T], or [0, T] when never negative
  bool is_signed = false;
  int zero_point = 0;      // asymmetric uint8 only
};

struct QuantizeReport {
  int quantized_nodes = 0;  // Conv, MatMul and Gemm nodes given int8 weights
  std::vector<CalibratedActivation> activations;
};

// `batch(i, names)` gives calibration batch i (0 <= i < batch_count): the model's inputs, in the
// order of `names` (its graph inputs), fp32 (what the model takes).
using CalibrationBatches =
    std::function<StatusOr<std::vector<Tensor>>(size_t index, const std::vector<std::string>& input_names)>;

StatusOr<QuantizeReport> QuantizeModel(const std::filesystem::path& model_path, const CalibrationBatches& batch,
                                       size_t batch_count, const QuantizeOptions& options,
                                       const std::filesystem::path& out_path);

}  // namespace inferd::runtime
