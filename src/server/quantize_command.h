// `inferd quantize MODEL.onnx --calibration DIR --method entropy|percentile|minmax --out OUT.onnx`:
// post-training static quantisation into a QDQ model (runtime/quantization/quantize_model.h).
//
// The calibration set is a folder of .npy files, or of images with --preprocess (an
// image_preprocess model's folder): see server/calibration_set.h.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace inferd {

struct QuantizeFlags {
  std::string model;
  std::string calibration_dir;
  std::string preprocess_model;  // an image_preprocess model's folder: the calibration set is images
  size_t images_per_batch = 32;
  std::string method = "percentile";
  double percentile = 99.999;
  std::string activations = "symmetric";
  std::string out;  // default: MODEL.int8.onnx next to the model
  size_t max_batches = 0;  // 0: all
  int threads = 0;
  bool verbose = false;
};

void AddQuantizeFlags(CLI::App* command, QuantizeFlags* flags);
int RunQuantize(const QuantizeFlags& flags);

}  // namespace inferd
