// ONNX -> runtime IR, through Debian's libonnx protobuf classes. Accepts opsets 1-17 of the default
// domain (7-17 is what the engine targets; older models load when every op they use has a kernel for
// that opset); initializers may live in external data files next to the model.
#pragma once

#include <filesystem>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/ir/graph.h"

namespace onnx {
class ModelProto;
class TensorProto;
}  // namespace onnx

namespace inferd::runtime {

inline constexpr int kMinOpset = 1;
inline constexpr int kMaxOpset = 17;

StatusOr<Graph> ImportOnnxFile(const std::filesystem::path& model_path);
// Parses a model file (mapped, not copied onto the heap) without importing it.
Status ReadOnnxModel(const std::filesystem::path& model_path, onnx::ModelProto* model);
// `base_dir` is where external data files are looked up.
StatusOr<Graph> ImportOnnxModel(const onnx::ModelProto& model, const std::filesystem::path& base_dir);

// A TensorProto (inline or external data) as a Tensor.
StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::filesystem::path& base_dir);
// Reads a serialized TensorProto file (the ONNX test suite's input_0.pb).
StatusOr<Tensor> ReadTensorProtoFile(const std::filesystem::path& path);

}  // namespace inferd::runtime
