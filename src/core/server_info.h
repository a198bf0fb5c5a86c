// What every frontend reports the same way, whatever its protocol: the server's identity and
// extensions, a model's platform name, and version numbers given as text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "config/model_config.h"

namespace inferd {

inline constexpr std::string_view kServerName = "inferd";

// The KServe v2 extensions inferd implements (server metadata's `extensions`).
std::span<const std::string_view> ServerExtensions();

// As Triton: the platform, or else the backend; ONNX models report onnxruntime_onnx either way.
std::string ReportedPlatform(const ModelConfig& config);

// "3" -> 3. Versions are positive; anything else (sign, spaces, overflow) is INVALID_ARGUMENT.
StatusOr<int64_t> ParseModelVersion(std::string_view text);

}  // namespace inferd
