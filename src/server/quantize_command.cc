#include "server/quantize_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <thread>

#include "common/container_resources.h"
#include "runtime/quantization/quantize_model.h"
#include "runtime/threading.h"
#include "server/calibration_set.h"
#include "server/progress_bar.h"

namespace inferd {

namespace fs = std::filesystem;

void AddQuantizeFlags(CLI::App* command, QuantizeFlags* flags) {
  command->add_option("model", flags->model, "The fp32 ONNX model")->required()->check(CLI::ExistingFile);
  command->add_option("--calibration", flags->calibration_dir,
                      "Folder of calibration .npy files (one per batch; for a model with several inputs, one "
                      "subfolder per batch holding INPUT_NAME.npy), or of JPEG/PNG images with --preprocess")
      ->required();
  CLI::Option* preprocess = command->add_option("--preprocess", flags->preprocess_model,
                      "Folder of an image_preprocess model (its config.pbtxt): the calibration folder holds images, "
                      "turned into the model's input as that model does when serving")
      ->check(CLI::ExistingDirectory);
  command->add_option("--batch-size", flags->images_per_batch, "Images per calibration batch, with --preprocess")
      ->check(CLI::Range(1, 4096))
      ->needs(preprocess)
      ->capture_default_str();
  command->add_option("--method", flags->method, "How activation ranges are chosen: entropy (TensorRT's KL "
                                                 "divergence), percentile or minmax")
      ->check(CLI::IsMember({"entropy", "percentile", "minmax"}))
      ->capture_default_str();
  command->add_option("--percentile", flags->percentile, "The percentile of |x| kept by --method percentile")
      ->check(CLI::Range(50.0, 100.0))
      ->capture_default_str();
  command->add_option("--activations", flags->activations,
                      "Activations that go negative: symmetric int8 (zero point 0), or asymmetric uint8 with a "
                      "zero point (as ONNX Runtime's quantiser writes them)")
      ->check(CLI::IsMember({"symmetric", "asymmetric"}))
      ->capture_default_str();
  command->add_option("--out", flags->out, "The QDQ model to write (default: MODEL.int8.onnx next to the model)");
  command->add_option("--max-batches", flags->max_batches, "Calibrate on at most this many batches (0: all)")
      ->capture_default_str();
  command->add_option("--threads", flags->threads, "Intra-op threads for the calibration runs (0: the CPUs available to the process)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  command->add_flag("--verbose", flags->verbose, "Print each activation's range and chosen threshold");
}

int RunQuantize(const QuantizeFlags& flags) {
  auto method = runtime::ParseCalibrationMethod(flags.method);
  auto calibration = flags.preprocess_model.empty()
                         ? NpyCalibrationSet(flags.calibration_dir, flags.max_batches)
                         : ImageCalibrationSet(flags.calibration_dir, flags.preprocess_model, flags.images_per_batch,
                                               flags.max_batches);
  if (!method.ok() || !calibration.ok()) {
    std::fprintf(stderr, "error: %s\n", (method.ok() ? calibration.status() : method.status()).message().c_str());
    return 2;
  }
  const fs::path model(flags.model);
  const fs::path out = flags.out.empty() ? model.parent_path() / (model.stem().string() + ".int8.onnx") : fs::path(flags.out);
  const int threads = flags.threads > 0 ? flags.threads : AvailableCpus();  // the container's, not the node's
  runtime::SetIntraOpThreads(threads);
  ProgressBar progress("calibrating", calibration->batch_count);
  runtime::QuantizeOptions options{.method = *method, .percentile = flags.percentile,
                                   .asymmetric = flags.activations == "asymmetric", .threads = threads,
                                   .on_batch = [&](size_t done, size_t) { progress.Update(done); }};
  auto report = runtime::QuantizeModel(model, calibration->read, calibration->batch_count, options, out);
  if (!report.ok()) {
    std::fprintf(stderr, "error: %s\n", report.status().message().c_str());
    return 1;
  }
  if (flags.verbose) {
    std::printf("%-48s %12s %12s %12s %s\n", "activation", "min", "max", "threshold", "type");
    for (const auto& a : report->activations) {
      const std::string type = a.is_signed ? "int8" : a.zero_point != 0 ? "uint8 zero point " + std::to_string(a.zero_point) : "uint8";
      std::printf("%-48s %12.5g %12.5g %12.5g %s\n", a.name.c_str(), a.min, a.max, a.threshold, type.c_str());
    }
  }
  std::printf("quantized %d nodes (%zu activations calibrated on %zu batches, method %s) -> %s\n",
              report->quantized_nodes, report->activations.size(), calibration->batch_count, flags.method.c_str(), out.c_str());
  return 0;
}

}  // namespace inferd
