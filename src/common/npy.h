// NumPy .npy files (format 1.0-3.0, little-endian, C order): tensors in and out of the CLI.
#pragma once

#include <filesystem>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd {

StatusOr<Tensor> ReadNpy(const std::filesystem::path& path);
Status WriteNpy(const std::filesystem::path& path, const Tensor& tensor);

}  // namespace inferd
