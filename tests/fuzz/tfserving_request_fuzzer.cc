// libFuzzer target for the TF Serving REST predict parser (row and columnar JSON, {"b64"}).
// Input layout: the first byte picks the model signature (one FP32 input, or INT32 + BYTES), the
// rest is the HTTP body.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "frontends/http/tfserving_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const std::vector<inferd::TfTensorSpec> one = {{"x", inferd::DataType::kFp32}};
  static const std::vector<inferd::TfTensorSpec> two = {{"a", inferd::DataType::kInt32}, {"b", inferd::DataType::kBytes}};
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto parsed = inferd::ParseTfPredictRequest(body, (data[0] & 1) ? two : one);
  if (parsed.ok()) {
    // Whatever parses must also encode back, in both formats, without trouble.
    inferd::InferResponse response{"m", 1, "", parsed->request->inputs};
    (void)inferd::EncodeTfPredictResponse(response, inferd::TfFormat::kColumnar, 0);
    (void)inferd::EncodeTfPredictResponse(response, inferd::TfFormat::kRow, parsed->instances);
  }
  return 0;
}
