// Checks an inference request against its model's config before it may queue: names, dtypes,
// shapes, batch size, data sizes. Puts inputs in config order, applies `reshape`, and computes the
// key that decides which requests may share a batch.
#pragma once

#include <memory>

#include "common/infer_request.h"
#include "config/model_config.h"

namespace inferd {

StatusOr<ValidatedRequest> ValidateRequest(const ModelConfig& config, std::unique_ptr<InferRequest> request);

}  // namespace inferd
