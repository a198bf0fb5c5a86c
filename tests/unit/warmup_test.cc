#include "lifecycle/warmup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace inferd {
namespace {

namespace fs = std::filesystem;

ModelConfig WarmupConfig(const std::string& warmup) {
  auto config = ParseModelConfigText(
      "name: \"w\" backend: \"identity\" max_batch_size: 8 "
      "input [ { name: \"A\" data_type: TYPE_FP32 dims: [ 3 ] }, { name: \"S\" data_type: TYPE_STRING dims: "
      "[ 1 ] } ] "
      "output [ { name: \"OA\" data_type: TYPE_FP32 dims: [ 3 ] }, { name: \"OS\" data_type: TYPE_STRING "
      "dims: [ 1 ] } ] " +
          warmup,
      "t");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return *config;
}

TEST(WarmupTest, BuildsZeroAndRandomInputsWithTheBatchDimension) {
  ModelConfig config = WarmupConfig(R"(model_warmup [ { name: "s" batch_size: 4
      inputs { key: "A" value: { data_type: TYPE_FP32 dims: [ 3 ] random_data: true } }
      inputs { key: "S" value: { data_type: TYPE_STRING dims: [ 1 ] zero_data: true } } } ])");
  auto batch = BuildWarmupBatch(config, config.model_warmup(0), "/nonexistent");
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->batch_size, 4);
  const Tensor* a = batch->FindInput("A");
  const Tensor* s = batch->FindInput("S");
  ASSERT_TRUE(a && s);
  EXPECT_EQ(a->shape, (Shape{4, 3}));
  EXPECT_EQ(a->byte_size, 48u);
  for (float v : a->values<float>()) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(*CountBytesElements(s->data.get(), s->byte_size), 4);  // four empty strings
}

TEST(WarmupTest, ReadsDataFilesFromTheWarmupFolder) {
  fs::path dir = fs::temp_directory_path() / ("inferd_warmup_" + std::to_string(::getpid()));
  fs::create_directories(dir / "warmup");
  float values[3] = {1, 2, 3};
  std::ofstream(dir / "warmup" / "a.bin", std::ios::binary)
      .write(reinterpret_cast<char*>(values), sizeof(values));
  ModelConfig config = WarmupConfig(R"(model_warmup [ { name: "f" batch_size: 1
      inputs { key: "A" value: { data_type: TYPE_FP32 dims: [ 3 ] input_data_file: "a.bin" } } } ])");
  auto batch = BuildWarmupBatch(config, config.model_warmup(0), dir);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->FindInput("A")->values<float>()[2], 3.0f);

  ModelConfig missing = WarmupConfig(R"(model_warmup [ { name: "m"
      inputs { key: "A" value: { data_type: TYPE_FP32 dims: [ 3 ] input_data_file: "nope.bin" } } } ])");
  auto error = BuildWarmupBatch(missing, missing.model_warmup(0), dir);
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.status().message().find("nope.bin"), std::string::npos);
  fs::remove_all(dir);
}

TEST(WarmupTest, RunsEachSampleCountTimesAndReportsFailures) {
  struct CountingModel : Model {
    int runs = 0;
    bool fail = false;
    Status Execute(const ExecutionBatch&, std::vector<Tensor>*) override {
      ++runs;
      return fail ? Status::Internal("boom") : Status::Ok();
    }
  };
  ModelConfig config = WarmupConfig(R"(model_warmup [ { name: "z" count: 3
      inputs { key: "A" value: { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } } ])");
  CountingModel model;
  ASSERT_TRUE(RunWarmup(config, "/nonexistent", &model).ok());
  EXPECT_EQ(model.runs, 3);
  model.fail = true;
  Status status = RunWarmup(config, "/nonexistent", &model);
  EXPECT_NE(status.message().find("warmup 'z' failed"), std::string::npos);
}

}  // namespace
}  // namespace inferd
