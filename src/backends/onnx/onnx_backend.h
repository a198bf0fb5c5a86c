// The ONNX backend: serves model.onnx files on inferd's own runtime (src/runtime). Selected by
// `backend: "onnxruntime"`, `platform: "onnxruntime_onnx"` or `platform: "onnx"`, so Triton model
// repositories load unchanged. A model folder needs no config.pbtxt: inputs, outputs and
// max_batch_size are completed from the model.
#pragma once

namespace inferd {

class BackendRegistry;
void RegisterOnnxBackend(BackendRegistry* registry);

}  // namespace inferd
