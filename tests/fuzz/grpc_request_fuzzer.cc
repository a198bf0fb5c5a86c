// libFuzzer target for the KServe v2 gRPC request conversion: arbitrary bytes as a serialized
// ModelInferRequest (what the network hands the server), then ModelInferRequest -> InferRequest.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "frontends/grpc/grpc_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto message = std::make_shared<inference::ModelInferRequest>();
  if (!message->ParseFromArray(data, static_cast<int>(size))) return 0;
  auto parsed = inferd::ParseModelInferRequest(std::move(message));
  if (!parsed.ok()) return 0;
  // Every byte a tensor claims must be readable (ASan checks), and what parses must encode back.
  uint8_t checksum = 0;
  for (const inferd::Tensor& tensor : (*parsed)->inputs) {
    for (uint8_t byte : tensor.bytes()) checksum ^= byte;
  }
  inferd::InferResponse response{"m", 1, (*parsed)->id, (*parsed)->inputs};
  inference::ModelInferResponse encoded;
  inferd::EncodeModelInferResponse(response, &encoded);
  static volatile uint8_t sink;  // keeps the reads from being optimised away
  sink = checksum;
  return 0;
}
