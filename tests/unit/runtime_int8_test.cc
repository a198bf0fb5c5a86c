// INT8: the calibration's range choices, and QDQ convolutions fused into oneDNN int8 kernels that
// compute what the QDQ graph says (run literally on the reference kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/quantization/range_calibrator.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;

TEST(CalibrationTest, MethodNamesAreParsedStrictly) {
  EXPECT_EQ(ParseCalibrationMethod("entropy").value(), CalibrationMethod::kEntropy);
  EXPECT_EQ(ParseCalibrationMethod("percentile").value(), CalibrationMethod::kPercentile);
  EXPECT_EQ(ParseCalibrationMethod("minmax").value(), CalibrationMethod::kMinMax);
  EXPECT_FALSE(ParseCalibrationMethod("kl").ok());
  EXPECT_FALSE(ParseCalibrationMethod("MinMax").ok());
}

TEST(CalibrationTest, MinMaxKeepsEverythingAndSignIsSeen) {
  RangeCollector range;
  const std::vector<float> values{-3.f, 1.f, 2.f, NAN};
  range.Add(values);
  EXPECT_FLOAT_EQ(range.Threshold(CalibrationMethod::kMinMax, 127), 3.f);
  EXPECT_FALSE(range.never_negative());
  RangeCollector relu;
  relu.Add(std::vector<float>{0.f, 0.5f, 4.f});
  EXPECT_TRUE(relu.never_negative());
  EXPECT_FLOAT_EQ(relu.Threshold(CalibrationMethod::kMinMax, 255), 4.f);
}

// 10,000 values in [0, 1) and one outlier at 1000: minmax keeps the outlier, the others do not.
// Entropy's cut cannot go below its quantised levels (256 of the 2048 bins: 125 here), which is
// why a lone extreme outlier is percentile's case.
TEST(CalibrationTest, PercentileAndEntropyClipARareOutlier) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(0, 1);
  std::vector<float> values(10000);
  for (float& v : values) v = uniform(rng);
  values[123] = 1000.f;
  RangeCollector range;
  range.Add(values);
  EXPECT_FLOAT_EQ(range.Threshold(CalibrationMethod::kMinMax, 255), 1000.f);
  const float percentile = range.Threshold(CalibrationMethod::kPercentile, 255, 99.9);
  EXPECT_GT(percentile, 0.9f);
  EXPECT_LT(percentile, 2.f);
  const float entropy = range.Threshold(CalibrationMethod::kEntropy, 255);
  EXPECT_LT(entropy, 0.2f * 1000.f);
  EXPECT_GT(entropy, 0.5f);
}

// A Gaussian with a few far outliers: entropy cuts near the Gaussian's own extent, far below them.
TEST(CalibrationTest, EntropyOnAGaussianIgnoresFarOutliers) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 1);
  RangeCollector range;
  for (int batch = 0; batch < 4; ++batch) {
    std::vector<float> values(50000);
    for (float& v : values) v = normal(rng);
    values[batch] = batch % 2 ? 50.f : -50.f;
    range.Add(values);
  }
  EXPECT_FLOAT_EQ(range.Threshold(CalibrationMethod::kMinMax, 127), 50.f);
  const float entropy = range.Threshold(CalibrationMethod::kEntropy, 127);
  EXPECT_GT(entropy, 2.f);
  EXPECT_LT(entropy, 10.f);
}

// A later batch with a wider range re-bins the earlier counts instead of losing them.
TEST(CalibrationTest, AWiderBatchKeepsTheEarlierCounts) {
  RangeCollector range;
  range.Add(std::vector<float>(1000, 0.5f));
  range.Add(std::vector<float>(1000, 99.f));
  EXPECT_LT(range.Threshold(CalibrationMethod::kPercentile, 255, 40), 1.f);  // 40% of the mass is at 0.5
  EXPECT_GT(range.Threshold(CalibrationMethod::kPercentile, 255, 60), 98.f);
}

// Random int8 weights over the whole range, or (`exact_everywhere`) only those whose products are
// exact on this CPU. With VNNI that is every int8 value. Without it (Int8PairsSaturate) oneDNN
// adds two u8 x s8 products in int16 and halves a signed input's weights, and our kernels halve
// weights beyond +-64 (dnnl_context.h): 7-bit weights by design, as ONNX Runtime's reduce_range,
// whose rounding and saturation the fusion tests below do not measure. There, even weights
// within +-64 halve exactly and never saturate, so the fusions must still match their QDQ graph
// to the fp32 additions' order; ProductsThatWouldSaturate... bounds the full range's error.
Tensor Int8(const Shape& shape, uint32_t seed, bool exact_everywhere = true) {
  Tensor t;
  int8_t* data = AllocateOutputAs<int8_t>(&t, DataType::kInt8, shape).value();
  std::mt19937 rng(seed);
  const bool seven_bit = exact_everywhere && dnnl_kernels::Int8PairsSaturate();
  std::uniform_int_distribution<int> dist(seven_bit ? -32 : -127, seven_bit ? 32 : 127);
  for (int64_t i = 0; i < ElementsOf(t); ++i) data[i] = static_cast<int8_t>(dist(rng) * (seven_bit ? 2 : 1));
  return t;
}

template <typename T>
Tensor Filled(DataType type, const Shape& shape, std::vector<T> values) {
  Tensor t;
  T* data = AllocateOutputAs<T>(&t, type, shape).value();
  std::copy(values.begin(), values.end(), data);
  return t;
}

Tensor Scalar(float v) { return Filled<float>(DataType::kFp32, {}, {v}); }

// Adds x_name -> QuantizeLinear -> DequantizeLinear -> x_name + "_dq" with scale `scale` and a
// zero point of `zero_point` (uint8, or int8 when `is_signed`).
void QuantizeDequantize(GraphBuilder& b, const std::string& x, float scale, bool is_signed, int zero_point = 0) {
  b.Constant(x + "_s", Scalar(scale));
  b.Constant(x + "_z", is_signed ? Filled<int8_t>(DataType::kInt8, {}, {static_cast<int8_t>(zero_point)})
                                 : Filled<uint8_t>(DataType::kUint8, {}, {static_cast<uint8_t>(zero_point)}));
  b.Op("QuantizeLinear", {x, x + "_s", x + "_z"}, {x + "_q"});
  b.Op("DequantizeLinear", {x + "_q", x + "_s", x + "_z"}, {x + "_dq"});
}

// Weight scales, a few distinct values.
std::vector<float> ChannelScales(size_t channels) {
  std::vector<float> scales(channels);
  for (size_t c = 0; c < channels; ++c) scales[c] = 0.002f + 0.0005f * static_cast<float>(c % 5);
  return scales;
}

// A weight `w` as int8 through DequantizeLinear (per channel of `axis` when `per_channel`), with
// a per-tensor zero point when `zero_point` is not 0 (asymmetric weights).
void Weight(GraphBuilder& b, const std::string& w, const Shape& shape, bool per_channel, uint32_t seed, int axis = 0,
            int zero_point = 0, bool exact_everywhere = true) {
  b.Constant(w + "_q", Int8(shape, seed, exact_everywhere));
  const int64_t channels = shape[static_cast<size_t>(axis)];
  const std::vector<float> scales = ChannelScales(per_channel ? static_cast<size_t>(channels) : 1);
  b.Constant(w + "_s", per_channel ? Filled<float>(DataType::kFp32, {channels}, scales) : Scalar(scales[0]));
  if (zero_point == 0) {
    b.Op("DequantizeLinear", {w + "_q", w + "_s"}, {w}, {{"axis", Int(axis)}});
  } else {
    b.Constant(w + "_z", Filled<int8_t>(DataType::kInt8, {}, {static_cast<int8_t>(zero_point)}));
    b.Op("DequantizeLinear", {w + "_q", w + "_s", w + "_z"}, {w}, {{"axis", Int(axis)}});
  }
}

// x (signed) -> Conv 3x3 16->32 + fp32 bias, Relu -> Conv 1x1 32->32 + int32 bias -> + a1 (residual)
// -> Conv 3x3 stride 2 32->8 -> y: every activation and weight through QDQ.
Graph QdqConvolutions(int first_weight_zero_point = 0) {
  GraphBuilder b;
  b.Input("x");
  QuantizeDequantize(b, "x", 1.f / 127, /*is_signed=*/true);
  Weight(b, "w1", {32, 16, 3, 3}, false, 1, 0, first_weight_zero_point);
  b.Constant("b1", Random({32}, 2, -0.2f, 0.2f));
  b.Op("Conv", {"x_dq", "w1", "b1"}, {"c1"}, {{"pads", Ints({1, 1, 1, 1})}}).Op("Relu", {"c1"}, {"a1"});
  QuantizeDequantize(b, "a1", 0.004f, false);
  Weight(b, "w2", {32, 32, 1, 1}, false, 3);
  b.Constant("b2_q", Filled<int32_t>(DataType::kInt32, {32}, std::vector<int32_t>(32, 700)));
  b.Constant("b2_s", Scalar(0.004f * 0.002f));
  b.Op("DequantizeLinear", {"b2_q", "b2_s"}, {"b2"});
  b.Op("Conv", {"a1_dq", "w2", "b2"}, {"c2"}).Op("Add", {"c2", "a1"}, {"r"});
  QuantizeDequantize(b, "r", 0.006f, false);
  Weight(b, "w3", {8, 32, 3, 3}, true, 4);
  b.Op("Conv", {"r_dq", "w3"}, {"y"}, {{"pads", Ints({1, 1, 1, 1})}, {"strides", Ints({2, 2})}}).Output("y");
  return b.graph();
}

// Activation quantisation: our quantiser's (zero points 0, int8 where negative) or ONNX
// Runtime's (uint8 with a zero point wherever the range dips below 0).
struct ActivationZeroPoints {
  bool x_signed = true;
  int x = 0, h1 = 0;
  int r = 0;  // QdqProducts' Gemm input (after a Relu: ONNX Runtime would write 0; any value must work)
};
constexpr ActivationZeroPoints kSymmetric{};
constexpr ActivationZeroPoints kAsymmetricUint8{.x_signed = false, .x = 128, .h1 = 40, .r = 12};

// x -> Conv 3x3 + HardSwish -> Conv 1x1 + Relu -> Conv 3x3 -> y, each Conv the only reader of the
// one before: the first two write their outputs quantised (after HardSwish, which dips below
// zero, int8, or uint8 with a zero point; uint8 after Relu) for the next.
Graph QdqChain(const ActivationZeroPoints& zero_points = kSymmetric) {
  GraphBuilder b;
  b.Input("x");
  QuantizeDequantize(b, "x", 1.f / 127, zero_points.x_signed, zero_points.x);
  Weight(b, "w1", {32, 16, 3, 3}, true, 11);
  b.Op("Conv", {"x_dq", "w1"}, {"c1"}, {{"pads", Ints({1, 1, 1, 1})}}).Op("HardSwish", {"c1"}, {"h1"});
  QuantizeDequantize(b, "h1", 0.003f, /*is_signed=*/zero_points.h1 == 0, zero_points.h1);
  Weight(b, "w2", {32, 32, 1, 1}, true, 12);
  b.Op("Conv", {"h1_dq", "w2"}, {"c2"}).Op("Relu", {"c2"}, {"a2"});
  QuantizeDequantize(b, "a2", 0.0005f, /*is_signed=*/false);
  Weight(b, "w3", {8, 32, 3, 3}, true, 13);
  b.Op("Conv", {"a2_dq", "w3"}, {"y"}, {{"pads", Ints({1, 1, 1, 1})}}).Output("y");
  return b.graph();
}

// x [6, 32] -> MatMul (B [32, 16], per column) -> Relu -> Gemm (transB, B [8, 16] per row, C) -> y.
Graph QdqProducts(const ActivationZeroPoints& zero_points = kSymmetric) {
  GraphBuilder b;
  b.Input("x");
  QuantizeDequantize(b, "x", 1.f / 127, zero_points.x_signed, zero_points.x);
  Weight(b, "w1", {32, 16}, true, 21, /*axis=*/1);
  b.Op("MatMul", {"x_dq", "w1"}, {"m"}).Op("Relu", {"m"}, {"r"});
  QuantizeDequantize(b, "r", 0.0004f, /*is_signed=*/false, zero_points.r);
  Weight(b, "w2", {8, 16}, true, 22, /*axis=*/0);
  b.Constant("c", Random({8}, 23, -0.05f, 0.05f));
  b.Op("Gemm", {"r_dq", "w2", "c"}, {"y"}, {{"transB", Int(1)}}).Output("y");
  return b.graph();
}

// x -> QuantizeLinear (uint8, zero point 128) -> x_q, with x_s and x_z for the first op.
void QuantizeInputForQOperators(GraphBuilder& b) {
  b.Constant("x_s", Scalar(1.f / 127)).Constant("x_z", Filled<uint8_t>(DataType::kUint8, {}, {128}));
  b.Op("QuantizeLinear", {"x", "x_s", "x_z"}, {"x_q"});
}

// A QOperator op's int8 weights `w` with `w_s` (per channel of dim `channel_dim`, or per tensor
// when it is -1) and zero points `w_z` of 0.
void QOperatorWeights(GraphBuilder& b, const std::string& w, const Shape& shape, int channel_dim, uint32_t seed) {
  b.Constant(w, Int8(shape, seed));
  if (channel_dim < 0) {
    b.Constant(w + "_s", Scalar(0.003f)).Constant(w + "_z", Filled<int8_t>(DataType::kInt8, {}, {0}));
    return;
  }
  const int64_t channels = shape[static_cast<size_t>(channel_dim)];
  b.Constant(w + "_s", Filled<float>(DataType::kFp32, {channels}, ChannelScales(static_cast<size_t>(channels))));
  b.Constant(w + "_z", Filled<int8_t>(DataType::kInt8, {channels}, std::vector<int8_t>(static_cast<size_t>(channels), 0)));
}

// QOperator form (what ONNX Runtime's quantiser writes with QuantFormat.QOperator): x ->
// QuantizeLinear (uint8, zero point 128) -> QLinearConv 3x3 (per-channel weights, int32 bias;
// output uint8 with zero point 40) -> MaxPool 2x2 on the uint8 values -> QLinearConv 1x1
// (per-tensor weights; int8 output) -> DequantizeLinear -> y.
Graph QLinearConvolutions() {
  GraphBuilder b;
  b.Input("x");
  QuantizeInputForQOperators(b);
  QOperatorWeights(b, "w1", {32, 16, 3, 3}, 0, 31);
  b.Constant("y1_s", Scalar(0.004f)).Constant("y1_z", Filled<uint8_t>(DataType::kUint8, {}, {40}));
  std::vector<int32_t> bias(32);
  for (size_t c = 0; c < bias.size(); ++c) bias[c] = static_cast<int32_t>(c * 37) - 500;
  b.Constant("b1", Filled<int32_t>(DataType::kInt32, {32}, bias));
  b.Op("QLinearConv", {"x_q", "x_s", "x_z", "w1", "w1_s", "w1_z", "y1_s", "y1_z", "b1"}, {"y1"},
       {{"pads", Ints({1, 1, 1, 1})}});
  QOperatorWeights(b, "w2", {8, 32, 1, 1}, -1, 32);
  b.Constant("y2_s", Scalar(0.002f)).Constant("y2_z", Filled<int8_t>(DataType::kInt8, {}, {0}));
  b.Op("MaxPool", {"y1"}, {"p1"}, {{"kernel_shape", Ints({2, 2})}, {"strides", Ints({2, 2})}});
  b.Op("QLinearConv", {"p1", "y1_s", "y1_z", "w2", "w2_s", "w2_z", "y2_s", "y2_z"}, {"y2"});
  b.Op("DequantizeLinear", {"y2", "y2_s", "y2_z"}, {"y"}).Output("y");
  return b.graph();
}

// QOperator products: x [6, 32] -> QuantizeLinear (uint8, zero point 128) -> QLinearMatMul (B
// [32, 16] per column; uint8 output, zero point 100) -> QLinearMatMul (B [16, 8] per tensor; int8
// output) -> DequantizeLinear -> y.
Graph QLinearProducts() {
  GraphBuilder b;
  b.Input("x");
  QuantizeInputForQOperators(b);
  QOperatorWeights(b, "b1", {32, 16}, 1, 41);
  b.Constant("y1_s", Scalar(0.002f)).Constant("y1_z", Filled<uint8_t>(DataType::kUint8, {}, {100}));
  b.Op("QLinearMatMul", {"x_q", "x_s", "x_z", "b1", "b1_s", "b1_z", "y1_s", "y1_z"}, {"y1"});
  QOperatorWeights(b, "b2", {16, 8}, -1, 42);
  b.Constant("y2_s", Scalar(0.0005f)).Constant("y2_z", Filled<int8_t>(DataType::kInt8, {}, {0}));
  b.Op("QLinearMatMul", {"y1", "y1_s", "y1_z", "b2", "b2_s", "b2_z", "y2_s", "y2_z"}, {"y2"});
  b.Op("DequantizeLinear", {"y2", "y2_s", "y2_z"}, {"y"}).Output("y");
  return b.graph();
}

// ONNX Runtime's dynamic quantisation: x [6, 32] -> DynamicQuantizeLinear, read by two products
// (as Q, K and V read one x): MatMulInteger (B [32, 16], per-column scales, a B zero point of 0)
// -> Cast -> Mul(., x_scale * B_scale), and the same with B [32, 16] per tensor, no B zero point
// and the Muls' operands the other way round; y = their sum.
Graph DynamicQuantizedProducts() {
  GraphBuilder b;
  b.Input("x");
  b.Op("DynamicQuantizeLinear", {"x"}, {"x_q", "x_s", "x_z"});
  QOperatorWeights(b, "b1", {32, 16}, 1, 51);
  b.Op("MatMulInteger", {"x_q", "b1", "x_z", "b1_z"}, {"p1"}).Op("Cast", {"p1"}, {"f1"}, {{"to", Int(1)}});
  b.Op("Mul", {"x_s", "b1_s"}, {"s1"}).Op("Mul", {"f1", "s1"}, {"y1"});
  QOperatorWeights(b, "b2", {32, 16}, -1, 52);
  b.Op("MatMulInteger", {"x_q", "b2", "x_z"}, {"p2"}).Op("Cast", {"p2"}, {"f2"}, {{"to", Int(1)}});
  b.Op("Mul", {"b2_s", "x_s"}, {"s2"}).Op("Mul", {"s2", "f2"}, {"y2"});
  b.Op("Add", {"y1", "y2"}, {"y"}).Output("y");
  return b.graph();
}

struct Outputs {
  Tensor fused, reference;
  std::vector<std::string> conv_implementations;
  int fusions = 0;
  int requantized = 0;
};

Outputs RunBothWays(const Graph& graph, const Shape& x_shape = {2, 16, 10, 10}) {
  const Tensor x = Random(x_shape, 5);
  Outputs result;
  auto fused = Session::FromGraph(graph, {.tune = TuneMode::kOff});
  EXPECT_TRUE(fused.ok()) << fused.status().ToString();
  auto reference = Session::FromGraph(graph, {.registry = &KernelRegistry::Reference(), .optimize = false});
  EXPECT_TRUE(reference.ok()) << reference.status().ToString();
  if (!fused.ok() || !reference.ok()) return result;
  std::vector<Tensor> inputs{x}, out_fused, out_reference;
  Status run = (*fused)->Run(inputs, &out_fused);
  EXPECT_TRUE(run.ok()) << run.ToString();
  EXPECT_TRUE((*reference)->Run(inputs, &out_reference).ok());
  if (out_fused.empty() || out_reference.empty()) return result;
  result.fused = out_fused[0];
  result.reference = out_reference[0];
  const Graph& optimized = (*fused)->graph();
  for (size_t i = 0; i < optimized.nodes.size(); ++i) {
    const std::string& op = optimized.nodes[i].op_type;
    if (op == "Conv" || op == "MatMul" || op == "Gemm") result.conv_implementations.push_back((*fused)->kernel(i).Implementation());
  }
  for (const auto& [pass, count] : (*fused)->optimization().rewrites) {
    if (pass == "fuse_qdq_conv" || pass == "fuse_qdq_matmul" || pass == "fuse_qlinear_conv" ||
        pass == "fuse_dynamic_quantized_matmul") {
      result.fusions += count;
    }
    if (pass == "fuse_int8_requantize") result.requantized = count;
  }
  return result;
}

// The largest difference, in units of the reference's largest magnitude.
float RelativeError(const Tensor& actual, const Tensor& expected) {
  float diff = 0, scale = 0;
  for (int64_t i = 0; i < ElementsOf(expected); ++i) {
    diff = std::max(diff, std::fabs(actual.values<float>()[i] - expected.values<float>()[i]));
    scale = std::max(scale, std::fabs(expected.values<float>()[i]));
  }
  return diff / scale;
}

// Every product of `out` ran in int8 (`count` of them), and the result is the reference's up to
// the order of fp32 additions, which may move a value across a rounding boundary of the next
// quantisation: one step of that layer's scale, not more.
void ExpectInt8AndClose(const Outputs& out, size_t count) {
  ASSERT_EQ(out.conv_implementations.size(), count);
  for (const std::string& implementation : out.conv_implementations) {
    EXPECT_NE(implementation.find("(int8)"), std::string::npos) << implementation;
  }
  EXPECT_LT(RelativeError(out.fused, out.reference), 0.01f);
}

// An image's few planar channels as the first layer's input (grey, RGB, RGBA): quantised into the
// int8 kernels' NHWC by our store (simd/channels_last_quantize.h) in place of oneDNN's reorder.
Graph QdqStem(int64_t channels, const ActivationZeroPoints& zero_points) {
  GraphBuilder b;
  b.Input("x");
  QuantizeDequantize(b, "x", 1.f / 127, zero_points.x_signed, zero_points.x);
  Weight(b, "w1", {16, channels, 3, 3}, true, 71);
  b.Op("Conv", {"x_dq", "w1"}, {"c1"}, {{"pads", Ints({1, 1, 1, 1})}, {"strides", Ints({2, 2})}})
      .Op("HardSwish", {"c1"}, {"h1"});
  QuantizeDequantize(b, "h1", 0.003f, /*is_signed=*/true);
  Weight(b, "w2", {8, 16, 1, 1}, true, 72);
  b.Op("Conv", {"h1_dq", "w2"}, {"y"}).Output("y");
  return b.graph();
}

TEST(Int8Test, AnImagesFewChannelsGoToChannelsLastAsTheQdqGraphQuantisesThem) {
  for (int64_t channels : {1, 3, 4}) {
    for (const ActivationZeroPoints& zero_points : {kSymmetric, kAsymmetricUint8}) {
      SCOPED_TRACE(std::to_string(channels) + " channels, zero point " + std::to_string(zero_points.x));
      ExpectInt8AndClose(RunBothWays(QdqStem(channels, zero_points), {2, channels, 17, 19}), 2);
    }
  }
}

TEST(Int8Test, FusedQdqConvolutionsRunInInt8AndMatchTheQdqGraph) {
  const Outputs out = RunBothWays(QdqConvolutions());
  ASSERT_EQ(out.fused.shape, (Shape{2, 8, 5, 5}));
  EXPECT_EQ(out.fusions, 3);
  EXPECT_EQ(out.requantized, 0);  // each output has an fp32 reader too (the residual), or a residual Add
  ExpectInt8AndClose(out, 3);
}

TEST(Int8Test, ConvolutionsWriteTheirOutputsQuantisedForTheNextOne) {
  const Outputs out = RunBothWays(QdqChain());
  ASSERT_EQ(out.fused.shape, (Shape{2, 8, 10, 10}));
  EXPECT_EQ(out.fusions, 3);
  EXPECT_EQ(out.requantized, 2);
  EXPECT_LT(RelativeError(out.fused, out.reference), 0.01f);
}

TEST(Int8Test, FusedQdqMatMulAndGemmRunInInt8AndMatchTheQdqGraph) {
  const Outputs out = RunBothWays(QdqProducts(), {6, 32});
  ASSERT_EQ(out.fused.shape, (Shape{6, 8}));
  EXPECT_EQ(out.fusions, 2);
  ExpectInt8AndClose(out, 2);
}

// An int8 product has two candidates, timed against each other when tuning is on (untuned: the
// 1x1 convolution for few rows, as in fp32, and oneDNN's GEMM for many): both match the QDQ graph,
// with int8 and uint8 inputs, with and without zero points.
TEST(Int8Test, ProductsMatchTheQdqGraphOnTheGemmAndAsA1x1Convolution) {
  for (const ActivationZeroPoints& zero_points : {kSymmetric, kAsymmetricUint8}) {
    for (int64_t rows : {6, 300}) {
      const Outputs out = RunBothWays(QdqProducts(zero_points), {rows, 32});
      ASSERT_EQ(out.fused.shape, (Shape{rows, 8}));
      ExpectInt8AndClose(out, 2);
      for (const std::string& implementation : out.conv_implementations) {
        EXPECT_EQ(implementation.find("as 1x1 conv") != std::string::npos, rows <= 256) << implementation;
      }
    }
  }
}

// x -> Conv 3x3 -> Swish (x * Sigmoid(x)) -> Conv 1x1 -> y: the first writes its output quantised
// for the second through our Swish-and-quantise pass (oneDNN's swish post-op is several times
// slower on AVX2), in int8 where Swish dips below 0, or in uint8 with a zero point.
Graph QdqSwishChain(bool is_signed) {
  GraphBuilder b;
  b.Input("x");
  QuantizeDequantize(b, "x", 1.f / 127, /*is_signed=*/true);
  Weight(b, "w1", {32, 16, 3, 3}, true, 41);
  b.Op("Conv", {"x_dq", "w1"}, {"c1"}, {{"pads", Ints({1, 1, 1, 1})}});
  b.Op("Sigmoid", {"c1"}, {"sig"}).Op("Mul", {"c1", "sig"}, {"h1"});
  QuantizeDequantize(b, "h1", 0.002f, is_signed, is_signed ? 0 : 30);
  Weight(b, "w2", {8, 32, 1, 1}, true, 42);
  b.Op("Conv", {"h1_dq", "w2"}, {"y"}).Output("y");
  return b.graph();
}

TEST(Int8Test, ASwishBeforeARequantisedOutputRunsAsOurPassAndMatchesTheQdqGraph) {
  for (bool is_signed : {true, false}) {
    const Outputs out = RunBothWays(QdqSwishChain(is_signed));
    ASSERT_EQ(out.fused.shape, (Shape{2, 8, 10, 10}));
    EXPECT_EQ(out.requantized, 1);
    ExpectInt8AndClose(out, 2);
    EXPECT_NE(out.conv_implementations[0].find("+ swish_quantize"), std::string::npos) << out.conv_implementations[0];
  }
}

// x -> Conv 1x1 16->32 + HardSwish -> depthwise 3x3 (32 groups) + `activation` -> Conv 1x1 32->8
// -> y: the depthwise layer reads its input quantised by the first (int8: HardSwish dips below 0)
// and writes its output quantised for the last, both NHWC: our int8 depthwise kernel applies.
Graph QdqDepthwiseChain(const std::string& activation) {
  GraphBuilder b;
  b.Input("x");
  QuantizeDequantize(b, "x", 1.f / 127, /*is_signed=*/true);
  Weight(b, "w1", {32, 16, 1, 1}, true, 51);
  b.Op("Conv", {"x_dq", "w1"}, {"c1"}).Op("HardSwish", {"c1"}, {"h1"});
  QuantizeDequantize(b, "h1", 0.004f, /*is_signed=*/true);
  Weight(b, "w2", {32, 1, 3, 3}, true, 52);
  b.Constant("b2", Random({32}, 53, -0.2f, 0.2f));
  b.Op("Conv", {"h1_dq", "w2", "b2"}, {"c2"}, {{"pads", Ints({1, 1, 1, 1})}, {"group", Int(32)}});
  if (activation == "Swish") {
    b.Op("Sigmoid", {"c2"}, {"sig"}).Op("Mul", {"c2", "sig"}, {"a2"});
  } else {
    b.Op(activation, {"c2"}, {"a2"});
  }
  QuantizeDequantize(b, "a2", 0.002f, /*is_signed=*/activation != "Relu");
  Weight(b, "w3", {8, 32, 1, 1}, true, 54);
  b.Op("Conv", {"a2_dq", "w3"}, {"y"}).Output("y");
  return b.graph();
}

// Each way to run the int8 depthwise layer, forced through the tuning cache (our kernel is choice
// 0 where it applies, oneDNN's after), matches the QDQ graph.
TEST(Int8Test, DepthwiseLayersMatchTheQdqGraphOnOurKernelAndOnOneDnns) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("inferd_int8_dw_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);  // a directory left by a dead process of the same pid
  std::filesystem::create_directories(dir);
  const std::vector<Tensor> inputs{Random({2, 16, 9, 11}, 55)};
  for (const std::string activation : {"Relu", "HardSwish", "Swish"}) {
    const Graph graph = QdqDepthwiseChain(activation);
    auto reference = Session::FromGraph(graph, {.registry = &KernelRegistry::Reference(), .optimize = false});
    ASSERT_TRUE(reference.ok());
    std::vector<Tensor> expected;
    ASSERT_TRUE((*reference)->Run(inputs, &expected).ok());
    const std::filesystem::path cache = dir / (activation + ".tuning");
    {  // timed once: the cache then names the layer's candidates
      auto tuned = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = cache, .persist_tuning = true, .intra_op_threads = 2});
      ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
      std::vector<Tensor> out;
      ASSERT_TRUE((*tuned)->Run(inputs, &out).ok());
    }
    std::stringstream text;
    text << std::ifstream(cache).rdbuf();
    ASSERT_NE(text.str().find("+simd_depthwise_int8"), std::string::npos) << text.str();
    // A Swish's layer has one more: oneDNN with its swish post-op (1), then with our pass after (2).
    struct Way {
      std::string choice, prefix, suffix;
    };
    std::vector<Way> ways{{"0", "simd:depthwise_int8", ""}, {"1", "onednn:", ""}};
    if (activation == "Swish") ways = {{"0", "simd:depthwise_int8", ""}, {"1", "onednn:", " + swish post-op"}, {"2", "onednn:", " + swish_quantize"}};
    for (const auto& [choice, implementation, suffix] : ways) {
      SCOPED_TRACE(activation + ", choice " + choice);
      // A file per choice: a session shares the process's cache of a file once read (tuning.h).
      const std::filesystem::path forced_cache = dir / (activation + ".forced" + choice);
      std::ofstream(forced_cache) << std::regex_replace(text.str(), std::regex("(\\+simd_depthwise_int8[^\t]*\t)\\d+"), std::string("$01") + choice);
      auto forced = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = forced_cache, .persist_tuning = true, .intra_op_threads = 2});
      ASSERT_TRUE(forced.ok());
      std::vector<Tensor> out;
      ASSERT_TRUE((*forced)->Run(inputs, &out).ok());
      EXPECT_LT(RelativeError(out[0], expected[0]), 0.01f);
      std::vector<std::string> depthwise;
      for (size_t i = 0; i < (*forced)->graph().nodes.size(); ++i) {
        const Node& node = (*forced)->graph().nodes[i];
        if (node.op_type == "Conv" && node.Int("group", 1).value_or(1) > 1) depthwise.push_back((*forced)->kernel(i).Implementation());
      }
      ASSERT_EQ(depthwise.size(), 1u);
      EXPECT_EQ(depthwise[0].rfind(implementation, 0), 0u) << depthwise[0] << "\n" << text.str();
      EXPECT_TRUE(depthwise[0].ends_with(suffix)) << depthwise[0];
    }
  }
  std::filesystem::remove_all(dir);
}

// x -> Conv 3x3 + Relu -> c -> squeeze-excitation (GlobalAveragePool, Conv 1x1, Sigmoid, Mul by c)
// -> Conv 1x1 -> y, the outer convolutions int8: c is NHWC, and the Mul scales it with our
// channel-scale loop (one block of every channel per image) rather than oneDNN's binary, writing
// its output quantised for the last convolution.
TEST(Int8Test, ASqueezeExcitationScaleOnChannelsLastRunsOnOurLoopAndMatchesTheQdqGraph) {
  GraphBuilder b;
  b.Input("x");
  QuantizeDequantize(b, "x", 1.f / 127, /*is_signed=*/true);
  Weight(b, "w1", {24, 16, 3, 3}, true, 61);
  b.Op("Conv", {"x_dq", "w1"}, {"c1"}, {{"pads", Ints({1, 1, 1, 1})}}).Op("Relu", {"c1"}, {"c"});
  b.Constant("w_se", Random({24, 24, 1, 1}, 62, -0.5f, 0.5f));
  b.Op("GlobalAveragePool", {"c"}, {"pooled"}).Op("Conv", {"pooled", "w_se"}, {"squeezed"});
  b.Op("Sigmoid", {"squeezed"}, {"scale"}).Op("Mul", {"c", "scale"}, {"excited"});
  QuantizeDequantize(b, "excited", 0.003f, /*is_signed=*/false);
  Weight(b, "w2", {8, 24, 1, 1}, true, 63);
  b.Op("Conv", {"excited_dq", "w2"}, {"y"}).Output("y");
  const Graph graph = b.graph();
  auto fused = Session::FromGraph(graph, {.tune = TuneMode::kOff});
  auto reference = Session::FromGraph(graph, {.registry = &KernelRegistry::Reference(), .optimize = false});
  ASSERT_TRUE(fused.ok() && reference.ok());
  for (const Shape& shape : {Shape{2, 16, 9, 11}, Shape{1, 16, 5, 5}}) {
    const std::vector<Tensor> inputs{Random(shape, 64)};
    std::vector<Tensor> out_fused, out_reference;
    ASSERT_TRUE((*fused)->Run(inputs, &out_fused).ok());
    ASSERT_TRUE((*reference)->Run(inputs, &out_reference).ok());
    EXPECT_LT(RelativeError(out_fused[0], out_reference[0]), 0.01f);
  }
  bool scaled_by_our_loop = false;
  for (size_t i = 0; i < (*fused)->graph().nodes.size(); ++i) {
    if ((*fused)->kernel(i).Implementation() == "inferd:channel_scale (int8 out)") scaled_by_our_loop = true;
  }
  EXPECT_TRUE(scaled_by_our_loop);
}

// A constant per-channel scale ([1, C, 1, 1], one factor set for every image) read only by an int8
// Conv: our channel-scale loop runs it image by image, writing each image quantised.
TEST(Int8Test, AConstantChannelScaleReadOnlyByAnInt8ConvWritesEachImageQuantised) {
  GraphBuilder b;
  b.Input("x");
  QuantizeDequantize(b, "x", 1.f / 127, /*is_signed=*/true);
  Weight(b, "w1", {24, 16, 3, 3}, true, 81);
  b.Constant("factors", Random({1, 24, 1, 1}, 82, 0.5f, 1.5f));
  b.Op("Conv", {"x_dq", "w1"}, {"c"}, {{"pads", Ints({1, 1, 1, 1})}}).Op("Relu", {"c"}, {"r"});
  b.Op("Mul", {"r", "factors"}, {"m"});
  QuantizeDequantize(b, "m", 0.003f, /*is_signed=*/false);
  Weight(b, "w2", {8, 24, 1, 1}, true, 83);
  b.Op("Conv", {"m_dq", "w2"}, {"y"}).Output("y");
  const Outputs out = RunBothWays(b.graph(), {3, 16, 6, 7});
  ASSERT_EQ(out.fused.shape, (Shape{3, 8, 6, 7}));
  EXPECT_EQ(out.requantized, 1);
  EXPECT_LT(RelativeError(out.fused, out.reference), 0.01f);
}

// A Mul that is not a per-channel scale (here by a tensor of its own shape), read by an int8 Conv
// only: it too writes its output quantised, computed in fp32 and then rounded as QuantizeLinear does.
TEST(Int8Test, AnyMulReadOnlyByAnInt8ConvWritesItsOutputQuantised) {
  GraphBuilder b;
  b.Input("x");
  QuantizeDequantize(b, "x", 1.f / 127, /*is_signed=*/true);
  Weight(b, "w1", {24, 16, 3, 3}, true, 71);
  b.Op("Conv", {"x_dq", "w1"}, {"c"}, {{"pads", Ints({1, 1, 1, 1})}});
  b.Op("Tanh", {"c"}, {"t"}).Op("Mul", {"c", "t"}, {"m"});
  QuantizeDequantize(b, "m", 0.004f, /*is_signed=*/false, /*zero_point=*/10);
  Weight(b, "w2", {8, 24, 1, 1}, true, 72);
  b.Op("Conv", {"m_dq", "w2"}, {"y"}).Output("y");
  const Outputs out = RunBothWays(b.graph(), {2, 16, 7, 5});
  ASSERT_EQ(out.fused.shape, (Shape{2, 8, 7, 5}));
  EXPECT_EQ(out.requantized, 1);  // the Mul (the first Conv has fp32 readers)
  EXPECT_LT(RelativeError(out.fused, out.reference), 0.01f);
}

// ONNX Runtime's quantiser writes uint8 activations with a zero point wherever the range dips
// below 0. They fuse too: oneDNN subtracts the zero point (padding counts as a real 0, which a
// wrong padding value would show at the 3x3 layers' borders, x's zero point being 128), and a
// requantised output gets its reader's zero point added.
TEST(Int8Test, AsymmetricUint8ActivationsFuseAndMatchTheQdqGraph) {
  const Outputs chain = RunBothWays(QdqChain(kAsymmetricUint8));
  EXPECT_EQ(chain.fusions, 3);
  EXPECT_EQ(chain.requantized, 2);
  ExpectInt8AndClose(chain, 3);
  const Outputs products = RunBothWays(QdqProducts(kAsymmetricUint8), {6, 32});
  EXPECT_EQ(products.fusions, 2);
  ExpectInt8AndClose(products, 2);
}

// QLinearConv runs on the same int8 kernel: input taken as quantised, output requantised.
TEST(Int8Test, QLinearConvolutionsRunInInt8AndMatchTheReference) {
  const Outputs out = RunBothWays(QLinearConvolutions());
  ASSERT_EQ(out.fused.shape, (Shape{2, 8, 5, 5}));
  EXPECT_EQ(out.fusions, 2);
  ExpectInt8AndClose(out, 2);
}

// QLinearMatMul takes the int8 MatMul through its QDQ spelling.
TEST(Int8Test, QLinearMatMulsRunInInt8AndMatchTheReference) {
  const Outputs out = RunBothWays(QLinearProducts(), {6, 32});
  ASSERT_EQ(out.fused.shape, (Shape{6, 8}));
  EXPECT_EQ(out.fusions, 2);
  ExpectInt8AndClose(out, 2);
}

// Dynamic quantisation: each run quantises x by its own range, as DynamicQuantizeLinear does, and
// the int8 product's sums are exact, so the result is the reference's but for the last rounding.
TEST(Int8Test, DynamicallyQuantisedMatMulsRunInInt8AndMatchTheReference) {
  const Outputs out = RunBothWays(DynamicQuantizedProducts(), {6, 32});
  ASSERT_EQ(out.fused.shape, (Shape{6, 16}));
  EXPECT_EQ(out.fusions, 2);
  ASSERT_EQ(out.conv_implementations.size(), 2u);
  for (const std::string& implementation : out.conv_implementations) {
    EXPECT_NE(implementation.find("(int8)"), std::string::npos) << implementation;
  }
  EXPECT_LT(RelativeError(out.fused, out.reference), 1e-5f);
}

// Asymmetric weights (a weight zero point) the int8 kernels cannot take: that Conv stays a QDQ
// graph run as written.
TEST(Int8Test, AsymmetricWeightsRunAsWritten) {
  const Outputs out = RunBothWays(QdqConvolutions(/*first_weight_zero_point=*/3));
  EXPECT_EQ(out.fusions, 2);  // the other two
  ASSERT_EQ(out.conv_implementations.size(), 3u);
  EXPECT_EQ(std::count_if(out.conv_implementations.begin(), out.conv_implementations.end(),
                          [](const std::string& s) { return s.find("int8") != std::string::npos; }),
            2);
  EXPECT_LT(RelativeError(out.fused, out.reference), 0.01f);
}

// uint8 activations near their top (the convolution's with a zero point, the product's a plain
// uint8) and weights over the whole int8 range: on a CPU without VNNI
// (AVX2, or ctest's copy of these tests under ONEDNN_MAX_CPU_ISA=AVX2) oneDNN adds two such
// products in int16, which saturates (16% of the largest output here), unless the kernels halve
// the weights first (Int8PairsSaturate). Halved weights round by half a step: 2.3% at most here,
// hence the bound of 4%. Where VNNI runs them the products are exact.
Graph SaturatingProducts() {
  GraphBuilder b;
  b.Input("x");
  QuantizeDequantize(b, "x", 1.f / 127, /*is_signed=*/false, /*zero_point=*/128);  // asymmetric, as ORT's
  Weight(b, "w1", {16, 8, 3, 3}, true, 31, 0, 0, /*exact_everywhere=*/false);
  b.Op("Conv", {"x_dq", "w1"}, {"c"}, {{"pads", Ints({1, 1, 1, 1})}}).Output("c");
  b.Op("Flatten", {"x"}, {"flat"}, {{"axis", Int(1)}});
  QuantizeDequantize(b, "flat", 1.f / 255, /*is_signed=*/false);
  Weight(b, "w2", {8 * 6 * 6, 16}, true, 32, /*axis=*/1, 0, /*exact_everywhere=*/false);
  b.Op("MatMul", {"flat_dq", "w2"}, {"m"}).Output("m");
  return b.graph();
}

TEST(Int8Test, ProductsThatWouldSaturateInt16WithoutVnniStayClose) {
  const Graph graph = SaturatingProducts();
  auto fused = Session::FromGraph(graph, {.tune = TuneMode::kOff});
  auto reference = Session::FromGraph(graph, {.registry = &KernelRegistry::Reference(), .optimize = false});
  ASSERT_TRUE(fused.ok() && reference.ok());
  std::vector<Tensor> inputs{Random({4, 8, 6, 6}, 9, 0.5f, 1.0f)}, out_fused, out_reference;
  ASSERT_TRUE((*fused)->Run(inputs, &out_fused).ok());
  ASSERT_TRUE((*reference)->Run(inputs, &out_reference).ok());
  ASSERT_EQ(out_fused.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_LT(RelativeError(out_fused[i], out_reference[i]), 0.04f) << "output " << i;
  for (size_t i = 0; i < (*fused)->graph().nodes.size(); ++i) {
    const std::string& op = (*fused)->graph().nodes[i].op_type;
    if (op == "Conv" || op == "MatMul") {
      EXPECT_NE((*fused)->kernel(i).Implementation().find("(int8)"), std::string::npos) << op;
    }
  }
}

}  // namespace
}  // namespace inferd::runtime
