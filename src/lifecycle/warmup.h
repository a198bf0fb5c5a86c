// Runs config.pbtxt's model_warmup samples on one freshly loaded instance before it serves, so the
// first real request does not pay for lazy initialisation.
#pragma once

#include <filesystem>

#include "backends/backend.h"
#include "config/model_config.h"

namespace inferd {

Status RunWarmup(const ModelConfig& config, const std::filesystem::path& model_dir, Model* model);

// The execution input one warmup sample describes (exposed for tests).
StatusOr<ExecutionBatch> BuildWarmupBatch(const ModelConfig& config, const inference::ModelWarmup& sample,
                                          const std::filesystem::path& model_dir);

}  // namespace inferd
