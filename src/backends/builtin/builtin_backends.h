// Backends that need no model file, so serving can be built and tested without the ONNX engine:
//   identity : output i = input i (any dtype and shape), zero copy.
//   add_sub  : OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (FP32 or INT32).
// Both honour parameters { key: "cost" value: { string_value: "fixed_us=A,per_item_us=B" } }: an
// execution then keeps its thread busy for A + B * batch_size microseconds, so batching is
// measurable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace inferd {

class Backend;
class BackendRegistry;

struct ExecutionCost {
  int64_t fixed_us = 0;
  int64_t per_item_us = 0;
};

StatusOr<ExecutionCost> ParseExecutionCost(const std::string& text);
// Spins (real CPU work, not sleep) for the cost of a batch of `batch_size`.
void BurnExecutionCost(const ExecutionCost& cost, int64_t batch_size);

void RegisterBuiltinBackends(BackendRegistry* registry);

// classify (builtin/classify_backend.cc): top-k classes, softmax, labels.
std::unique_ptr<Backend> MakeClassifyBackend();
// image_preprocess (builtin/image_preprocess_backend.cc): JPEG/PNG bytes to an image tensor.
std::unique_ptr<Backend> MakeImagePreprocessBackend();
// tabular (builtin/tabular_backend.cc): feature concatenation, standardisation, id hashing.
std::unique_ptr<Backend> MakeTabularBackend();
// The bucket hash of `tabular` (FNV-1a, 64-bit), exposed for tests.
uint64_t TabularIdHash(std::string_view text);

}  // namespace inferd
