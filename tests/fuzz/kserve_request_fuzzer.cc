// libFuzzer target for the KServe v2 request parsers: inference requests (JSON and the binary
// tensor extension), the repository load request's body (Triton's config and file overrides), and
// the bodies of inferd's traffic, rollout and feedback routes, and the shared-memory register body.
// Input layout: the first byte chooses whether an Inference-Header-Content-Length is given, the
// next two bytes give it (little-endian), the rest is the HTTP body.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "frontends/http/kserve_codec.h"
#include "frontends/http/lifecycle_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  std::optional<size_t> json_length;
  if (data[0] & 1) json_length = static_cast<size_t>(data[1]) | (static_cast<size_t>(data[2]) << 8);
  auto body = std::make_shared<const std::string>(reinterpret_cast<const char*>(data + 3), size - 3);
  (void)inferd::ParseLoadRequest(*body);
  (void)inferd::ParseTrafficRequest(*body);
  (void)inferd::ParseRolloutRequest(*body);
  (void)inferd::ParseFeedbackRequest(*body);
  (void)inferd::ParseSharedMemoryRegistration(*body);
  auto parsed = inferd::ParseInferRequest(body, json_length);
  if (parsed.ok()) {
    // Whatever parses must also encode back without trouble.
    inferd::InferResponse response{"m", 1, parsed->request->id, parsed->request->inputs};
    // Inputs in shared memory have no bytes here (the server maps them in): answered as regions.
    response.output_regions = parsed->request->input_regions;
    (void)inferd::EncodeInferResponse(response, parsed->encoding);
  }
  return 0;
}
