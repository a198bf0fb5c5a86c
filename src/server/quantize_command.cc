#include "server/quantize_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <thread>

#include "common/npy.h"
#include "runtime/quantization/quantize_model.h"
#include "runtime/threading.h"
#include "server/progress_bar.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

// The batches of the calibration folder: .npy files for a one-input model, else subfolders.
StatusOr<std::vector<fs::path>> ListBatches(const fs::path& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) return Status::NotFound("calibration folder " + dir.string() + " does not exist");
  std::vector<fs::path> files, folders;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_directory()) folders.push_back(entry.path());
    else if (entry.path().extension() == ".npy") files.push_back(entry.path());
  }
  if (error) return Status::Internal("cannot list " + dir.string() + ": " + error.message());
  std::vector<fs::path>& batches = files.empty() ? folders : files;
  std::sort(batches.begin(), batches.end());
  if (batches.empty()) return Status::InvalidArgument("calibration folder " + dir.string() + " holds no .npy files or batch folders");
  return batches;
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

}  // namespace

void AddQuantizeFlags(CLI::App* command, QuantizeFlags* flags) {
  command->add_option("model", flags->model, "The fp32 ONNX model")->required()->check(CLI::ExistingFile);
  command->add_option("--calibration", flags->calibration_dir,
                      "Folder of calibration .npy files (one per batch; for a model with several inputs, one "
                      "subfolder per batch holding INPUT_NAME.npy)")
      ->required();
  command->add_option("--method", flags->method, "How activation ranges are chosen: entropy (TensorRT's KL "
                                                 "divergence), percentile or minmax")
      ->check(CLI::IsMember({"entropy", "percentile", "minmax"}))
      ->capture_default_str();
  command->add_option("--percentile", flags->percentile, "The percentile of |x| kept by --method percentile")
      ->check(CLI::Range(50.0, 100.0))
      ->capture_default_str();
  command->add_option("--out", flags->out, "The QDQ model to write (default: MODEL.int8.onnx next to the model)");
  command->add_option("--max-batches", flags->max_batches, "Calibrate on at most this many batches (0: all)")
      ->capture_default_str();
  command->add_option("--threads", flags->threads, "Intra-op threads for the calibration runs (0: every core)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  command->add_flag("--verbose", flags->verbose, "Print each activation's range and chosen threshold");
}

int RunQuantize(const QuantizeFlags& flags) {
  auto method = runtime::ParseCalibrationMethod(flags.method);
  auto batches = ListBatches(flags.calibration_dir);
  if (!method.ok() || !batches.ok()) {
    std::fprintf(stderr, "error: %s\n", (method.ok() ? batches.status() : method.status()).message().c_str());
    return 2;
  }
  if (flags.max_batches > 0 && batches->size() > flags.max_batches) batches->resize(flags.max_batches);
  const fs::path model(flags.model);
  const fs::path out = flags.out.empty() ? model.parent_path() / (model.stem().string() + ".int8.onnx") : fs::path(flags.out);
  const int threads = flags.threads > 0 ? flags.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  runtime::SetIntraOpThreads(threads);
  ProgressBar progress("calibrating", batches->size());
  runtime::QuantizeOptions options{.method = *method, .percentile = flags.percentile, .threads = threads,
                                   .on_batch = [&](size_t done, size_t) { progress.Update(done); }};
  const bool one_input_files = batches->front().extension() == ".npy";
  auto read_batch = [&](size_t index, const std::vector<std::string>& names) -> StatusOr<std::vector<Tensor>> {
    const fs::path& where = (*batches)[index];
    if (one_input_files && names.size() != 1) {
      return Status::InvalidArgument("the model has " + std::to_string(names.size()) +
                                     " inputs: give each batch as a subfolder holding INPUT_NAME.npy per input");
    }
    std::vector<Tensor> inputs;
    for (const std::string& name : names) {
      const fs::path file = one_input_files ? where : where / (name + ".npy");
      ASSIGN_OR_RETURN(Tensor tensor, ReadCalibrationArray(file, name));
      inputs.push_back(std::move(tensor));
    }
    return inputs;
  };
  auto report = runtime::QuantizeModel(model, read_batch, batches->size(), options, out);
  if (!report.ok()) {
    std::fprintf(stderr, "error: %s\n", report.status().message().c_str());
    return 1;
  }
  if (flags.verbose) {
    std::printf("%-48s %12s %12s %12s %s\n", "activation", "min", "max", "threshold", "type");
    for (const auto& a : report->activations) {
      std::printf("%-48s %12.5g %12.5g %12.5g %s\n", a.name.c_str(), a.min, a.max, a.threshold, a.is_signed ? "int8" : "uint8");
    }
  }
  std::printf("quantized %d nodes (%zu activations calibrated on %zu batches, method %s) -> %s\n",
              report->quantized_nodes, report->activations.size(), batches->size(), flags.method.c_str(), out.c_str());
  return 0;
}

}  // namespace inferd
