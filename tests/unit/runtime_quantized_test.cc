// Quantized integer ops (kernels/quantized_linear.cc) on what the conformance tests do not reach:
// per-row / per-column zero points and scales, rounding ties to even, saturation, INT8 outputs,
// per-output-channel QLinearConv weights, and bad zero points.
#include <gtest/gtest.h>

#include "runtime/kernels/tensor_util.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;

template <typename T>
Tensor Make(DataType dtype, Shape shape, std::vector<T> values) {
  Tensor t;
  T* data = AllocateOutputAs<T>(&t, dtype, shape).value();
  std::copy(values.begin(), values.end(), data);
  return t;
}

Tensor U8(Shape shape, std::vector<uint8_t> v) { return Make<uint8_t>(DataType::kUint8, std::move(shape), std::move(v)); }
Tensor I8(Shape shape, std::vector<int8_t> v) { return Make<int8_t>(DataType::kInt8, std::move(shape), std::move(v)); }
Tensor F32(Shape shape, std::vector<float> v) { return Make<float>(DataType::kFp32, std::move(shape), std::move(v)); }

// One node on constant inputs; returns its output.
StatusOr<Tensor> RunOne(const std::string& op, std::vector<Tensor> inputs, std::map<std::string, Attribute, std::less<>> attributes = {}) {
  GraphBuilder builder;
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i) {
    names.push_back("in" + std::to_string(i));
    builder.Constant(names.back(), inputs[i]);
  }
  Graph g = builder.Op(op, names, {"y"}, std::move(attributes)).Output("y").graph();
  for (size_t i = 0; i < inputs.size(); ++i) g.values[static_cast<size_t>(*g.FindValue(names[i]))].dtype = inputs[i].dtype;
  SessionOptions options;
  options.optimize = false;  // keep the node (constant folding would run it at load)
  ASSIGN_OR_RETURN(auto session, Session::FromGraph(g, options));
  std::vector<Tensor> outputs;
  RETURN_IF_ERROR(session->Run({}, &outputs));
  return outputs[0];
}

TEST(QuantizedTest, MatMulIntegerZeroPointsPerRowAndPerColumn) {
  // A [2x2] with row zero points {1, 2}; B [2x2] with column zero points {3, 4}.
  auto y = RunOne("MatMulInteger", {U8({2, 2}, {1, 2, 3, 4}), U8({2, 2}, {3, 5, 7, 9}), U8({2}, {1, 2}), U8({2}, {3, 4})});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  // A - za = [[0,1],[1,2]]; B - zb = [[0,1],[4,5]]
  const int32_t* v = ValuesOf<int32_t>(*y);
  EXPECT_EQ(y->dtype, DataType::kInt32);
  EXPECT_EQ(std::vector<int32_t>(v, v + 4), (std::vector<int32_t>{4, 5, 8, 11}));
}

TEST(QuantizedTest, QLinearMatMulRoundsTiesToEvenAndSaturates) {
  // a = [1, 3] (zp 0, scale 1), b = [[1, 100]] per-column scales {0.5, 1}: acc = [[0.5, 100], [1.5, 300]]
  // with y_scale 1, y_zp 0: 0.5 -> 0, 1.5 -> 2 (ties to even), 300 -> 255 (saturated).
  auto y = RunOne("QLinearMatMul", {U8({2, 1}, {1, 3}), F32({}, {1}), U8({}, {0}), U8({1, 2}, {1, 100}), F32({2}, {0.5f, 1}),
                                    U8({2}, {0, 0}), F32({}, {1}), U8({}, {0})});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  const uint8_t* v = ValuesOf<uint8_t>(*y);
  EXPECT_EQ(std::vector<int>(v, v + 4), (std::vector<int>{0, 100, 2, 255}));
  // INT8 output saturates at -128.
  auto negative = RunOne("QLinearMatMul", {I8({1, 1}, {-100}), F32({}, {1}), I8({}, {0}), I8({1, 1}, {100}), F32({}, {1}),
                                           I8({}, {0}), F32({}, {1}), I8({}, {5})});
  ASSERT_TRUE(negative.ok()) << negative.status().ToString();
  EXPECT_EQ(ValuesOf<int8_t>(*negative)[0], -128);
}

TEST(QuantizedTest, QLinearConvWeightsPerOutputChannel) {
  // 1x1 convolution, one input channel, two filters with their own scale and zero point.
  auto y = RunOne("QLinearConv", {U8({1, 1, 1, 2}, {10, 20}), F32({}, {0.5f}), U8({}, {0}), U8({2, 1, 1, 1}, {3, 7}),
                                  F32({2}, {1, 2}), U8({2}, {1, 5}), F32({}, {1}), U8({}, {0}),
                                  Make<int32_t>(DataType::kInt32, {2}, {1, -2})});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  // filter 0: (x * (3 - 1) + 1) * 0.5 * 1 = [10.5, 20.5] -> [10, 20] (ties to even)
  // filter 1: (x * (7 - 5) - 2) * 0.5 * 2 = [18, 38]
  const uint8_t* v = ValuesOf<uint8_t>(*y);
  EXPECT_EQ(std::vector<int>(v, v + 4), (std::vector<int>{10, 20, 18, 38}));
}

TEST(QuantizedTest, ZeroPointOfTheWrongTypeIsAnError) {
  auto y = RunOne("MatMulInteger", {U8({1, 1}, {1}), U8({1, 1}, {1}), I8({}, {0})});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("a_zero_point must have its tensor's type"), std::string::npos) << y.status().message();
}

}  // namespace
}  // namespace inferd::runtime
