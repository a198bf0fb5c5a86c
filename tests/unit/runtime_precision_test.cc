// Precision: bf16 convolutions where the CPU has native bf16, within bf16's rounding of the fp32
// reference; fp32, with a reason, where it has not; names parsed strictly.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/kernels/tensor_util.h"
#include "runtime/precision.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;

TEST(PrecisionTest, NamesAreParsedStrictly) {
  EXPECT_EQ(ParsePrecision("fp32").value(), Precision::kFp32);
  EXPECT_EQ(ParsePrecision("bf16").value(), Precision::kBf16);
  for (const char* bad : {"fp16", "BF16", "", "int8"}) {
    const auto parsed = ParsePrecision(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("fp32 or bf16"), std::string::npos);
  }
  EXPECT_EQ(PrecisionName(Precision::kBf16), "bf16");
  EXPECT_FALSE(PrecisionUnavailable(Precision::kFp32).has_value());
}

// bf16 keeps 8 bits of each input's and weight's mantissa (relative error 2^-9 each); the sums
// are fp32. Over these layers' 64-288 terms of magnitude ~1 that is a few 1e-2 at most, and not
// zero: fp32 arithmetic would match within 1e-5. `tolerance` grows with the layers in a chain.
void ExpectWithinBf16Rounding(const Tensor& actual, const Tensor& expected, double tolerance = 5e-2) {
  ASSERT_EQ(actual.shape, expected.shape);
  double largest = 0;
  for (int64_t i = 0; i < ElementsOf(expected); ++i) {
    const float want = ValuesOf<float>(expected)[i], got = ValuesOf<float>(actual)[i];
    ASSERT_NEAR(got, want, tolerance * std::max(1.0f, std::abs(want))) << i;
    largest = std::max(largest, std::abs(double{got} - want));
  }
  EXPECT_GT(largest, 1e-5);
}

// A bf16 session of `graph`, with the reference kernels' fp32 outputs for x and the session's.
struct Bf16Run {
  std::unique_ptr<Session> session;
  std::vector<Tensor> expected, actual;
};

void RunInBf16(const Graph& graph, const Tensor& x, TuneMode tune, Bf16Run* run) {
  auto session = Session::FromGraph(graph, {.tune = tune, .precision = Precision::kBf16});
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  auto reference = Session::FromGraph(graph, {.registry = &KernelRegistry::Reference(), .optimize = false});
  ASSERT_TRUE(reference.ok());
  const std::vector<Tensor> inputs{x};
  ASSERT_TRUE((*reference)->Run(inputs, &run->expected).ok());
  ASSERT_TRUE((*session)->Run(inputs, &run->actual).ok());
  run->session = std::move(*session);
}

// x -> Conv 3x3 (16 -> 32) + bias + Relu -> Conv 1x1 (32 -> 16) + x (residual) -> Conv 3x3 stride 2.
Graph Convolutions() {
  GraphBuilder b;
  b.Input("x");
  b.Constant("w1", Random({32, 16, 3, 3}, 41, -0.3f, 0.3f))
      .Constant("b1", Random({32}, 42))
      .Constant("w2", Random({16, 32, 1, 1}, 43, -0.3f, 0.3f))
      .Constant("w3", Random({8, 16, 3, 3}, 44, -0.3f, 0.3f));
  b.Op("Conv", {"x", "w1", "b1"}, {"c1"}, {{"pads", Ints({1, 1, 1, 1})}})
      .Op("Relu", {"c1"}, {"a1"})
      .Op("Conv", {"a1", "w2"}, {"c2"})
      .Op("Add", {"c2", "x"}, {"r"})
      .Op("Conv", {"r", "w3"}, {"y"}, {{"pads", Ints({1, 1, 1, 1})}, {"strides", Ints({2, 2})}})
      .Output("y");
  return b.graph();
}

TEST(PrecisionTest, Bf16ConvolutionsStayWithinBf16RoundingOfFp32) {
  const Graph graph = Convolutions();
  const Tensor x = Random({2, 16, 10, 10}, 40);
  // Tuning off: oneDNN's first implementation for every layer (our own kernels are fp32).
  Bf16Run run;
  RunInBf16(graph, x, TuneMode::kOff, &run);
  if (HasFatalFailure()) return;
  ASSERT_EQ(run.actual[0].shape, run.expected[0].shape);
  if (const auto unavailable = PrecisionUnavailable(Precision::kBf16)) {
    EXPECT_EQ(run.session->precision(), Precision::kFp32);
    EXPECT_NE(run.session->precision_fallback().find("no native bf16"), std::string::npos);
    for (int64_t i = 0; i < ElementsOf(run.expected[0]); ++i) {
      ASSERT_NEAR(ValuesOf<float>(run.actual[0])[i], ValuesOf<float>(run.expected[0])[i], 1e-3) << i;
    }
    GTEST_SKIP() << *unavailable;
  }
  EXPECT_EQ(run.session->precision(), Precision::kBf16);
  EXPECT_TRUE(run.session->precision_fallback().empty());
  int convolutions = 0;
  for (size_t n = 0; n < run.session->graph().nodes.size(); ++n) {
    if (run.session->graph().nodes[n].op_type != "Conv") continue;
    ++convolutions;
    const std::string implementation = run.session->kernel(n).Implementation();
    EXPECT_TRUE(implementation.find("bf16") != std::string::npos || implementation.find("amx") != std::string::npos)
        << implementation;
  }
  EXPECT_EQ(convolutions, 3);
  ExpectWithinBf16Rounding(run.actual[0], run.expected[0]);
}

// x -> A: Conv 3x3 + Relu -> a -> B: Conv 1x1 -> b -> C: Conv 3x3 + a (residual) + Relu -> r ->
// D: Conv 1x1 -> d -> E: Conv 3x3 stride 2 -> y, and d -> MaxPool -> z. Only b is read by nothing
// but a bf16 convolution's data input: a is also C's residual, r has a residual Add fused, d is
// also read by MaxPool, y is a graph output.
Graph ConvolutionChain() {
  GraphBuilder b;
  b.Input("x");
  b.Constant("wa", Random({32, 16, 3, 3}, 61, -0.3f, 0.3f))
      .Constant("wb", Random({32, 32, 1, 1}, 62, -0.3f, 0.3f))
      .Constant("wc", Random({32, 32, 3, 3}, 63, -0.2f, 0.2f))
      .Constant("wd", Random({16, 32, 1, 1}, 64, -0.3f, 0.3f))
      .Constant("we", Random({16, 16, 3, 3}, 65, -0.3f, 0.3f))
      .Constant("bias", Random({32}, 66));
  const auto pads = Ints({1, 1, 1, 1});
  b.Op("Conv", {"x", "wa", "bias"}, {"ca"}, {{"pads", pads}})
      .Op("Relu", {"ca"}, {"a"})
      .Op("Conv", {"a", "wb"}, {"b"})
      .Op("Conv", {"b", "wc", "bias"}, {"cc"}, {{"pads", pads}})
      .Op("Add", {"cc", "a"}, {"sum"})
      .Op("Relu", {"sum"}, {"r"})
      .Op("Conv", {"r", "wd"}, {"d"})
      .Op("Conv", {"d", "we"}, {"y"}, {{"pads", pads}, {"strides", Ints({2, 2})}})
      .Op("MaxPool", {"d"}, {"z"}, {{"kernel_shape", Ints({2, 2})}, {"strides", Ints({2, 2})}})
      .Output("y")
      .Output("z");
  return b.graph();
}

TEST(PrecisionTest, Bf16ConvolutionsWriteBf16OnlyForBf16ConvolutionsReadingIt) {
  const Graph graph = ConvolutionChain();
  const Tensor x = Random({2, 16, 12, 12}, 60);
  // Tuning on: the layers that read or write bf16 must not be offered our fp32 kernels.
  Bf16Run run;
  RunInBf16(graph, x, TuneMode::kFast, &run);
  if (HasFatalFailure()) return;
  if (const auto unavailable = PrecisionUnavailable(Precision::kBf16)) GTEST_SKIP() << *unavailable;
  const Graph& optimized = run.session->graph();
  std::vector<std::string> bf16_outputs;
  for (size_t n = 0; n < optimized.nodes.size(); ++n) {
    const Node& node = optimized.nodes[n];
    if (node.op_type != "Conv") continue;
    const std::string implementation = run.session->kernel(n).Implementation();
    const std::string output = optimized.values[static_cast<size_t>(node.outputs[0])].name;
    if (node.Has(kBf16OutputAttribute)) {
      bf16_outputs.push_back(output);
      EXPECT_EQ(optimized.values[static_cast<size_t>(node.outputs[0])].dtype, DataType::kBf16);
    }
    const bool reads_bf16 = optimized.values[static_cast<size_t>(node.inputs[0])].dtype == DataType::kBf16;
    // oneDNN's, never our fp32 kernels (which implementation of oneDNN's is the timing's choice:
    // under load it has picked one whose name does not say bf16).
    if (node.Has(kBf16OutputAttribute) || reads_bf16) {
      EXPECT_EQ(implementation.rfind("onednn:", 0), 0u) << output << ": " << implementation;
    }
  }
  EXPECT_EQ(bf16_outputs, std::vector<std::string>{"b"});
  ASSERT_EQ(run.actual.size(), 2u);
  // Five layers, each on bf16-rounded inputs (up to 288 terms): twice a three-layer chain's bound.
  ExpectWithinBf16Rounding(run.actual[0], run.expected[0], 1e-1);
  ExpectWithinBf16Rounding(run.actual[1], run.expected[1], 1e-1);
}

// A Linear layer (Gemm + bias, Relu) then a MatMul with constant weights: both packed in bf16.
TEST(PrecisionTest, Bf16MatrixProductsStayWithinBf16RoundingOfFp32) {
  GraphBuilder b;
  b.Input("x");
  b.Constant("w1", Random({64, 32}, 51, -0.3f, 0.3f)).Constant("c1", Random({32}, 52)).Constant("w2", Random({32, 16}, 53, -0.3f, 0.3f));
  b.Op("Gemm", {"x", "w1", "c1"}, {"g"}).Op("Relu", {"g"}, {"r"}).Op("MatMul", {"r", "w2"}, {"y"}).Output("y");
  const Graph graph = b.graph();
  const Tensor x = Random({6, 64}, 50);
  Bf16Run run;
  RunInBf16(graph, x, TuneMode::kOff, &run);
  if (HasFatalFailure()) return;
  if (const auto unavailable = PrecisionUnavailable(Precision::kBf16)) GTEST_SKIP() << *unavailable;
  int products = 0;
  for (size_t n = 0; n < run.session->graph().nodes.size(); ++n) {
    const std::string& op = run.session->graph().nodes[n].op_type;
    if (op != "Gemm" && op != "MatMul") continue;
    ++products;
    EXPECT_NE(run.session->kernel(n).Implementation().find("(bf16)"), std::string::npos)
        << run.session->kernel(n).Implementation();
  }
  EXPECT_EQ(products, 2);
  ExpectWithinBf16Rounding(run.actual[0], run.expected[0]);
}

}  // namespace
}  // namespace inferd::runtime
