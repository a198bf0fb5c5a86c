#include "core/request_validation.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

ModelConfig Config(int max_batch) {
  auto config = ParseModelConfigText(R"(
name: "m" backend: "identity"
input [ { name: "A" data_type: TYPE_FP32 dims: [ -1, 2 ] },
        { name: "B" data_type: TYPE_INT32 dims: [ 3 ] reshape: { shape: [ 3, 1 ] } },
        { name: "C" data_type: TYPE_FP32 dims: [ 1 ] optional: true } ]
output [ { name: "OA" data_type: TYPE_FP32 dims: [ -1, 2 ] } ]
dynamic_batching { priority_levels: 2 default_priority_level: 1 }
)",
                                     "t");
  config->set_max_batch_size(max_batch);
  return *config;
}

Tensor Zeros(const std::string& name, DataType type, Shape shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  auto storage = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n) * DataTypeSize(type));
  return {name, type, shape, AliasData(storage, storage->data()), storage->size()};
}

std::unique_ptr<InferRequest> Request(std::vector<Tensor> inputs) {
  auto request = std::make_unique<InferRequest>();
  request->inputs = std::move(inputs);
  return request;
}

std::string Error(const ModelConfig& config, std::vector<Tensor> inputs) {
  auto result = ValidateRequest(config, Request(std::move(inputs)));
  return result.ok() ? "" : result.status().message();
}

TEST(RequestValidationTest, AcceptsReordersAndReshapes) {
  auto config = Config(4);
  auto result = ValidateRequest(
      config, Request({Zeros("B", DataType::kInt32, {2, 3}), Zeros("A", DataType::kFp32, {2, 5, 2})}));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->batch_size, 2);
  ASSERT_EQ(result->request->inputs.size(), 2u);
  EXPECT_EQ(result->request->inputs[0].name, "A");                // config order
  EXPECT_EQ(result->request->inputs[1].shape, (Shape{2, 3, 1}));  // reshaped
}

TEST(RequestValidationTest, ShapeKeyDiffersForDifferentNonBatchDims) {
  auto config = Config(4);
  auto one = ValidateRequest(
      config, Request({Zeros("A", DataType::kFp32, {1, 5, 2}), Zeros("B", DataType::kInt32, {1, 3})}));
  auto two = ValidateRequest(
      config, Request({Zeros("A", DataType::kFp32, {3, 5, 2}), Zeros("B", DataType::kInt32, {3, 3})}));
  auto other = ValidateRequest(
      config, Request({Zeros("A", DataType::kFp32, {1, 6, 2}), Zeros("B", DataType::kInt32, {1, 3})}));
  EXPECT_EQ(one->shape_key, two->shape_key);
  EXPECT_NE(one->shape_key, other->shape_key);
}

TEST(RequestValidationTest, RejectsBadRequestsWithClearMessages) {
  auto config = Config(4);
  auto b = [] { return Zeros("B", DataType::kInt32, {1, 3}); };
  EXPECT_NE(Error(config, {Zeros("Z", DataType::kFp32, {1, 1}), b()}).find("no input named 'Z'"),
            std::string::npos);
  EXPECT_NE(Error(config, {b()}).find("required input 'A' is missing"), std::string::npos);
  EXPECT_NE(Error(config, {Zeros("A", DataType::kFp64, {1, 1, 2}), b()}).find("expected FP32"),
            std::string::npos);
  EXPECT_NE(Error(config, {Zeros("A", DataType::kFp32, {1, 1, 3}), b()}).find("expected [-1,-1,2]"),
            std::string::npos);
  EXPECT_NE(Error(config, {Zeros("A", DataType::kFp32, {5, 1, 2}), Zeros("B", DataType::kInt32, {5, 3})})
                .find("max_batch_size=4"),
            std::string::npos);
  EXPECT_NE(Error(config, {Zeros("A", DataType::kFp32, {2, 1, 2}), b()}).find("disagree"), std::string::npos);
  EXPECT_NE(Error(config, {Zeros("A", DataType::kFp32, {1, 1, 2}), b(), b()}).find("given twice"),
            std::string::npos);
  Tensor short_data = Zeros("A", DataType::kFp32, {1, 1, 2});
  short_data.byte_size -= 4;
  EXPECT_NE(Error(config, {short_data, b()}).find("bytes of data"), std::string::npos);
}

TEST(RequestValidationTest, NonBatchingModelsNeedExactRank) {
  auto config = Config(0);
  EXPECT_EQ(Error(config, {Zeros("A", DataType::kFp32, {7, 2}), Zeros("B", DataType::kInt32, {3})}), "");
  EXPECT_NE(Error(config, {Zeros("A", DataType::kFp32, {1, 7, 2}), Zeros("B", DataType::kInt32, {3})}), "");
}

TEST(RequestValidationTest, UnknownOutputAndPriorityAboveLevels) {
  auto config = Config(4);
  auto request = Request({Zeros("A", DataType::kFp32, {1, 1, 2}), Zeros("B", DataType::kInt32, {1, 3})});
  request->requested_outputs = {"NOPE"};
  EXPECT_FALSE(ValidateRequest(config, std::move(request)).ok());
  request = Request({Zeros("A", DataType::kFp32, {1, 1, 2}), Zeros("B", DataType::kInt32, {1, 3})});
  request->priority = 3;
  EXPECT_FALSE(ValidateRequest(config, std::move(request)).ok());
}

}  // namespace
}  // namespace inferd
