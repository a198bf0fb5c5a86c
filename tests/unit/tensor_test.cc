#include "common/tensor.h"

#include <gtest/gtest.h>

#include <cstring>

namespace inferd {
namespace {

TEST(DataTypeTest, NamesRoundTrip) {
  for (auto type : {DataType::kBool, DataType::kUint8, DataType::kInt64, DataType::kFp16, DataType::kFp32,
                    DataType::kFp64, DataType::kBytes}) {
    EXPECT_EQ(DataTypeFromName(DataTypeName(type)), type);
  }
  EXPECT_EQ(DataTypeFromName("FLOAT"), DataType::kInvalid);
  EXPECT_EQ(DataTypeSize(DataType::kFp32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kBytes), 0u);
}

TEST(ElementCountTest, RejectsNegativeAndHugeShapes) {
  EXPECT_EQ(*ElementCount(std::vector<int64_t>{2, 3, 4}), 24);
  EXPECT_EQ(*ElementCount(std::vector<int64_t>{}), 1);
  EXPECT_EQ(*ElementCount(std::vector<int64_t>{5, 0}), 0);
  EXPECT_FALSE(ElementCount(std::vector<int64_t>{2, -1}).ok());
  EXPECT_FALSE(ElementCount(std::vector<int64_t>{1LL << 40, 1LL << 40}).ok());
  EXPECT_FALSE(ElementCount(std::vector<int64_t>{100, 100}, 9999).ok());
}

TEST(BytesTest, CountsLengthPrefixedElements) {
  std::string data;
  for (std::string s : {"ab", "", "xyz"}) {
    uint32_t n = static_cast<uint32_t>(s.size());
    data.append(reinterpret_cast<char*>(&n), 4);
    data += s;
  }
  auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  EXPECT_EQ(*CountBytesElements(bytes, data.size()), 3);
  EXPECT_FALSE(CountBytesElements(bytes, data.size() - 1).ok());  // last element truncated
  EXPECT_FALSE(CountBytesElements(bytes, 2).ok());                // truncated length
}

// Kernels' vector loads assume cache-line aligned buffers (the memory plan's arena included).
TEST(AllocateBufferTest, BuffersAreCacheLineAlignedAndWritable) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{5} << 20}) {
    MutableBuffer buffer = AllocateBuffer(size);
    ASSERT_NE(buffer.memory, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.memory.get()) % 64, 0u) << size;
    EXPECT_EQ(buffer.size, size);
    if (size > 0) {
      buffer.memory[0] = 1;
      buffer.memory[size - 1] = 2;  // the last byte is ours (ASan would say otherwise)
    }
  }
}

TEST(HalfTest, ConvertsExactValuesAndRounds) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f}) EXPECT_EQ(HalfToFloat(FloatToHalf(v)), v);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);  // overflow -> inf
  EXPECT_NEAR(HalfToFloat(FloatToHalf(0.1f)), 0.1f, 1e-4);
  EXPECT_EQ(HalfToFloat(0x0001), 5.9604645e-08f);  // smallest subnormal
}

}  // namespace
}  // namespace inferd
