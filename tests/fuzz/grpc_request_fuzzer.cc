// libFuzzer target for the KServe v2 gRPC request conversion: arbitrary bytes as a serialized
// ModelInferRequest (what the network hands the server), then ModelInferRequest -> InferRequest.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "frontends/grpc/grpc_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto message = std::make_shared<inference::ModelInferRequest>();
  if (!message->ParseFromArray(data, static_cast<int>(size))) return 0;
  auto parsed = inferd::ParseModelInferRequest(std::move(message));
  if (!parsed.ok()) return 0;
  // What parses must encode back, byte for byte (reading every byte a tensor claims: ASan checks).
  const auto& inputs = (*parsed)->inputs;
  inferd::InferResponse response{"m", 1, (*parsed)->id, inputs};
  // Inputs in shared memory have no bytes here (the server maps them in): answered as regions,
  // with an empty raw entry in their place.
  response.output_regions = (*parsed)->input_regions;
  inference::ModelInferResponse encoded;
  inferd::EncodeModelInferResponse(response, &encoded);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool shared = inferd::FindRegion(response.output_regions, inputs[i].name) != nullptr;
    const auto bytes = shared ? std::span<const uint8_t>() : inputs[i].bytes();
    const std::string& raw = encoded.raw_output_contents(static_cast<int>(i));
    if (raw.size() != bytes.size() || (!bytes.empty() && std::memcmp(raw.data(), bytes.data(), bytes.size()) != 0))
      __builtin_trap();
  }
  return 0;
}
