// DFT and STFT (kernels/signal.cc) beyond the conformance tests: inverse after forward gives the
// signal back, a cosine's energy lands in its two bins, onesided keeps the first n/2+1 bins, and
// dft_length zero-pads or truncates.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "runtime/kernels/tensor_util.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;
using Attributes = std::map<std::string, Attribute, std::less<>>;

Tensor Int64Scalar(int64_t value) {
  Tensor t;
  *AllocateOutputAs<int64_t>(&t, DataType::kInt64, {}).value() = value;
  return t;
}

std::vector<float> Values(const Tensor& t) { return {ValuesOf<float>(t), ValuesOf<float>(t) + ElementsOf(t)}; }

// DFT of x ([1, L, 1|2]) along axis 1, with an optional dft_length.
Tensor Dft(const Tensor& x, Attributes attributes, int64_t dft_length = 0) {
  GraphBuilder builder;
  builder.Input("x");
  std::vector<std::string> inputs{"x"};
  if (dft_length > 0) {
    builder.Constant("n", Int64Scalar(dft_length));
    inputs.push_back("n");
  }
  Graph g = builder.Op("DFT", inputs, {"y"}, std::move(attributes)).Output("y").graph();
  if (dft_length > 0) g.values[static_cast<size_t>(*g.FindValue("n"))].dtype = DataType::kInt64;
  auto session = Session::FromGraph(g);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  std::vector<Tensor> outputs;
  Status status = (*session)->Run(std::vector<Tensor>{x}, &outputs);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return outputs[0];
}

TEST(SignalTest, InverseUndoesForward) {
  const Tensor x = Random({1, 12, 2}, 1);
  const Tensor back = Dft(Dft(x, {}), {{"inverse", Int(1)}});
  const std::vector<float> original = Values(x), restored = Values(back);
  ASSERT_EQ(original.size(), restored.size());
  for (size_t i = 0; i < original.size(); ++i) EXPECT_NEAR(restored[i], original[i], 1e-5);
}

TEST(SignalTest, CosineEnergyLandsInItsBinsAndOnesidedKeepsTheFirstHalf) {
  const int64_t n = 16, frequency = 3;
  Tensor x;
  float* values = AllocateOutputAs<float>(&x, DataType::kFp32, {1, n, 1}).value();
  for (int64_t j = 0; j < n; ++j) values[j] = static_cast<float>(std::cos(2 * std::numbers::pi * frequency * j / n));
  const std::vector<float> full = Values(Dft(x, {}));
  for (int64_t k = 0; k < n; ++k) {
    const float expected = (k == frequency || k == n - frequency) ? n / 2.0f : 0.0f;
    EXPECT_NEAR(full[static_cast<size_t>(k * 2)], expected, 1e-4) << "bin " << k;
    EXPECT_NEAR(full[static_cast<size_t>(k * 2 + 1)], 0.0f, 1e-4) << "bin " << k;
  }
  const Tensor half = Dft(x, {{"onesided", Int(1)}});
  EXPECT_EQ(half.shape, (Shape{1, n / 2 + 1, 2}));
  const std::vector<float> half_values = Values(half);
  for (size_t i = 0; i < half_values.size(); ++i) EXPECT_NEAR(half_values[i], full[i], 1e-5);
}

TEST(SignalTest, DftLengthZeroPadsAndTruncates) {
  const Tensor x = Random({1, 6, 1}, 2);
  Tensor padded_input;
  float* padded = AllocateOutputAs<float>(&padded_input, DataType::kFp32, {1, 10, 1}).value();
  std::fill(padded, padded + 10, 0.0f);
  std::copy(ValuesOf<float>(x), ValuesOf<float>(x) + 6, padded);
  const std::vector<float> longer = Values(Dft(x, {}, 10)), reference = Values(Dft(padded_input, {}));
  ASSERT_EQ(longer.size(), reference.size());
  for (size_t i = 0; i < longer.size(); ++i) EXPECT_NEAR(longer[i], reference[i], 1e-5);
  Tensor truncated_input;
  float* truncated = AllocateOutputAs<float>(&truncated_input, DataType::kFp32, {1, 4, 1}).value();
  std::copy(ValuesOf<float>(x), ValuesOf<float>(x) + 4, truncated);
  const std::vector<float> shorter = Values(Dft(x, {}, 4)), expected = Values(Dft(truncated_input, {}));
  for (size_t i = 0; i < shorter.size(); ++i) EXPECT_NEAR(shorter[i], expected[i], 1e-5);
}

}  // namespace
}  // namespace inferd::runtime
