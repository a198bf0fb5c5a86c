#include "instances/planned_batches.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

namespace inferd {
namespace {

using Parts = std::vector<std::pair<int64_t, int64_t>>;  // (rows, planned)

Parts PartsOf(const BatchPartition& partition, int64_t batch) {
  Parts parts;
  for (const BatchPart& part : partition.PartsFor(batch)) parts.emplace_back(part.rows, part.planned);
  return parts;
}

TEST(BatchPartitionTest, SplitsOrPadsWhicheverTheTimingsSayIsCheaper) {
  // Time proportional to rows: splitting never loses.
  BatchPartition linear({4, 2, 1}, {4.0, 2.0, 1.0}, 7);
  EXPECT_EQ(PartsOf(linear, 3), (Parts{{2, 2}, {1, 1}}));
  EXPECT_EQ(PartsOf(linear, 4), (Parts{{4, 4}}));
  EXPECT_EQ(PartsOf(linear, 7), (Parts{{4, 4}, {2, 2}, {1, 1}}));
  // Every execution costs about the same whatever its rows: padding up wins.
  BatchPartition overhead({4, 2, 1}, {1.1, 1.05, 1.0}, 4);
  EXPECT_EQ(PartsOf(overhead, 3), (Parts{{3, 4}}));
  // Beyond the largest planned size: split, the last part padded when that is cheaper.
  BatchPartition small_parts_cheaper({8, 4}, {8.0, 3.0}, 13);
  EXPECT_EQ(PartsOf(small_parts_cheaper, 5), (Parts{{4, 4}, {1, 4}}));
  EXPECT_EQ(PartsOf(small_parts_cheaper, 13), (Parts{{4, 4}, {4, 4}, {4, 4}, {1, 4}}));
  BatchPartition large_parts_cheaper({8, 4}, {8.0, 4.5}, 13);
  EXPECT_EQ(PartsOf(large_parts_cheaper, 5), (Parts{{5, 8}}));
  EXPECT_EQ(PartsOf(large_parts_cheaper, 13), (Parts{{8, 8}, {5, 8}}));
}

TEST(BatchPartitionTest, APlannedSizeRunsAsItselfWhateverItsTiming) {
  // A noisy timing made 8 look slower than 4 + 4.
  BatchPartition noisy({8, 4}, {10.0, 1.0}, 8);
  EXPECT_EQ(PartsOf(noisy, 8), (Parts{{8, 8}}));
}

ModelConfig Config(const std::string& extra) {
  auto config = ParseModelConfigText(R"(name: "m" backend: "fake" max_batch_size: 8
      input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "R" data_type: TYPE_INT32 dims: [ 6 ] reshape: { shape: [ 2, 3 ] } } ]
      output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ] )" + extra,
                                     "config.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return *config;
}

// Doubles IN row by row; remembers the batch sizes it ran, and counts each new one as prepared.
class DoublingModel final : public Model {
 public:
  explicit DoublingModel(bool prepares = true, int fail_at_size = 0) : prepares_(prepares), fail_at_size_(fail_at_size) {}

  Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) override {
    executed.push_back(batch.batch_size);
    if (batch.batch_size == fail_at_size_) return Status::Internal("out of luck");
    seen_.insert(batch.batch_size);
    const Tensor* in = batch.FindInput("IN");
    if (in == nullptr || in->shape != Shape{batch.batch_size, 2}) return Status::InvalidArgument("bad IN");
    const Tensor* r = batch.FindInput("R");
    if (r == nullptr || r->shape != Shape{batch.batch_size, 2, 3}) return Status::InvalidArgument("bad R");
    MutableBuffer buffer = AllocateBuffer(in->byte_size);
    const auto values = in->values<float>();
    for (size_t i = 0; i < values.size(); ++i) reinterpret_cast<float*>(buffer.get())[i] = 2 * values[i];
    outputs->clear();
    outputs->push_back({"OUT", DataType::kFp32, in->shape, AliasData(buffer.memory, buffer.get()), in->byte_size});
    return Status::Ok();
  }
  bool PreparesPerShape() const override { return prepares_; }
  int64_t PreparedShapes() const override { return static_cast<int64_t>(seen_.size()); }

  std::vector<int64_t> executed;

 private:
  bool prepares_;
  int fail_at_size_;
  std::set<int64_t> seen_;
};

ExecutionBatch Rows(int64_t batch) {
  ExecutionBatch execution;
  execution.batch_size = batch;
  MutableBuffer in = AllocateBuffer(static_cast<size_t>(batch) * 2 * sizeof(float));
  for (int64_t i = 0; i < batch * 2; ++i) reinterpret_cast<float*>(in.get())[i] = static_cast<float>(i + 1);
  execution.inputs.push_back({"IN", DataType::kFp32, {batch, 2}, AliasData(in.memory, in.get()), in.size});
  MutableBuffer r = AllocateBuffer(static_cast<size_t>(batch) * 6 * sizeof(int32_t));
  std::memset(r.get(), 0, r.size);
  execution.inputs.push_back({"R", DataType::kInt32, {batch, 2, 3}, AliasData(r.memory, r.get()), r.size});
  return execution;
}

TEST(PlannedBatchesTest, PreparesLargestFirstThenRunsEveryBatchAsPlannedSizesWithTheRightRows) {
  auto owned = std::make_unique<DoublingModel>();
  DoublingModel* inner = owned.get();
  auto prepared =
      PrepareBatchSizes(std::move(owned), Config(R"(parameters { key: "planned_batch_sizes" value: { string_value: "1,2,4,8" } })"));
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  // Each planned size twice (prepare, then time), largest first.
  EXPECT_EQ(inner->executed, (std::vector<int64_t>{8, 8, 4, 4, 2, 2, 1, 1}));
  EXPECT_EQ((*prepared)->PreparedShapes(), 4);
  for (int64_t batch = 1; batch <= 8; ++batch) {
    inner->executed.clear();
    std::vector<Tensor> outputs;
    ASSERT_TRUE((*prepared)->Execute(Rows(batch), &outputs).ok()) << batch;
    int64_t rows_run = 0;
    for (int64_t size : inner->executed) {
      EXPECT_TRUE(size == 8 || size == 4 || size == 2 || size == 1) << size;
      rows_run += size;
    }
    EXPECT_GE(rows_run, batch);
    ASSERT_EQ(outputs.size(), 1u);
    ASSERT_EQ(outputs[0].shape, (Shape{batch, 2}));
    ASSERT_EQ(outputs[0].byte_size, static_cast<size_t>(batch) * 2 * sizeof(float));
    const auto values = outputs[0].values<float>();
    for (int64_t i = 0; i < batch * 2; ++i) EXPECT_EQ(values[i], 2.0f * static_cast<float>(i + 1)) << batch << " " << i;
  }
  EXPECT_EQ((*prepared)->PreparedShapes(), 4);  // nothing new was prepared while serving
}

TEST(PlannedBatchesTest, ZeroBatchUsesTheReshapedDimsAndZeros) {
  auto batch = ZeroBatch(Config(""), 3);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->batch_size, 3);
  EXPECT_EQ(batch->FindInput("IN")->shape, (Shape{3, 2}));
  EXPECT_EQ(batch->FindInput("R")->shape, (Shape{3, 2, 3}));
  for (float v : batch->FindInput("IN")->values<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(PlannedBatchesTest, LeavesAloneWhatCannotOrNeedNotBePrepared) {
  auto try_prepare = [](std::unique_ptr<DoublingModel> model, const ModelConfig& config) {
    DoublingModel* inner = model.get();
    auto prepared = PrepareBatchSizes(std::move(model), config);
    EXPECT_TRUE(prepared.ok());
    EXPECT_EQ(prepared->get(), inner);  // not wrapped
    return inner->executed.size();
  };
  EXPECT_EQ(try_prepare(std::make_unique<DoublingModel>(false), Config("")), 0u);
  EXPECT_EQ(try_prepare(std::make_unique<DoublingModel>(),
                        Config(R"(parameters { key: "planned_batch_sizes" value: { string_value: "none" } })")),
            0u);
  ModelConfig variable = Config("");
  variable.mutable_input(0)->set_dims(0, -1);
  EXPECT_EQ(try_prepare(std::make_unique<DoublingModel>(), variable), 0u);
  ModelConfig text = Config("");
  text.mutable_input(0)->set_data_type(inference::TYPE_STRING);
  EXPECT_EQ(try_prepare(std::make_unique<DoublingModel>(), text), 0u);
}

TEST(PlannedBatchesTest, AFailedPreparationFailsTheLoadNamingTheSize) {
  auto prepared = PrepareBatchSizes(std::make_unique<DoublingModel>(true, 4), Config(""));
  ASSERT_FALSE(prepared.ok());
  EXPECT_NE(prepared.status().message().find("preparing batch size 4"), std::string::npos) << prepared.status().message();
  EXPECT_NE(prepared.status().message().find("out of luck"), std::string::npos);
}

}  // namespace
}  // namespace inferd
