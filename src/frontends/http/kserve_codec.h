// KServe v2 / Open Inference Protocol request and response bodies, JSON and the binary tensor
// extension. Pure functions over bytes, so they are unit tested and fuzzed without a server.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/infer_request.h"
#include "common/load_override.h"

namespace inferd {

struct OutputEncoding {
  bool binary_by_default = false;           // request parameter binary_data_output
  std::vector<std::string> binary_outputs;  // outputs that asked "binary_data": true
  std::vector<std::string> json_outputs;    // outputs that asked "binary_data": false
  bool IsBinary(std::string_view name) const;
};

struct ParsedInferRequest {
  std::unique_ptr<InferRequest> request;
  OutputEncoding encoding;
};

// `body` holds the whole HTTP body; tensors given in binary point into it (no copy), so it must be
// shared. `json_length` is the Inference-Header-Content-Length header, if present.
StatusOr<ParsedInferRequest> ParseInferRequest(std::shared_ptr<const std::string> body,
                                               std::optional<size_t> json_length);

// A body of the protocol: JSON, then the binary tensors' bytes when there are any.
struct EncodedBody {
  std::string body;
  std::optional<size_t> json_length;  // set when binary tensors follow the JSON
};
using EncodedResponse = EncodedBody;

EncodedResponse EncodeInferResponse(const InferResponse& response, const OutputEncoding& encoding);

// The client's side of the same protocol (client/ and `inferd infer|bench`).
using EncodedRequest = EncodedBody;
// `binary`: every input travels in the binary extension and every output is asked for in binary;
// otherwise all is JSON arrays.
EncodedRequest EncodeInferRequest(const InferRequest& request, bool binary);
// Binary outputs point into `body` (no copy).
StatusOr<InferResponse> ParseInferResponse(std::shared_ptr<const std::string> body,
                                           std::optional<size_t> json_length);

// The body of POST /v2/repository/models/M/load, Triton's: empty, or {"parameters": {"config":
// "<the config as JSON>", "file:1/model.onnx": "<base64>"}}. Unknown parameters are errors.
StatusOr<LoadOverride> ParseLoadRequest(std::string_view body);

// The body of POST /v2/systemsharedmemory/region/R/register, Triton's: {"key", "offset",
// "byte_size"} (offset optional, 0). Unknown fields are errors.
struct SharedMemoryRegistration {
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};
StatusOr<SharedMemoryRegistration> ParseSharedMemoryRegistration(std::string_view body);

// {"error": "..."} with the message escaped.
std::string ErrorJson(std::string_view message);

}  // namespace inferd
