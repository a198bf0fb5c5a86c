// TensorFlow Serving's REST predict API (https://www.tensorflow.org/tfx/serving/api_rest):
// request and response bodies, as pure functions over bytes (unit tested and fuzzed without a
// server).
//
//   row format:      {"instances": [<instance>, ...]}  ->  {"predictions": [<prediction>, ...]}
//   columnar format: {"inputs": <inputs>}               ->  {"outputs": <outputs>}
//
// An instance (row) or <inputs> (columnar) is an object of named tensors, or a bare tensor when
// the model has one input. Tensors are nested JSON lists whose nesting gives the shape; a BYTES
// element is a string or {"b64": "..."}. In the row format every instance adds one entry along a
// new batch dim 0. A prediction is the output's slice for that instance, or an object of them
// when the model answers with several outputs.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/infer_request.h"

namespace inferd {

// What the codec needs to know of the model: its inputs' names and types.
struct TfTensorSpec {
  std::string name;
  DataType dtype = DataType::kInvalid;
};

enum class TfFormat { kRow, kColumnar };

struct TfPredictRequest {
  std::unique_ptr<InferRequest> request;
  TfFormat format = TfFormat::kRow;
  int64_t instances = 0;  // row format: how many
};

StatusOr<TfPredictRequest> ParseTfPredictRequest(std::string_view body, const std::vector<TfTensorSpec>& inputs);

// The body for `response`; an error when the row format cannot be answered (an output whose dim 0
// is not the number of instances).
StatusOr<std::string> EncodeTfPredictResponse(const InferResponse& response, TfFormat format, int64_t instances);

}  // namespace inferd
