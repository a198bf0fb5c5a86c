// tabular: concatenation with per-column standardisation, id hashing into buckets (the published
// FNV-1a vectors, strings and integers alike), and the configs it refuses.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/builtin/builtin_backends.h"

namespace inferd {
namespace {

template <typename T>
Tensor Make(const std::string& name, DataType dtype, Shape shape, std::vector<T> values) {
  auto storage = std::make_shared<std::vector<T>>(std::move(values));
  return {name, dtype, std::move(shape), AliasData(storage, storage->data()), storage->size() * sizeof(T)};
}

Tensor Strings(const std::string& name, Shape shape, const std::vector<std::string>& values) {
  auto storage = std::make_shared<std::string>();
  for (const std::string& value : values) {
    const auto length = static_cast<uint32_t>(value.size());
    storage->append(reinterpret_cast<const char*>(&length), 4);
    storage->append(value);
  }
  return {name, DataType::kBytes, std::move(shape), AliasData(storage, storage->data()), storage->size()};
}

constexpr const char* kConfig = R"(
  name: "features" backend: "tabular" max_batch_size: 8
  input [ { name: "age" data_type: TYPE_FP32 dims: [ 1 ] },
          { name: "history" data_type: TYPE_INT64 dims: [ 2 ] },
          { name: "user" data_type: TYPE_INT64 dims: [ 1 ] },
          { name: "country" data_type: TYPE_STRING dims: [ 1 ] } ]
  output [ { name: "dense" data_type: TYPE_FP32 dims: [ 3 ] },
           { name: "user_bucket" data_type: TYPE_INT64 dims: [ 1 ] },
           { name: "country_bucket" data_type: TYPE_INT32 dims: [ 1 ] } ]
  parameters [
    { key: "concat.dense" value: { string_value: "age,history" } },
    { key: "standardize.age" value: { string_value: "30:10" } },
    { key: "standardize.history" value: { string_value: "1:2,0:4" } },
    { key: "hash.user_bucket" value: { string_value: "user:1000" } },
    { key: "hash.country_bucket" value: { string_value: "country:1000" } } ])";

StatusOr<std::unique_ptr<Model>> Load(const ModelConfig& config) {
  BackendRegistry registry = BackendRegistry::WithBuiltins();
  ASSIGN_OR_RETURN(Backend * backend, registry.Select(config));
  return backend->Load(config, {});
}

TEST(TabularTest, HashIsFnv1a64) {
  EXPECT_EQ(TabularIdHash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(TabularIdHash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(TabularIdHash("foobar"), 0x85944171f73967e8ull);
}

TEST(TabularTest, ConcatenatesStandardisedColumnsAndHashesIds) {
  auto config = ParseModelConfigText(kConfig, "test");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto model = Load(*config);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ExecutionBatch batch;
  batch.batch_size = 2;
  batch.inputs.push_back(Make<float>("age", DataType::kFp32, {2, 1}, {40, 20}));
  batch.inputs.push_back(Make<int64_t>("history", DataType::kInt64, {2, 2}, {3, 8, 1, -4}));
  batch.inputs.push_back(Make<int64_t>("user", DataType::kInt64, {2, 1}, {42, -7}));
  batch.inputs.push_back(Strings("country", {2, 1}, {"42", "ch"}));
  std::vector<Tensor> outputs;
  ASSERT_TRUE((*model)->Execute(batch, &outputs).ok());
  ASSERT_EQ(outputs.size(), 3u);
  EXPECT_EQ(outputs[0].shape, (Shape{2, 3}));
  const auto dense = outputs[0].values<float>();
  EXPECT_EQ(std::vector<float>(dense.begin(), dense.end()), (std::vector<float>{1, 1, 2, -1, 0, -1}));
  const auto users = outputs[1].values<int64_t>();
  EXPECT_EQ(users[0], static_cast<int64_t>(TabularIdHash("42") % 1000));
  EXPECT_EQ(users[1], static_cast<int64_t>(TabularIdHash("-7") % 1000));
  ASSERT_EQ(outputs[2].dtype, DataType::kInt32);
  const auto countries = outputs[2].values<int32_t>();
  EXPECT_EQ(countries[0], users[0]);  // the id 42 and the string "42" share a bucket
  EXPECT_EQ(countries[1], static_cast<int32_t>(TabularIdHash("ch") % 1000));
}

TEST(TabularTest, RefusesConfigsThatDoNotAddUp) {
  auto base = ParseModelConfigText(kConfig, "test");
  ASSERT_TRUE(base.ok());
  auto refused = [&](auto change) {
    ModelConfig config = *base;
    change(config);
    auto model = Load(config);
    return model.ok() ? std::string() : model.status().message();
  };
  EXPECT_NE(refused([](ModelConfig& c) { c.mutable_output(0)->set_dims(0, 4); }).find("inputs give 3"), std::string::npos);
  EXPECT_NE(refused([](ModelConfig& c) { (*c.mutable_parameters())["concat.dense"].set_string_value("age,nope"); })
                .find("no input 'nope'"),
            std::string::npos);
  EXPECT_NE(refused([](ModelConfig& c) { (*c.mutable_parameters())["standardize.history"].set_string_value("1:2,0:4,0:1"); })
                .find("3 MEAN:STD pairs for 2 columns"),
            std::string::npos);
  EXPECT_NE(refused([](ModelConfig& c) { (*c.mutable_parameters())["standardize.user"].set_string_value("0:1"); })
                .find("no concat output uses input 'user'"),
            std::string::npos);
  EXPECT_NE(refused([](ModelConfig& c) { c.mutable_parameters()->erase("hash.user_bucket"); }).find("exactly one of"),
            std::string::npos);
  EXPECT_NE(refused([](ModelConfig& c) { (*c.mutable_parameters())["hash.user_bucket"].set_string_value("user:0"); })
                .find("bucket count"),
            std::string::npos);
  EXPECT_NE(refused([](ModelConfig& c) { (*c.mutable_parameters())["concat.dense"].set_string_value("country"); })
                .find("not numeric"),
            std::string::npos);
}

}  // namespace
}  // namespace inferd
