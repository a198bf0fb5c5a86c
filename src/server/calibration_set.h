// Where `inferd quantize` reads its calibration batches from:
//  - a folder of .npy files: for a model with one input, each file is one batch of it (a file
//    without the batch dim is one sample); for a model with several inputs, each subfolder is one
//    batch, holding INPUT_NAME.npy for every input;
//  - a folder of JPEG/PNG images, turned into the model's input by an image_preprocess model (the
//    folder of its config.pbtxt), so calibration sees exactly the tensors the serving pipeline
//    feeds the model. Images are grouped into batches of `images_per_batch`.
#pragma once

#include <cstddef>
#include <filesystem>

#include "common/status.h"
#include "runtime/quantization/quantize_model.h"

namespace inferd {

struct CalibrationSet {
  size_t batch_count = 0;
  runtime::CalibrationBatches read;  // read(i, input_names): batch i
};

// `max_batches` 0: all of them.
StatusOr<CalibrationSet> NpyCalibrationSet(const std::filesystem::path& dir, size_t max_batches);

StatusOr<CalibrationSet> ImageCalibrationSet(const std::filesystem::path& dir, const std::filesystem::path& preprocess_model,
                                             size_t images_per_batch, size_t max_batches);

}  // namespace inferd
