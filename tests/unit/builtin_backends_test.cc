#include "backends/builtin/builtin_backends.h"

#include <gtest/gtest.h>

#include <chrono>

#include "backends/backend.h"

namespace inferd {
namespace {

ModelConfig AddSubConfig(inference::DataType type, const std::string& cost = "") {
  ModelConfig config;
  config.set_name("as");
  config.set_backend("add_sub");
  config.set_max_batch_size(4);
  for (const char* name : {"INPUT0", "INPUT1"}) {
    auto* input = config.add_input();
    input->set_name(name);
    input->set_data_type(type);
    input->add_dims(2);
  }
  for (const char* name : {"OUTPUT0", "OUTPUT1"}) {
    auto* output = config.add_output();
    output->set_name(name);
    output->set_data_type(type);
    output->add_dims(2);
  }
  if (!cost.empty()) (*config.mutable_parameters())["cost"].set_string_value(cost);
  return config;
}

template <typename T>
Tensor Make(const std::string& name, std::vector<T> values) {
  auto storage = std::make_shared<std::vector<T>>(std::move(values));
  return {name,
          sizeof(T) == 4 && std::is_floating_point_v<T> ? DataType::kFp32 : DataType::kInt32,
          {1, static_cast<int64_t>(storage->size())},
          AliasData(storage, storage->data()),
          storage->size() * sizeof(T)};
}

TEST(CostTest, Parses) {
  auto cost = ParseExecutionCost("fixed_us=2000,per_item_us=100");
  ASSERT_TRUE(cost.ok());
  EXPECT_EQ(cost->fixed_us, 2000);
  EXPECT_EQ(cost->per_item_us, 100);
  EXPECT_FALSE(ParseExecutionCost("fixed_us=abc").ok());
  EXPECT_FALSE(ParseExecutionCost("speed=3").ok());
  EXPECT_FALSE(ParseExecutionCost("fixed_us=-3").ok());
}

TEST(CostTest, BurnsAtLeastTheCost) {
  auto start = std::chrono::steady_clock::now();
  BurnExecutionCost({.fixed_us = 1000, .per_item_us = 500}, 4);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::microseconds(3000));
}

TEST(AddSubTest, ComputesSumAndDifference) {
  auto registry = BackendRegistry::WithBuiltins();
  ModelConfig config = AddSubConfig(inference::TYPE_FP32);
  auto backend = registry.Select(config);
  ASSERT_TRUE(backend.ok());
  auto model = (*backend)->Load(config, {});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ExecutionBatch batch{1, {Make<float>("INPUT0", {5, 1}), Make<float>("INPUT1", {2, 3})}};
  std::vector<Tensor> outputs;
  ASSERT_TRUE((*model)->Execute(batch, &outputs).ok());
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].values<float>()[0], 7);
  EXPECT_EQ(outputs[0].values<float>()[1], 4);
  EXPECT_EQ(outputs[1].values<float>()[0], 3);
  EXPECT_EQ(outputs[1].values<float>()[1], -2);
}

TEST(AddSubTest, Int32AndBadConfigs) {
  auto registry = BackendRegistry::WithBuiltins();
  ModelConfig config = AddSubConfig(inference::TYPE_INT32);
  auto model = (*registry.Select(config))->Load(config, {});
  ASSERT_TRUE(model.ok());
  ExecutionBatch batch{1, {Make<int32_t>("INPUT0", {5, 1}), Make<int32_t>("INPUT1", {2, 3})}};
  std::vector<Tensor> outputs;
  ASSERT_TRUE((*model)->Execute(batch, &outputs).ok());
  EXPECT_EQ(outputs[1].values<int32_t>()[1], -2);

  ModelConfig bad = AddSubConfig(inference::TYPE_FP64);
  EXPECT_FALSE((*registry.Select(bad))->Load(bad, {}).ok());
  ModelConfig bad_cost = AddSubConfig(inference::TYPE_FP32, "fixed_us=x");
  EXPECT_FALSE((*registry.Select(bad_cost))->Load(bad_cost, {}).ok());
}

TEST(BackendRegistryTest, UnknownBackendListsKnownOnes) {
  auto registry = BackendRegistry::WithBuiltins();
  ModelConfig config;
  config.set_name("x");
  config.set_backend("tensorrt");
  auto backend = registry.Select(config);
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.status().message().find("identity"), std::string::npos);
}

TEST(IdentityTest, OutputsShareInputMemory) {
  auto registry = BackendRegistry::WithBuiltins();
  ModelConfig config;
  config.set_name("id");
  config.set_backend("identity");
  auto* input = config.add_input();
  input->set_name("I");
  input->set_data_type(inference::TYPE_FP32);
  auto* output = config.add_output();
  output->set_name("O");
  output->set_data_type(inference::TYPE_FP32);
  auto model = (*registry.Select(config))->Load(config, {});
  ASSERT_TRUE(model.ok());
  ExecutionBatch batch{1, {Make<float>("I", {1, 2, 3})}};
  std::vector<Tensor> outputs;
  ASSERT_TRUE((*model)->Execute(batch, &outputs).ok());
  EXPECT_EQ(outputs[0].name, "O");
  EXPECT_EQ(outputs[0].data.get(), batch.inputs[0].data.get());
}

}  // namespace
}  // namespace inferd
