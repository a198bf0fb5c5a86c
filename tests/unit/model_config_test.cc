#include "config/model_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace inferd {
namespace {

constexpr const char* kValid = R"(
name: "m"
backend: "identity"
max_batch_size: 8
input [ { name: "IN", data_type: TYPE_FP32, dims: [ -1, 3 ] } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: [ -1, 3 ] } ]
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100
  priority_levels: 2 default_priority_level: 2
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5 max_queue_size: 3 } }
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "cost" value: { string_value: "fixed_us=1" } }
)";

StatusOr<ModelConfig> ParseAndValidate(const std::string& text) {
  auto config = ParseModelConfigText(text, "config.pbtxt");
  if (!config.ok()) return config;
  NormalizeModelConfig(&*config, "m");
  RETURN_IF_ERROR(ValidateModelConfig(*config, "config.pbtxt"));
  return config;
}

TEST(ModelConfigTest, ParsesTritonFields) {
  auto config = ParseAndValidate(kValid);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->max_batch_size(), 8);
  EXPECT_EQ(config->dynamic_batching().preferred_batch_size_size(), 2);
  EXPECT_EQ(config->dynamic_batching().default_queue_policy().timeout_action(),
            inference::ModelQueuePolicy::DELAY);
  EXPECT_EQ(InstanceCount(*config), 2);
  EXPECT_EQ(*ConfigParameter(*config, "cost"), "fixed_us=1");
  EXPECT_FALSE(ConfigParameter(*config, "nope").has_value());
  EXPECT_EQ(config->version_policy().latest().num_versions(), 1u);  // default filled
}

TEST(ModelConfigTest, UnknownFieldNamesFileAndLine) {
  auto config = ParseModelConfigText("name: \"m\"\nbogus_field: 3\n", "models/m/config.pbtxt");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("models/m/config.pbtxt"), std::string::npos);
  EXPECT_NE(config.status().message().find("line 2"), std::string::npos);
  EXPECT_NE(config.status().message().find("bogus_field"), std::string::npos);
}

TEST(ModelConfigTest, RejectsBadDims) {
  auto config = ParseAndValidate(
      "backend: \"identity\" max_batch_size: 1 input [ { name: \"A\" data_type: TYPE_FP32 dims: [ 0 ] } ]");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("input 'A'"), std::string::npos);
  EXPECT_FALSE(
      ParseAndValidate("backend: \"identity\" input [ { name: \"A\" data_type: TYPE_FP32 dims: [ -2 ] } ]")
          .ok());
  // max_batch_size 0 needs explicit dims
  EXPECT_FALSE(ParseAndValidate("backend: \"identity\" input [ { name: \"A\" data_type: TYPE_FP32 } ]").ok());
}

TEST(ModelConfigTest, RejectsDuplicateNamesAndNegativeBatch) {
  auto duplicate = ParseAndValidate(
      "backend: \"identity\" max_batch_size: 2 input [ { name: \"A\" data_type: TYPE_FP32 dims: [ 1 ] },"
      " { name: \"A\" data_type: TYPE_FP32 dims: [ 1 ] } ]");
  ASSERT_FALSE(duplicate.ok());
  EXPECT_NE(duplicate.status().message().find("duplicate input name"), std::string::npos);
  auto negative = ParseAndValidate("backend: \"identity\" max_batch_size: -1");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("max_batch_size"), std::string::npos);
}

TEST(ModelConfigTest, VersionLabelsParseAndMalformedOnesFailTheLoad) {
  auto config = ParseAndValidate(
      "backend: \"identity\" parameters { key: \"version_labels\" value: { string_value: \"stable:1,canary:2\" } }");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto labels = VersionLabels(*config);
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(labels->at("stable"), 1);
  EXPECT_EQ(labels->at("canary"), 2);
  for (const char* bad : {"stable", "stable:x", ":1", "stable:0", "stable:1x"}) {
    auto broken = ParseAndValidate(std::string("backend: \"identity\" parameters { key: \"version_labels\" value: { string_value: \"") +
                                   bad + "\" } }");
    ASSERT_FALSE(broken.ok()) << bad;
    EXPECT_NE(broken.status().message().find("version_labels"), std::string::npos) << broken.status().message();
  }
}

StatusOr<std::vector<int64_t>> PlannedSizes(const std::string& batching, const std::string& parameter) {
  std::string text = "backend: \"identity\" " + batching;
  if (!parameter.empty()) {
    text += " parameters { key: \"planned_batch_sizes\" value: { string_value: \"" + parameter + "\" } }";
  }
  auto config = ParseAndValidate(text);
  if (!config.ok()) return config.status();
  return PlannedBatchSizes(*config);
}

TEST(ModelConfigTest, PlannedBatchSizesDefaultToUpTo8PowersOfTwoPreferredAndMaxLargestFirst) {
  using Sizes = std::vector<int64_t>;
  EXPECT_EQ(*PlannedSizes("max_batch_size: 64", ""), (Sizes{64, 32, 16, 8, 7, 6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(*PlannedSizes("max_batch_size: 40 dynamic_batching { preferred_batch_size: [ 24 ] }", ""),
            (Sizes{40, 32, 24, 16, 8, 7, 6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(*PlannedSizes("max_batch_size: 4", ""), (Sizes{4, 3, 2, 1}));
  EXPECT_EQ(*PlannedSizes("max_batch_size: 1", ""), (Sizes{1}));
  EXPECT_EQ(*PlannedSizes("max_batch_size: 0", ""), Sizes{});  // not batching: nothing to plan
  EXPECT_EQ(*PlannedSizes("max_batch_size: 4", "all"), (Sizes{4, 3, 2, 1}));
  EXPECT_EQ(*PlannedSizes("max_batch_size: 4", "none"), Sizes{});
  EXPECT_EQ(*PlannedSizes("max_batch_size: 8", "1,3,8,3"), (Sizes{8, 3, 1}));
}

TEST(ModelConfigTest, MalformedPlannedBatchSizesFailTheLoadNamingTheParameter) {
  for (const char* bad : {"0", "9", "1,,2", "two", "2x", "-1"}) {
    auto sizes = PlannedSizes("max_batch_size: 8", bad);
    ASSERT_FALSE(sizes.ok()) << bad;
    EXPECT_NE(sizes.status().message().find("planned_batch_sizes"), std::string::npos) << sizes.status().message();
  }
}

TEST(ModelConfigTest, RejectsPreferredSizeAboveMax) {
  EXPECT_FALSE(
      ParseAndValidate("backend: \"identity\" max_batch_size: 4 dynamic_batching { preferred_batch_size: 8 }")
          .ok());
}

TEST(ModelConfigTest, LatencyTargetIsAPositiveNumberOnADynamicallyBatchedModel) {
  auto with_target = [](const std::string& model, const std::string& value) {
    return ParseAndValidate("backend: \"identity\" " + model + " parameters { key: \"latency_target_ms\" value: { string_value: \"" +
                            value + "\" } }");
  };
  auto config = with_target("max_batch_size: 8 dynamic_batching { }", "12.5");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(*LatencyTargetMs(*config), 12.5);
  EXPECT_EQ(*LatencyTargetMs(*ParseAndValidate("backend: \"identity\"")), 0.0);  // absent: Triton's rules
  for (const char* bad : {"0", "-3", "fast", ""}) {
    auto refused = with_target("max_batch_size: 8 dynamic_batching { }", bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("parameters[latency_target_ms]"), std::string::npos);
  }
  for (const char* model : {"max_batch_size: 8", "max_batch_size: 0 dynamic_batching { }"}) {
    auto refused = with_target(model, "50");
    ASSERT_FALSE(refused.ok()) << model;
    EXPECT_NE(refused.status().message().find("needs dynamic_batching"), std::string::npos) << refused.status().message();
  }
}

TEST(ModelConfigTest, MissingDataTypeAndBackend) {
  EXPECT_FALSE(
      ParseAndValidate("backend: \"identity\" max_batch_size: 1 input [ { name: \"A\" dims: [1] } ]").ok());
  EXPECT_FALSE(ParseAndValidate("max_batch_size: 1").ok());
}

TEST(VersionPolicyTest, LatestAllSpecific) {
  inference::ModelVersionPolicy policy;
  EXPECT_EQ(SelectVersions(policy, {3, 1, 2}), (std::vector<int64_t>{3}));  // default latest 1
  policy.mutable_latest()->set_num_versions(2);
  EXPECT_EQ(SelectVersions(policy, {3, 1, 2}), (std::vector<int64_t>{2, 3}));
  policy.mutable_all();
  EXPECT_EQ(SelectVersions(policy, {3, 1, 2}), (std::vector<int64_t>{1, 2, 3}));
  policy.mutable_specific()->add_versions(1);
  policy.mutable_specific()->add_versions(7);
  EXPECT_EQ(SelectVersions(policy, {3, 1, 2}), (std::vector<int64_t>{1}));
}

TEST(ModelConfigTest, LoadFromFolderChecksNameAndFillsIt) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "inferd_config_test" / "mymodel";
  fs::create_directories(dir);
  std::ofstream(dir / "config.pbtxt") << "backend: \"identity\" max_batch_size: 1";
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->name(), "mymodel");
  std::ofstream(dir / "config.pbtxt") << "name: \"other\" backend: \"identity\"";
  EXPECT_FALSE(LoadModelConfig(dir).ok());
  fs::remove(dir / "config.pbtxt");
  auto missing = LoadModelConfig(dir);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("mymodel"), std::string::npos);
  fs::remove_all(dir.parent_path());
}

TEST(ModelConfigTest, JsonUsesTritonFieldNames) {
  auto config = ParseAndValidate(kValid);
  ASSERT_TRUE(config.ok());
  std::string json = ModelConfigToJson(*config);
  EXPECT_NE(json.find("\"max_batch_size\":8"), std::string::npos) << json;
  EXPECT_NE(json.find("\"dynamic_batching\""), std::string::npos);
}

TEST(ModelConfigTest, JsonOverrideIsCompletedAndValidatedLikeConfigPbtxt) {
  auto config = ParseModelConfigJson(R"({"backend": "identity", "max_batch_size": 4,
      "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [2]}],
      "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]}]})", "m", "/nonexistent");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->name(), "m");
  EXPECT_EQ(config->max_batch_size(), 4);
  EXPECT_EQ(config->instance_group_size(), 1);  // Triton's defaults filled in
  EXPECT_FALSE(ParseModelConfigJson(R"({"shiny": true})", "m", "/nonexistent").ok());
  EXPECT_FALSE(ParseModelConfigJson("not json", "m", "/nonexistent").ok());
  auto renamed = ParseModelConfigJson(R"({"name": "other", "backend": "identity"})", "m", "/nonexistent");
  ASSERT_FALSE(renamed.ok());
  EXPECT_NE(renamed.status().message().find("does not match"), std::string::npos);
  auto invalid = ParseModelConfigJson(R"({"backend": "identity", "max_batch_size": -1})", "m", "/nonexistent");
  EXPECT_FALSE(invalid.ok());
}

}  // namespace
}  // namespace inferd
