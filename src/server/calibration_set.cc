#include "server/calibration_set.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/builtin/builtin_backends.h"
#include "common/classification.h"
#include "common/npy.h"
#include "config/model_config.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

// The entries of `dir` that `wanted` accepts, sorted by name (so batches are reproducible).
template <typename Wanted>
StatusOr<std::vector<fs::path>> ListSorted(const fs::path& dir, Wanted&& wanted) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) return Status::NotFound("calibration folder " + dir.string() + " does not exist");
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (wanted(entry)) found.push_back(entry.path());
  }
  if (error) return Status::Internal("cannot list " + dir.string() + ": " + error.message());
  std::sort(found.begin(), found.end());
  return found;
}

void KeepAtMost(size_t max_batches, size_t* batch_count) {
  if (max_batches > 0) *batch_count = std::min(*batch_count, max_batches);
}

StatusOr<Tensor> ReadCalibrationArray(const fs::path& file, const std::string& input_name) {
  ASSIGN_OR_RETURN(Tensor tensor, ReadNpy(file));
  if (tensor.dtype != DataType::kFp32) {
    return Status::InvalidArgument(file.string() + " holds " + std::string(DataTypeName(tensor.dtype)) + "; input '" +
                                   input_name + "' takes FP32 (save it with dtype=float32)");
  }
  tensor.name = input_name;
  return tensor;
}

bool IsImageFile(const fs::path& file) {
  std::string extension = file.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return std::tolower(c); });
  return extension == ".jpg" || extension == ".jpeg" || extension == ".png";
}

StatusOr<std::string> ReadWholeFile(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + file.string());
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::Internal("error reading " + file.string());
  return bytes;
}

// The image_preprocess model of `model_dir`, loaded as the server would load it.
struct Preprocessor {
  ModelConfig config;
  std::unique_ptr<Model> model;
};

StatusOr<std::shared_ptr<Preprocessor>> LoadPreprocessor(const fs::path& model_dir) {
  auto config = LoadModelConfig(model_dir);
  if (!config.ok()) return config.status().WithPrefix("--preprocess");
  if (config->backend() != "image_preprocess") {
    return Status::InvalidArgument("--preprocess " + model_dir.string() + " is a '" +
                                   (config->backend().empty() ? config->platform() : config->backend()) +
                                   "' model; it must name an image_preprocess model's folder");
  }
  auto preprocessor = std::make_shared<Preprocessor>();
  preprocessor->config = std::move(config).value();
  ASSIGN_OR_RETURN(preprocessor->model, MakeImagePreprocessBackend()->Load(preprocessor->config, LoadOptions{}));
  return preprocessor;
}

// One image through the preprocessor: its tensor, without a batch dim.
StatusOr<Tensor> PreprocessImage(Preprocessor& preprocessor, const fs::path& file) {
  ASSIGN_OR_RETURN(std::string encoded, ReadWholeFile(file));
  const bool batched = preprocessor.config.max_batch_size() > 0;
  ExecutionBatch batch;
  batch.inputs.push_back(BytesTensor(preprocessor.config.input(0).name(), batched ? Shape{1, 1} : Shape{1}, {encoded}));
  std::vector<Tensor> outputs;
  Status status = preprocessor.model->Execute(batch, &outputs);
  if (!status.ok()) return status.WithPrefix(file.string());
  Tensor image = std::move(outputs.front());
  if (batched) image.shape.erase(image.shape.begin());
  return image;
}

// Images [first, first + count) of `files`, stacked into one batch of `input_name`.
StatusOr<Tensor> PreprocessBatch(Preprocessor& preprocessor, const std::vector<fs::path>& files, size_t first,
                                 size_t count, const std::string& input_name) {
  MutableBuffer buffer;
  Shape shape;
  size_t image_bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(Tensor image, PreprocessImage(preprocessor, files[first + i]));
    if (i == 0) {
      image_bytes = image.byte_size;
      buffer = AllocateBuffer(count * image_bytes);
      shape = image.shape;
      shape.insert(shape.begin(), static_cast<int64_t>(count));
    }
    std::memcpy(buffer.get() + i * image_bytes, image.data.get(), image_bytes);
  }
  return Tensor{.name = input_name, .dtype = DataType::kFp32, .shape = std::move(shape),
                .data = AliasData(buffer.memory, buffer.get()), .byte_size = buffer.size};
}

}  // namespace

StatusOr<CalibrationSet> NpyCalibrationSet(const fs::path& dir, size_t max_batches) {
  ASSIGN_OR_RETURN(auto files, ListSorted(dir, [](const fs::directory_entry& e) {
                     return e.is_regular_file() && e.path().extension() == ".npy";
                   }));
  ASSIGN_OR_RETURN(auto folders, ListSorted(dir, [](const fs::directory_entry& e) { return e.is_directory(); }));
  const bool one_input_files = !files.empty();
  auto batches = std::make_shared<std::vector<fs::path>>(one_input_files ? std::move(files) : std::move(folders));
  if (batches->empty()) return Status::InvalidArgument("calibration folder " + dir.string() + " holds no .npy files or batch folders");
  CalibrationSet set{.batch_count = batches->size()};
  KeepAtMost(max_batches, &set.batch_count);
  set.read = [batches, one_input_files](size_t index, const std::vector<std::string>& names) -> StatusOr<std::vector<Tensor>> {
    const fs::path& where = (*batches)[index];
    if (one_input_files && names.size() != 1) {
      return Status::InvalidArgument("the model has " + std::to_string(names.size()) +
                                     " inputs: give each batch as a subfolder holding INPUT_NAME.npy per input");
    }
    std::vector<Tensor> inputs;
    for (const std::string& name : names) {
      ASSIGN_OR_RETURN(Tensor tensor, ReadCalibrationArray(one_input_files ? where : where / (name + ".npy"), name));
      inputs.push_back(std::move(tensor));
    }
    return inputs;
  };
  return set;
}

StatusOr<CalibrationSet> ImageCalibrationSet(const fs::path& dir, const fs::path& preprocess_model, size_t images_per_batch,
                                             size_t max_batches) {
  ASSIGN_OR_RETURN(auto listed, ListSorted(dir, [](const fs::directory_entry& e) {
                     return e.is_regular_file() && IsImageFile(e.path());
                   }));
  if (listed.empty()) return Status::InvalidArgument("calibration folder " + dir.string() + " holds no .jpg, .jpeg or .png images");
  if (images_per_batch == 0) return Status::InvalidArgument("--batch-size must be at least 1");
  ASSIGN_OR_RETURN(std::shared_ptr<Preprocessor> preprocessor, LoadPreprocessor(preprocess_model));
  auto files = std::make_shared<std::vector<fs::path>>(std::move(listed));
  CalibrationSet set{.batch_count = (files->size() + images_per_batch - 1) / images_per_batch};
  KeepAtMost(max_batches, &set.batch_count);
  set.read = [files, preprocessor, images_per_batch](size_t index, const std::vector<std::string>& names)
      -> StatusOr<std::vector<Tensor>> {
    if (names.size() != 1) {
      return Status::InvalidArgument("the model has " + std::to_string(names.size()) +
                                     " inputs; image calibration feeds a model with one input");
    }
    const size_t first = index * images_per_batch;
    const size_t count = std::min(images_per_batch, files->size() - first);
    ASSIGN_OR_RETURN(Tensor batch, PreprocessBatch(*preprocessor, *files, first, count, names.front()));
    return std::vector<Tensor>{std::move(batch)};
  };
  return set;
}

}  // namespace inferd
