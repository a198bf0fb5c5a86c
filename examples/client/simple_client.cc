// A first program against inferd (or any KServe v2 server) with the client library:
//
//   simple_client [URL] [http|grpc]      (defaults: localhost:8000 http)
//
// Checks the server, reads add_sub's metadata, then asks OUTPUT0 = INPUT0 + INPUT1 and
// OUTPUT1 = INPUT0 - INPUT1 once synchronously and eight times asynchronously, and checks answers.
#include <cstdio>
#include <cstring>
#include <future>
#include <vector>

#include "client/client.h"

using inferd::InferRequest;
using inferd::InferResponse;
using inferd::StatusOr;
using inferd::Tensor;
namespace client = inferd::client;

// INPUT0 = offset, offset+1, ...; INPUT1 = all ones; in the model's datatype (FP32 or INT32).
Tensor MakeInput(const client::TensorMetadata& input, int64_t elements, int offset, bool ones) {
  const inferd::DataType dtype = inferd::DataTypeFromName(input.datatype);
  auto values = std::make_shared<std::vector<uint8_t>>(elements * 4);
  for (int64_t i = 0; i < elements; ++i) {
    const int value = ones ? 1 : offset + static_cast<int>(i);
    if (dtype == inferd::DataType::kFp32) {
      const float f = static_cast<float>(value);
      std::memcpy(values->data() + i * 4, &f, 4);
    } else {
      const int32_t n = value;
      std::memcpy(values->data() + i * 4, &n, 4);
    }
  }
  Tensor tensor{.name = input.name, .dtype = dtype, .shape = {1, elements}};
  tensor.data = inferd::AliasData(values, values->data());
  tensor.byte_size = values->size();
  return tensor;
}

double Element(const Tensor& tensor, int64_t i) {
  if (tensor.dtype == inferd::DataType::kFp32) return tensor.values<float>()[i];
  return tensor.values<int32_t>()[i];
}

bool Check(const StatusOr<InferResponse>& response, int offset, int64_t elements) {
  if (!response.ok()) {
    std::fprintf(stderr, "inference failed: %s\n", response.status().message().c_str());
    return false;
  }
  for (int64_t i = 0; i < elements; ++i) {
    const double input = offset + static_cast<double>(i);
    if (Element(response->outputs[0], i) != input + 1 || Element(response->outputs[1], i) != input - 1) {
      std::fprintf(stderr, "wrong answer at element %lld\n", static_cast<long long>(i));
      return false;
    }
  }
  return true;
}

int main(int argc, char** argv) {
  const bool grpc = argc > 2 && std::strcmp(argv[2], "grpc") == 0;
  auto connected = client::Connect({.url = argc > 1 ? argv[1] : "localhost:8000",
                                    .protocol = grpc ? client::Protocol::kGrpc : client::Protocol::kHttp,
                                    .timeout = std::chrono::seconds(10)});
  if (!connected.ok()) return std::fprintf(stderr, "%s\n", connected.status().message().c_str()), 1;
  client::Client& server = **connected;

  auto live = server.ServerLive();
  auto ready = server.ServerReady();
  if (!live.ok() || !*live || !ready.ok() || !*ready) return std::fprintf(stderr, "server not live and ready\n"), 1;
  auto metadata = server.GetModelMetadata("add_sub");
  if (!metadata.ok()) return std::fprintf(stderr, "%s\n", metadata.status().message().c_str()), 1;
  const int64_t elements = metadata->inputs[0].shape.back();
  std::printf("add_sub: %s, %zu inputs of %lld %s\n", metadata->platform.c_str(), metadata->inputs.size(),
              static_cast<long long>(elements), metadata->inputs[0].datatype.c_str());

  auto request_for = [&](int offset) {
    return InferRequest{.model_name = "add_sub",
                        .id = "request-" + std::to_string(offset),
                        .inputs = {MakeInput(metadata->inputs[0], elements, offset, false),
                                   MakeInput(metadata->inputs[1], elements, offset, true)}};
  };
  if (!Check(server.Infer(request_for(0)), 0, elements)) return 1;
  std::printf("sync: ok\n");

  std::vector<std::future<bool>> answers;
  for (int offset = 1; offset <= 8; ++offset) {
    auto promise = std::make_shared<std::promise<bool>>();
    answers.push_back(promise->get_future());
    server.InferAsync(request_for(offset), [promise, offset, elements](StatusOr<InferResponse> response) {
      promise->set_value(Check(response, offset, elements));
    });
  }
  for (auto& answer : answers)
    if (!answer.get()) return 1;
  std::printf("async: 8 ok\n");
  return 0;
}
