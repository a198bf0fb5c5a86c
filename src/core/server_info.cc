#include "core/server_info.h"

#include <array>
#include <charconv>

namespace inferd {

std::span<const std::string_view> ServerExtensions() {
  static constexpr std::array<std::string_view, 6> kExtensions = {
      "binary_tensor_data", "classification", "statistics", "model_repository", "model_configuration",
      "system_shared_memory"};
  return kExtensions;
}

std::string ReportedPlatform(const ModelConfig& config) {
  const std::string& named = config.platform().empty() ? config.backend() : config.platform();
  return named == "onnxruntime" ? std::string("onnxruntime_onnx") : named;
}

StatusOr<int64_t> ParseModelVersion(std::string_view text) {
  int64_t version = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (error != std::errc() || end != text.data() + text.size() || version <= 0) {
    return Status::InvalidArgument("version '" + std::string(text) + "' is not a positive integer");
  }
  return version;
}

}  // namespace inferd
