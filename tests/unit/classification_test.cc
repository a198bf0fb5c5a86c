#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/classification.h"

namespace inferd {
namespace {

template <typename T>
Tensor Values(DataType dtype, Shape shape, std::vector<T> values) {
  auto storage = std::make_shared<std::vector<T>>(std::move(values));
  return {"scores", dtype, std::move(shape), AliasData(storage, storage->data()), storage->size() * sizeof(T)};
}

std::vector<std::string> Strings(const Tensor& tensor) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at + 4 <= tensor.byte_size) {
    const uint8_t* p = tensor.data.get() + at;
    const uint32_t length = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
    out.emplace_back(reinterpret_cast<const char*>(p + 4), length);
    at += 4 + length;
  }
  return out;
}

TEST(ClassificationTest, TopClassesPerRowHighestFirstTiesByIndex) {
  // Triton's example: [1, 5, 10, 4] ranks index 2, then 1, then 3.
  auto best = TopClasses(Values<float>(DataType::kFp32, {2, 4}, {1, 5, 10, 4, 7, 7, 0, 9}), 2, 3);
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 6u);
  EXPECT_EQ((*best)[0].index, 2);
  EXPECT_EQ((*best)[1].index, 1);
  EXPECT_EQ((*best)[2].index, 3);
  EXPECT_EQ((*best)[3].index, 3);  // 9
  EXPECT_EQ((*best)[4].index, 0);  // 7 at 0 before 7 at 1
  EXPECT_EQ((*best)[5].index, 1);
  // More classes asked for than there are: all of them.
  EXPECT_EQ(TopClasses(Values<int64_t>(DataType::kInt64, {3}, {3, 1, 2}), 1, 10)->size(), 3u);
  EXPECT_FALSE(TopClasses(Values<float>(DataType::kFp32, {3}, {1, 2, 3}), 2, 1).ok());  // 3 does not split in 2
}

TEST(ClassificationTest, AnswersAreValueIndexAndLabelStrings) {
  const std::vector<std::string> labels = {"cat", "dog"};
  auto best = TopClasses(Values<float>(DataType::kFp32, {1, 3}, {0.25f, 0.5f, 0.125f}), 1, 2);
  ASSERT_TRUE(best.ok());
  Tensor answer = ClassificationTensor("scores", *best, 1, /*batched=*/true, &labels);
  EXPECT_EQ(answer.dtype, DataType::kBytes);
  EXPECT_EQ(answer.shape, (Shape{1, 2}));
  EXPECT_EQ(Strings(answer), (std::vector<std::string>{"0.5:1:dog", "0.25:0:cat"}));
  // Index 2 has no label; without batching the shape is [k].
  best = TopClasses(Values<float>(DataType::kFp32, {3}, {0.25f, 0.5f, 1}), 1, 1);
  answer = ClassificationTensor("scores", *best, 1, /*batched=*/false, &labels);
  EXPECT_EQ(answer.shape, (Shape{1}));
  EXPECT_EQ(Strings(answer), std::vector<std::string>{"1:2"});
}

TEST(ClassificationTest, LabelFilesAreOneLabelPerLine) {
  const auto path = std::filesystem::temp_directory_path() / "inferd_labels_test.txt";
  std::ofstream(path) << "cat\r\ndog\n\nbird\n";
  auto labels = ReadLabelFile(path);
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(*labels, (std::vector<std::string>{"cat", "dog", "", "bird"}));
  std::filesystem::remove(path);
  EXPECT_EQ(ReadLabelFile(path).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(TopClasses(BytesTensor("s", {1}, {"x"}), 1, 1).ok());
}

}  // namespace
}  // namespace inferd
