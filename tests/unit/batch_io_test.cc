#include "instances/batch_io.h"

#include <gtest/gtest.h>

#include <cstring>

namespace inferd {
namespace {

Tensor FloatTensor(const std::string& name, Shape shape, std::vector<float> values) {
  auto storage = std::make_shared<std::vector<float>>(std::move(values));
  return {name, DataType::kFp32, std::move(shape), AliasData(storage, storage->data()), storage->size() * 4};
}

Tensor BytesTensor(const std::string& name, const std::vector<std::string>& items) {
  auto storage = std::make_shared<std::string>();
  for (const auto& s : items) {
    uint32_t n = static_cast<uint32_t>(s.size());
    storage->append(reinterpret_cast<char*>(&n), 4);
    *storage += s;
  }
  return {name,
          DataType::kBytes,
          {static_cast<int64_t>(items.size())},
          AliasData(storage, storage->data()),
          storage->size()};
}

PendingRequest WithInputs(std::vector<Tensor> inputs, int64_t batch) {
  PendingRequest pending;
  pending.request = std::make_unique<InferRequest>();
  pending.request->inputs = std::move(inputs);
  pending.batch_size = batch;
  return pending;
}

TEST(BatchIoTest, SingleRequestIsNotCopied) {
  std::vector<PendingRequest> batch;
  batch.push_back(WithInputs({FloatTensor("x", {2, 2}, {1, 2, 3, 4})}, 2));
  const uint8_t* data = batch[0].request->inputs[0].data.get();
  auto execution = AssembleInputs(batch, true);
  ASSERT_TRUE(execution.ok());
  EXPECT_EQ(execution->batch_size, 2);
  EXPECT_EQ(execution->inputs[0].data.get(), data);
}

TEST(BatchIoTest, ConcatenatesAlongDimZeroAndSplitsBack) {
  std::vector<PendingRequest> batch;
  batch.push_back(WithInputs({FloatTensor("x", {1, 2}, {1, 2})}, 1));
  batch.push_back(WithInputs({FloatTensor("x", {2, 2}, {3, 4, 5, 6})}, 2));
  auto execution = AssembleInputs(batch, true);
  ASSERT_TRUE(execution.ok());
  EXPECT_EQ(execution->batch_size, 3);
  EXPECT_EQ(execution->inputs[0].shape, (Shape{3, 2}));
  auto merged = execution->inputs[0].values<float>();
  EXPECT_EQ(std::vector<float>(merged.begin(), merged.end()), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  auto split = SplitOutputs(execution->inputs, {1, 2}, true);
  ASSERT_TRUE(split.ok());
  ASSERT_EQ(split->size(), 2u);
  EXPECT_EQ((*split)[0][0].shape, (Shape{1, 2}));
  EXPECT_EQ((*split)[1][0].shape, (Shape{2, 2}));
  auto second = (*split)[1][0].values<float>();
  EXPECT_EQ(std::vector<float>(second.begin(), second.end()), (std::vector<float>{3, 4, 5, 6}));
}

TEST(BatchIoTest, SplitsBytesByElement) {
  Tensor out = BytesTensor("s", {"a", "bb", "", "dddd"});
  auto split = SplitOutputs({out}, {1, 3}, true);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ((*split)[0][0].byte_size, 5u);
  EXPECT_EQ((*split)[1][0].byte_size, 4u + 2 + 4 + 4 + 4);
  EXPECT_EQ(*CountBytesElements((*split)[1][0].data.get(), (*split)[1][0].byte_size), 3);
}

TEST(BatchIoTest, OutputWithoutBatchDimIsAnError) {
  Tensor out = FloatTensor("y", {2}, {1, 2});
  EXPECT_FALSE(SplitOutputs({out}, {1, 2}, true).ok());
}

}  // namespace
}  // namespace inferd
