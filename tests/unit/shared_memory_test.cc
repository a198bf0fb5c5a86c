// The system shared-memory registry against real POSIX shared-memory objects.
#include "core/shared_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "client/shared_memory.h"

namespace inferd {
namespace {

// A fresh object per test, removed when the test ends.
std::unique_ptr<client::SharedMemoryRegion> MakeObject(size_t size) {
  static int counter = 0;
  const std::string key = "/inferd_shm_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  auto region = client::SharedMemoryRegion::Create(key, size);
  EXPECT_TRUE(region.ok()) << region.status().ToString();
  return std::move(region).value();
}

Tensor Fp32Input(const std::string& name, Shape shape) {
  return Tensor{.name = name, .dtype = DataType::kFp32, .shape = std::move(shape)};
}

TEST(SharedMemoryTest, RegisteredBytesAreReadInPlaceAndOutputsWrittenBack) {
  auto object = MakeObject(4096);
  const float values[4] = {1, 2, 3, 4};
  std::memcpy(object->data() + 64, values, sizeof(values));
  SharedMemoryRegistry registry(true);
  ASSERT_TRUE(registry.Register("inputs", object->key(), 0, 4096).ok());

  InferRequest request;
  request.inputs.push_back(Fp32Input("x", {4}));
  request.input_regions.push_back({"x", {.region = "inputs", .offset = 64, .byte_size = 16}});
  request.output_regions.push_back({"y", {.region = "inputs", .offset = 1024, .byte_size = 32}});
  ASSERT_TRUE(registry.AttachInputs(request).ok());
  EXPECT_EQ(request.inputs[0].byte_size, 16u);
  EXPECT_EQ(request.inputs[0].values<float>()[3], 4.0f);
  // In place: the tensor points into the client's object, not at a copy.
  object->data()[64] = 0;
  object->data()[65] = 0;
  object->data()[66] = 0xa0;
  object->data()[67] = 0x40;  // 5.0f
  EXPECT_EQ(request.inputs[0].values<float>()[0], 5.0f);

  auto destinations = registry.ResolveOutputs(request);
  ASSERT_TRUE(destinations.ok()) << destinations.status().ToString();
  InferResponse response;
  response.outputs.push_back(request.inputs[0]);
  response.outputs[0].name = "y";
  ASSERT_TRUE(WriteOutputsToSharedMemory(*destinations, response).ok());
  float written[4];
  std::memcpy(written, object->data() + 1024, sizeof(written));
  EXPECT_EQ(written[0], 5.0f);
  EXPECT_EQ(written[3], 4.0f);
  ASSERT_EQ(response.output_regions.size(), 1u);
  EXPECT_EQ(response.output_regions[0].second.byte_size, 16u);  // what was written, not the room
  EXPECT_EQ(response.outputs[0].data, nullptr);
  EXPECT_EQ(response.outputs[0].shape, (Shape{4}));
}

TEST(SharedMemoryTest, AMisalignedInputIsCopiedToAlignedMemory) {
  auto object = MakeObject(4096);
  const float value = 7;
  std::memcpy(object->data() + 3, &value, sizeof(value));
  SharedMemoryRegistry registry(true);
  ASSERT_TRUE(registry.Register("r", object->key(), 0, 4096).ok());
  InferRequest request;
  request.inputs.push_back(Fp32Input("x", {1}));
  request.input_regions.push_back({"x", {.region = "r", .offset = 3, .byte_size = 4}});
  ASSERT_TRUE(registry.AttachInputs(request).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(request.inputs[0].data.get()) % alignof(float), 0u);
  EXPECT_EQ(request.inputs[0].values<float>()[0], 7.0f);
}

TEST(SharedMemoryTest, ARegionAtAnOffsetMapsTheRightBytes) {
  auto object = MakeObject(3 * 4096);
  object->data()[4096 + 100 + 8] = 42;
  SharedMemoryRegistry registry(true);
  // Not page aligned: the mapping starts at the page below and the region at its offset.
  ASSERT_TRUE(registry.Register("r", object->key(), 4096 + 100, 200).ok());
  auto bytes = registry.Resolve({.region = "r", .offset = 8, .byte_size = 1});
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->data.get()[0], 42);
}

TEST(SharedMemoryTest, BadRegistrationsAreRefusedWithTheReason) {
  auto object = MakeObject(1000);
  SharedMemoryRegistry registry(true);
  struct Case {
    std::string name, key;
    uint64_t offset, byte_size;
    StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"a", "/inferd_no_such_object", 0, 10, StatusCode::kInvalidArgument, "cannot open shared memory object"},
      {"a", object->key(), 0, 1001, StatusCode::kInvalidArgument, "beyond the 1000 bytes"},
      {"a", object->key(), 990, 11, StatusCode::kInvalidArgument, "beyond the 1000 bytes"},
      {"a", object->key(), 0, 0, StatusCode::kInvalidArgument, "byte_size must be above 0"},
      {"a", "", 0, 10, StatusCode::kInvalidArgument, "'key' is empty"},
      {"", object->key(), 0, 10, StatusCode::kInvalidArgument, "needs a name"},
      {"a", object->key(), UINT64_MAX, 10, StatusCode::kInvalidArgument, "overflows"},
      {"a", "/a/b", 0, 10, StatusCode::kInvalidArgument, "cannot open"},
  };
  for (const Case& c : cases) {
    Status status = registry.Register(c.name, c.key, c.offset, c.byte_size);
    EXPECT_EQ(status.code(), c.code) << c.key << " " << c.offset << " " << c.byte_size;
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status.message();
  }
  ASSERT_TRUE(registry.Register("a", object->key(), 0, 1000).ok());
  EXPECT_EQ(registry.Register("a", object->key(), 0, 10).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.Regions("").value().size(), 1u);
}

TEST(SharedMemoryTest, RequestsOutsideARegionOrToAnUnknownOneAreRefused) {
  auto object = MakeObject(4096);
  SharedMemoryRegistry registry(true);
  ASSERT_TRUE(registry.Register("r", object->key(), 0, 100).ok());
  EXPECT_EQ(registry.Resolve({.region = "nope", .byte_size = 1}).status().code(), StatusCode::kNotFound);
  auto past_end = registry.Resolve({.region = "r", .offset = 90, .byte_size = 11});
  EXPECT_EQ(past_end.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past_end.status().message().find("out of range"), std::string::npos);
  EXPECT_EQ(registry.Resolve({.region = "r", .offset = UINT64_MAX, .byte_size = 2}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry.Resolve({.region = "r", .offset = 90, .byte_size = 10}).ok());

  // An output larger than the room the request gave it.
  InferRequest request;
  request.output_regions.push_back({"y", {.region = "r", .offset = 0, .byte_size = 8}});
  auto destinations = registry.ResolveOutputs(request);
  ASSERT_TRUE(destinations.ok());
  InferResponse response;
  response.outputs.push_back(Tensor{.name = "y", .dtype = DataType::kFp32, .shape = {4}, .data = nullptr, .byte_size = 16});
  auto too_small = WriteOutputsToSharedMemory(*destinations, response);
  EXPECT_EQ(too_small.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_small.message().find("shared_memory_byte_size is 8"), std::string::npos) << too_small.message();
}

TEST(SharedMemoryTest, UnregisteringKeepsTheBytesOfRequestsInFlight) {
  auto object = MakeObject(4096);
  object->data()[0] = 9;
  SharedMemoryRegistry registry(true);
  ASSERT_TRUE(registry.Register("r", object->key(), 0, 4096).ok());
  auto bytes = registry.Resolve({.region = "r", .byte_size = 1});
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(registry.Unregister("r").ok());
  EXPECT_EQ(registry.Unregister("r").code(), StatusCode::kNotFound);
  EXPECT_EQ(registry.Resolve({.region = "r", .byte_size = 1}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(bytes->data.get()[0], 9);  // still mapped: the request holds it
  ASSERT_TRUE(registry.Register("r", object->key(), 0, 10).ok());
  ASSERT_TRUE(registry.Register("s", object->key(), 0, 10).ok());
  ASSERT_TRUE(registry.Unregister("").ok());  // every region
  EXPECT_TRUE(registry.Regions("").value().empty());
  EXPECT_EQ(registry.Regions("r").status().code(), StatusCode::kNotFound);
}

TEST(SharedMemoryTest, AServerThatDoesNotAllowItRefusesEveryCall) {
  auto object = MakeObject(4096);
  SharedMemoryRegistry registry(false);
  Status status = registry.Register("r", object->key(), 0, 10);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("--allow-client-shm"), std::string::npos);
  EXPECT_EQ(registry.Regions("").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry.Resolve({.region = "r", .byte_size = 1}).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace inferd
