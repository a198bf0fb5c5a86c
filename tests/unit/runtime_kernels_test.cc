// The oneDNN kernels against the reference kernels, on the shapes and attributes that matter
// (grouped, depthwise, dilated, strided, padded, 1-D/3-D; batched and broadcast MatMul; Gemm).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <random>

#include "runtime/kernels/dnnl/dnnl_layout.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/kernels/vector_math.h"
#include "runtime/session.h"
#include "runtime/threading.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;

// A graph of one node whose inputs are all graph inputs.
Graph OneNode(const std::string& op, size_t input_count, std::map<std::string, Attribute, std::less<>> attributes) {
  Graph g;
  g.opset = 17;
  Node node;
  node.op_type = op;
  node.name = "under_test";
  for (size_t i = 0; i < input_count; ++i) {
    ValueId id = g.AddValue({.name = "in" + std::to_string(i)});
    g.inputs.push_back(id);
    node.inputs.push_back(id);
  }
  ValueId out = g.AddValue({.name = "out"});
  node.outputs.push_back(out);
  node.attributes = std::move(attributes);
  g.nodes.push_back(std::move(node));
  g.outputs.push_back(out);
  return g;
}

struct Comparison {
  std::string implementation;
  Shape shape;
};

// Runs the node on the fast and the reference registry and expects the same numbers.
Comparison ExpectSameAsReference(const Graph& graph, const std::vector<Tensor>& inputs) {
  auto fast = Session::FromGraph(graph);
  auto reference = Session::FromGraph(graph, {.registry = &KernelRegistry::Reference()});
  EXPECT_TRUE(fast.ok()) << fast.status().ToString();
  EXPECT_TRUE(reference.ok()) << reference.status().ToString();
  if (!fast.ok() || !reference.ok()) return {};
  std::vector<Tensor> fast_out, reference_out;
  // Twice: the second run reuses the cached primitive and reordered weights.
  for (int run = 0; run < 2; ++run) {
    Status status = (*fast)->Run(inputs, &fast_out);
    EXPECT_TRUE(status.ok()) << status.ToString();
  }
  Status status = (*reference)->Run(inputs, &reference_out);
  EXPECT_TRUE(status.ok()) << status.ToString();
  if (fast_out.empty() || reference_out.empty()) return {};
  EXPECT_EQ(fast_out[0].shape, reference_out[0].shape);
  const float* a = ValuesOf<float>(fast_out[0]);
  const float* b = ValuesOf<float>(reference_out[0]);
  double worst = 0;
  for (int64_t i = 0; i < ElementsOf(reference_out[0]); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::abs(static_cast<double>(b[i]))));
  }
  EXPECT_LT(worst, 1e-4);
  return {(*fast)->kernel(0).Implementation(), fast_out[0].shape};
}

struct ConvCase {
  const char* name;
  Shape x, w;
  std::map<std::string, Attribute, std::less<>> attributes;
  bool bias;
};

class ConvTest : public testing::TestWithParam<ConvCase> {};

// The blocked layout's channel block: timed, 8 or 16, or what INFERD_CHANNEL_BLOCK says (ctest runs
// the layout-heavy suites once more with each).
TEST(ChannelBlockTest, IsEightOrSixteenAndFollowsTheOverride) {
  const int64_t block = dnnl_kernels::ChannelBlock();
  EXPECT_TRUE(block == 8 || block == 16) << block;
  if (const char* forced = std::getenv("INFERD_CHANNEL_BLOCK")) {
    EXPECT_EQ(std::to_string(block), forced);
  }
}

TEST_P(ConvTest, OneDnnMatchesReference) {
  const ConvCase& c = GetParam();
  std::vector<Tensor> inputs{Random(c.x, 1), Random(c.w, 2)};
  if (c.bias) inputs.push_back(Random({c.w[0]}, 3));
  Comparison result = ExpectSameAsReference(OneNode("Conv", inputs.size(), c.attributes), inputs);
  EXPECT_EQ(result.implementation.rfind("onednn:", 0), 0u) << result.implementation;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvTest,
    testing::Values(
        ConvCase{"padded_bias", {1, 3, 8, 8}, {4, 3, 3, 3}, {{"pads", Ints({1, 1, 1, 1})}}, true},
        ConvCase{"strided", {2, 3, 9, 9}, {4, 3, 3, 3}, {{"strides", Ints({2, 2})}}, false},
        ConvCase{"dilated", {1, 2, 10, 10}, {3, 2, 3, 3}, {{"dilations", Ints({2, 2})}, {"pads", Ints({2, 2, 2, 2})}}, true},
        ConvCase{"grouped", {1, 4, 6, 6}, {6, 2, 3, 3}, {{"group", Int(2)}}, true},
        ConvCase{"depthwise", {1, 8, 7, 7}, {8, 1, 3, 3}, {{"group", Int(8)}, {"pads", Ints({1, 1, 1, 1})}}, true},
        ConvCase{"asymmetric_pads", {1, 3, 7, 6}, {2, 3, 2, 3}, {{"pads", Ints({0, 1, 2, 0})}}, false},
        ConvCase{"same_upper_strided", {1, 3, 9, 8}, {5, 3, 3, 3}, {{"auto_pad", String("SAME_UPPER")}, {"strides", Ints({2, 2})}}, true},
        ConvCase{"one_d", {2, 3, 10}, {5, 3, 3}, {}, true},
        ConvCase{"three_d", {1, 2, 4, 5, 6}, {3, 2, 3, 3, 3}, {{"pads", Ints({1, 1, 1, 1, 1, 1})}}, true},
        ConvCase{"pointwise", {3, 16, 5, 5}, {32, 16, 1, 1}, {}, true}),
    [](const testing::TestParamInfo<ConvCase>& info) { return std::string(info.param.name); });

TEST(MatMulTest, BatchedAndBroadcastMatchReference) {
  for (auto [a, b] : std::vector<std::pair<Shape, Shape>>{{{3, 4}, {4, 5}},
                                                          {{2, 3, 4}, {4, 5}},
                                                          {{3, 4}, {2, 4, 5}},
                                                          {{1, 2, 3, 4}, {2, 1, 4, 5}}}) {
    std::vector<Tensor> inputs{Random(a, 4), Random(b, 5)};
    Comparison result = ExpectSameAsReference(OneNode("MatMul", 2, {}), inputs);
    EXPECT_EQ(result.implementation.rfind("onednn:", 0), 0u) << ShapeToString(a) << " x " << ShapeToString(b);
  }
}

TEST(MatMulTest, VectorOperandsFallBackToReference) {
  std::vector<Tensor> inputs{Random({4}, 6), Random({4, 5}, 7)};
  Comparison result = ExpectSameAsReference(OneNode("MatMul", 2, {}), inputs);
  EXPECT_EQ(result.implementation, "reference");
  EXPECT_EQ(result.shape, (Shape{5}));
}

TEST(GemmTest, TransposesAndBiasMatchReference) {
  struct Case {
    bool trans_a, trans_b;
    Shape c;
    float alpha;
    bool expect_onednn;
  };
  for (const Case& c : std::vector<Case>{{false, false, {5}, 1, true},
                                         {true, false, {3, 5}, 1, true},
                                         {false, true, {}, 1, true},
                                         {true, true, {1, 5}, 1, true},
                                         {false, true, {3, 1}, 1, true},
                                         {false, false, {5}, 0.5f, false}}) {
    Shape a = c.trans_a ? Shape{4, 3} : Shape{3, 4};
    Shape b = c.trans_b ? Shape{5, 4} : Shape{4, 5};
    std::vector<Tensor> inputs{Random(a, 8), Random(b, 9), Random(c.c, 10)};
    Comparison result = ExpectSameAsReference(
        OneNode("Gemm", 3, {{"transA", Int(c.trans_a)}, {"transB", Int(c.trans_b)}, {"alpha", Float(c.alpha)}}), inputs);
    EXPECT_EQ(result.implementation.rfind("onednn:", 0) == 0, c.expect_onednn) << result.implementation;
    EXPECT_EQ(result.shape, (Shape{3, 5}));
  }
}

TEST(EltwiseTest, ActivationsAndSoftmaxRunOnOneDnnAndMatchReference) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Elu", "HardSwish", "Softplus", "Neg"}) {
    std::vector<Tensor> inputs{Random({2, 3, 5}, 11)};
    Comparison result = ExpectSameAsReference(OneNode(op, 1, {}), inputs);
    EXPECT_EQ(result.implementation.rfind("onednn:", 0), 0u) << op << ": " << result.implementation;
  }
  for (int64_t axis : {-1, 1, 0}) {
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      std::vector<Tensor> inputs{Random({3, 4, 6}, 12)};
      Comparison result = ExpectSameAsReference(OneNode(op, 1, {{"axis", Int(axis)}}), inputs);
      EXPECT_EQ(result.implementation.rfind("onednn:", 0), 0u) << op << " axis " << axis;
    }
  }
}

TEST(PoolTest, OptimizedMatchesReference) {
  struct Case {
    const char* op;
    Shape x;
    std::map<std::string, Attribute, std::less<>> attributes;
    bool expect_optimized;  // oneDNN's primitive or our SIMD kernel (a global pool's tuning picks), not the reference
  };
  const std::vector<Case> cases = {
      {"MaxPool", {2, 3, 9, 9}, {{"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}}, true},
      {"MaxPool", {1, 2, 8, 8}, {{"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 2})}, {"ceil_mode", Int(1)}}, true},
      {"MaxPool", {1, 2, 8, 8}, {{"kernel_shape", Ints({2, 2})}, {"dilations", Ints({2, 2})}}, false},
      {"AveragePool", {1, 3, 7, 7}, {{"kernel_shape", Ints({3, 3})}, {"pads", Ints({1, 1, 1, 1})}}, true},
      {"AveragePool", {1, 3, 7, 7}, {{"kernel_shape", Ints({3, 3})}, {"pads", Ints({1, 1, 1, 1})}, {"count_include_pad", Int(1)}}, true},
      // Ceil mode adds padding the model did not ask for, which an average counting pads must not count.
      {"AveragePool", {1, 2, 8, 8}, {{"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 2})}, {"ceil_mode", Int(1)}, {"count_include_pad", Int(1)}}, false},
      {"AveragePool", {1, 2, 8, 8}, {{"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 2})}, {"ceil_mode", Int(1)}}, true},
      {"AveragePool", {2, 3, 10}, {{"kernel_shape", Ints({4})}, {"strides", Ints({2})}}, true},
      {"GlobalAveragePool", {2, 5, 6, 7}, {}, true},
      {"GlobalMaxPool", {2, 5, 6, 7}, {}, true},
      {"GlobalAveragePool", {1, 3, 2, 3, 4}, {}, true},
  };
  for (const Case& c : cases) {
    std::vector<Tensor> inputs{Random(c.x, 13)};
    Comparison result = ExpectSameAsReference(OneNode(c.op, 1, c.attributes), inputs);
    const bool optimized = result.implementation.starts_with("onednn:") || result.implementation.starts_with("simd:");
    EXPECT_EQ(optimized, c.expect_optimized) << c.op << ": " << result.implementation;
  }
}

TEST(BinaryTest, OneDnnMatchesReferenceAndBroadcasts) {
  struct Case {
    const char* op;
    Shape a, b;
    bool expect_onednn;
  };
  const std::vector<Case> cases = {
      {"Add", {2, 3, 4}, {2, 3, 4}, true},
      {"Mul", {2, 8, 5, 5}, {2, 8, 1, 1}, true},
      {"Mul", {8, 1, 1}, {2, 8, 5, 5}, true},  // commutative: the operands swap
      {"Sub", {4, 5}, {5}, true},
      {"Div", {3, 1}, {3, 4}, false},  // not commutative and the first input broadcasts
      {"Max", {2, 3}, {}, true},
      {"Min", {1, 3}, {2, 1}, false},  // both broadcast
      {"Add", {}, {}, true},
  };
  for (const Case& c : cases) {
    std::vector<Tensor> inputs{Random(c.a, 14), Random(c.b, 15, 0.5, 2)};
    Comparison result = ExpectSameAsReference(OneNode(c.op, 2, {}), inputs);
    EXPECT_EQ(result.implementation.rfind("onednn:", 0) == 0, c.expect_onednn)
        << c.op << " " << ShapeToString(c.a) << " " << ShapeToString(c.b) << ": " << result.implementation;
  }
}

// A 1-D INT64 tensor (Slice's starts, ends, axes and steps).
Tensor Int64Tensor(const std::vector<int64_t>& values) {
  Tensor t;
  int64_t* data = AllocateOutputAs<int64_t>(&t, DataType::kInt64, {static_cast<int64_t>(values.size())}).value();
  std::copy(values.begin(), values.end(), data);
  return t;
}

TEST(DataMovementTest, TransposeAndSliceRunOnOneDnnReorders) {
  for (auto [shape, perm] : std::vector<std::pair<Shape, std::vector<int64_t>>>{
           {{2, 3, 4}, {2, 0, 1}}, {{1, 5, 12, 7}, {0, 2, 1, 3}}, {{3, 4}, {}}, {{2, 1, 3}, {1, 0, 2}}}) {
    std::vector<Tensor> inputs{Random(shape, 16)};
    Comparison result = ExpectSameAsReference(OneNode("Transpose", 1, {{"perm", Ints(perm)}}), inputs);
    EXPECT_EQ(result.implementation.rfind("onednn:", 0), 0u) << ShapeToString(shape);
  }
  struct SliceCase {
    std::vector<int64_t> starts, ends, axes, steps;
    bool expect_onednn;
  };
  for (const SliceCase& c : std::vector<SliceCase>{{{0, 8}, {4, 16}, {1, 2}, {1, 1}, true},
                                                   {{-3}, {100}, {3}, {2}, true},
                                                   {{5}, {0}, {2}, {-2}, false},  // reversed: reference
                                                   {{4}, {4}, {1}, {1}, false}}) {  // empty: reference
    std::vector<Tensor> inputs{Random({2, 6, 24, 9}, 17), Int64Tensor(c.starts), Int64Tensor(c.ends),
                               Int64Tensor(c.axes), Int64Tensor(c.steps)};
    Comparison result = ExpectSameAsReference(OneNode("Slice", 5, {}), inputs);
    EXPECT_EQ(result.implementation.rfind("onednn:", 0) == 0, c.expect_onednn) << result.implementation;
  }
}

// One Slice node run with starts that move (a graph input): the view's shape and strides stay, so
// the kernel reuses its reorder, and each run must read from its own offset (Q, K and V of a
// fused projection are such views).
TEST(DataMovementTest, ASliceReusesItsReorderAtEveryOffset) {
  const Graph graph = OneNode("Slice", 5, {});
  auto fast = Session::FromGraph(graph);
  auto reference = Session::FromGraph(graph, {.registry = &KernelRegistry::Reference()});
  ASSERT_TRUE(fast.ok() && reference.ok());
  const Tensor x = Random({2, 4, 24}, 18);
  for (int64_t start : {0, 8, 16, 8}) {
    const std::vector<Tensor> inputs{x, Int64Tensor({start}), Int64Tensor({start + 8}), Int64Tensor({2}),
                                     Int64Tensor({1})};
    std::vector<Tensor> got, want;
    ASSERT_TRUE((*fast)->Run(inputs, &got).ok());
    ASSERT_TRUE((*reference)->Run(inputs, &want).ok());
    EXPECT_EQ((*fast)->kernel(0).Implementation().rfind("onednn:", 0), 0u);
    ASSERT_EQ(got[0].shape, want[0].shape);
    for (int64_t i = 0; i < ElementsOf(want[0]); ++i) {
      ASSERT_EQ(ValuesOf<float>(got[0])[i], ValuesOf<float>(want[0])[i]) << "start " << start << " element " << i;
    }
  }
}

TEST(LayerNormTest, OneDnnMatchesReference) {
  struct Case {
    Shape x;
    int64_t axis;
    Shape scale;
    bool bias, expect_onednn;
  };
  for (const Case& c : std::vector<Case>{{{2, 5, 16}, -1, {16}, true, true},
                                         {{3, 4, 6}, 1, {4, 6}, true, true},
                                         {{4, 8}, -1, {8}, false, true},
                                         {{2, 3, 8}, -1, {1}, true, false}}) {  // a broadcast scale: reference
    std::vector<Tensor> inputs{Random(c.x, 18, -3, 3), Random(c.scale, 19)};
    if (c.bias) inputs.push_back(Random({c.x.back()}, 20));
    Graph g = OneNode("LayerNormalization", inputs.size(), {{"axis", Int(c.axis)}});
    if (c.bias && c.axis == 1) inputs[2] = Random({4, 6}, 20);
    Comparison result = ExpectSameAsReference(g, inputs);
    EXPECT_EQ(result.implementation.rfind("onednn:", 0) == 0, c.expect_onednn) << result.implementation;
  }
}

TEST(ReduceTest, OneDnnMatchesReference) {
  struct Case {
    const char* op;
    std::vector<int64_t> axes;
    int64_t keepdims;
    bool expect_onednn;
  };
  for (const Case& c : std::vector<Case>{{"ReduceMean", {-1}, 1, true},
                                         {"ReduceMax", {1, 2}, 0, true},
                                         {"ReduceMin", {}, 1, true},
                                         {"ReduceProd", {0}, 0, true},
                                         {"ReduceL1", {2}, 1, true},
                                         {"ReduceL2", {1}, 0, true},
                                         {"ReduceSumSquare", {0, 2}, 1, true},
                                         {"ReduceLogSumExp", {1}, 1, false}}) {
    std::vector<Tensor> inputs{Random({3, 4, 5}, 21, 0.5f, 1.5f)};
    std::map<std::string, Attribute, std::less<>> attributes{{"keepdims", Int(c.keepdims)}};
    if (!c.axes.empty()) attributes["axes"] = Ints(c.axes);
    Comparison result = ExpectSameAsReference(OneNode(c.op, 1, attributes), inputs);
    EXPECT_EQ(result.implementation.rfind("onednn:", 0) == 0, c.expect_onednn) << c.op << ": " << result.implementation;
  }
  // ReduceSum's axes are an input from opset 13.
  Tensor axes;
  *AllocateOutputAs<int64_t>(&axes, DataType::kInt64, {1}).value() = 1;
  std::vector<Tensor> inputs{Random({2, 6, 3}, 22), axes};
  Comparison result = ExpectSameAsReference(OneNode("ReduceSum", 2, {{"keepdims", Int(0)}}), inputs);
  EXPECT_EQ(result.implementation.rfind("onednn:", 0), 0u) << result.implementation;
  EXPECT_EQ(result.shape, (Shape{2, 3}));
}

TEST(NormalizationTest, BatchNormAndLrnRunOnOneDnn) {
  std::vector<Tensor> bn{Random({2, 5, 4, 3}, 23), Random({5}, 24), Random({5}, 25), Random({5}, 26),
                         Random({5}, 27, 0.5f, 2.0f)};
  Comparison result = ExpectSameAsReference(OneNode("BatchNormalization", 5, {{"epsilon", Float(1e-3f)}}), bn);
  EXPECT_EQ(result.implementation.rfind("onednn:", 0), 0u) << result.implementation;
  std::vector<Tensor> lrn{Random({2, 7, 5, 5}, 28)};
  result = ExpectSameAsReference(
      OneNode("LRN", 1, {{"size", Int(3)}, {"alpha", Float(1e-2f)}, {"beta", Float(0.75f)}, {"bias", Float(2.0f)}}), lrn);
  EXPECT_EQ(result.implementation.rfind("onednn:", 0), 0u) << result.implementation;
}

TEST(ConvTransposeTest, OneDnnMatchesReference) {
  struct Case {
    Shape x, w;
    std::map<std::string, Attribute, std::less<>> attributes;
    bool bias, expect_onednn;
  };
  const std::vector<Case> cases = {
      {{1, 3, 5, 5}, {3, 4, 3, 3}, {}, true, true},
      {{2, 4, 4, 4}, {4, 3, 3, 3}, {{"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}, {"output_padding", Ints({1, 1})}}, false, true},
      {{1, 4, 3, 3}, {4, 2, 2, 2}, {{"group", Int(2)}, {"dilations", Ints({2, 2})}}, true, true},
      {{1, 2, 3, 4}, {2, 3, 3, 3}, {{"strides", Ints({3, 2})}, {"output_shape", Ints({9, 8})}}, true, true},
      {{1, 2, 4}, {2, 3, 3}, {{"strides", Ints({2})}}, true, true},
      // Output padding beyond the right pad: oneDNN would need a negative pad.
      {{1, 2, 3, 3}, {2, 2, 3, 3}, {{"strides", Ints({2, 2})}, {"output_padding", Ints({1, 1})}}, false, false},
  };
  for (const Case& c : cases) {
    std::vector<Tensor> inputs{Random(c.x, 29), Random(c.w, 30)};
    if (c.bias) inputs.push_back(Random({c.w[1] * (c.attributes.count("group") ? c.attributes.at("group").i : 1)}, 31));
    Comparison result = ExpectSameAsReference(OneNode("ConvTranspose", inputs.size(), c.attributes), inputs);
    EXPECT_EQ(result.implementation.rfind("onednn:", 0) == 0, c.expect_onednn)
        << ShapeToString(c.x) << " " << ShapeToString(c.w) << ": " << result.implementation;
  }
}

Graph AttentionNode(size_t inputs, std::map<std::string, Attribute, std::less<>> attributes) {
  Graph g = OneNode("Attention", inputs, std::move(attributes));
  g.nodes[0].domain = "inferd";
  return g;
}

TEST(AttentionTest, OneDnnMatchesReferenceThroughPermsMasksAndChunks) {
  struct Case {
    const char* name;
    std::vector<Shape> inputs;
    std::map<std::string, Attribute, std::less<>> attributes;
    Shape output;
  };
  const std::vector<Case> cases = {
      {"no batch dims, Q given transposed, causal-style mask",
       {{4, 9}, {4, 9}, {9, 3}, {9, 9}},
       {{"scale", Float(0.5f)}, {"q_perm", Ints({1, 0})}},
       {9, 3}},
      {"sequence-first heads with 20 of them (several chunks and a remainder)",
       {{128, 20, 8}, {128, 20, 8}, {128, 20, 8}},
       {{"scale", Float(0.35f)}, {"q_perm", Ints({1, 0, 2})}, {"k_perm", Ints({1, 2, 0})}, {"v_perm", Ints({1, 0, 2})},
        {"out_perm", Ints({1, 0, 2})}},
       {128, 20, 8}},
      {"[batch, heads] with a key padding mask",
       {{2, 3, 5, 8}, {2, 3, 8, 6}, {2, 3, 6, 4}, {2, 1, 1, 6}},
       {{"scale", Float(0.125f)}},
       {2, 3, 5, 4}},
  };
  for (const Case& c : cases) {
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < c.inputs.size(); ++i) inputs.push_back(Random(c.inputs[i], static_cast<uint32_t>(i + 1), -2, 2));
    Comparison result = ExpectSameAsReference(AttentionNode(c.inputs.size(), c.attributes), inputs);
    EXPECT_EQ(result.implementation.rfind("onednn:attention", 0), 0u) << c.name << ": " << result.implementation;
    EXPECT_EQ(result.shape, c.output) << c.name;
  }
}

TEST(AttentionTest, BroadcastOperandsRunOnTheReferenceKernel) {
  // One K and V for every head (multi-query attention): oneDNN cannot read a stride-0 batch dim.
  std::vector<Tensor> inputs{Random({2, 3, 5, 4}, 1), Random({2, 1, 4, 6}, 2), Random({2, 1, 6, 4}, 3)};
  Comparison result = ExpectSameAsReference(AttentionNode(3, {{"scale", Float(0.5f)}}), inputs);
  EXPECT_EQ(result.implementation, "reference");
  EXPECT_EQ(result.shape, (Shape{2, 3, 5, 4}));
}

TEST(AttentionTest, OperandsThatDoNotChainAreAnError) {
  auto session = Session::FromGraph(AttentionNode(4, {}));
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<Tensor> outputs;
  std::vector<Tensor> unchained{Random({5, 4}, 1), Random({3, 6}, 2), Random({6, 4}, 3), Random({5, 6}, 4)};
  Status status = (*session)->Run(unchained, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("do not chain"), std::string::npos) << status.message();
  // A mask with more rows than the scores would grow them: not attention.
  std::vector<Tensor> growing{Random({1, 4}, 1), Random({4, 6}, 2), Random({6, 4}, 3), Random({5, 6}, 4)};
  status = (*session)->Run(growing, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("does not fit"), std::string::npos) << status.message();
  std::vector<Tensor> good{Random({5, 4}, 1), Random({4, 6}, 2), Random({6, 4}, 3), Random({5, 6}, 4)};
  EXPECT_TRUE((*session)->Run(good, &outputs).ok());
}

Tensor Floats(std::vector<float> values) {
  Tensor t;
  float* data = AllocateOutputAs<float>(&t, DataType::kFp32, {static_cast<int64_t>(values.size())}).value();
  std::copy(values.begin(), values.end(), data);
  return t;
}

TEST(ResizeTest, OneDnnResamplingWhereItMatchesOnnx) {
  struct Case {
    const char* name;
    std::map<std::string, Attribute, std::less<>> attributes;
    std::vector<float> scales;
    bool onednn;
  };
  const std::vector<Case> cases = {
      {"PyTorch nearest upsampling x2", {{"mode", String("nearest")}, {"coordinate_transformation_mode", String("asymmetric")},
                                         {"nearest_mode", String("floor")}}, {1, 1, 2, 2}, true},
      {"nearest half_pixel round_prefer_ceil x1.5", {{"mode", String("nearest")}, {"nearest_mode", String("round_prefer_ceil")}},
       {1, 1, 1.5f, 1.5f}, true},
      {"bilinear half_pixel x2", {{"mode", String("linear")}}, {1, 1, 2, 2}, true},
      {"bilinear pytorch_half_pixel x0.5", {{"mode", String("linear")}, {"coordinate_transformation_mode", String("pytorch_half_pixel")}},
       {1, 1, 0.5f, 0.5f}, true},
      // Not oneDNN's definition: the reference kernel.
      {"bilinear align_corners", {{"mode", String("linear")}, {"coordinate_transformation_mode", String("align_corners")}},
       {1, 1, 2, 2}, false},
      {"nearest asymmetric floor x0.5", {{"mode", String("nearest")}, {"coordinate_transformation_mode", String("asymmetric")},
                                          {"nearest_mode", String("floor")}}, {1, 1, 0.5f, 0.5f}, false},
      {"scales whose output rounds down", {{"mode", String("linear")}}, {1, 1, 1.7f, 1.7f}, false},
  };
  for (const Case& c : cases) {
    Tensor empty_roi;
    (void)AllocateOutputAs<float>(&empty_roi, DataType::kFp32, {0});
    std::vector<Tensor> inputs{Random({2, 3, 6, 8}, 1), empty_roi, Floats(c.scales)};
    Comparison result = ExpectSameAsReference(OneNode("Resize", 3, c.attributes), inputs);
    EXPECT_EQ(result.implementation.rfind("onednn:", 0) == 0, c.onednn) << c.name << ": " << result.implementation;
  }
}

TEST(EinsumTest, ImplicitOutputAndLabelsOfTwoSizes) {
  // "ij,jk" without "->" is "ij,jk->ik": a matrix product.
  auto implicit = Session::FromGraph(OneNode("Einsum", 2, {{"equation", String("ij,jk")}}));
  auto matmul = Session::FromGraph(OneNode("MatMul", 2, {}));
  ASSERT_TRUE(implicit.ok() && matmul.ok());
  const std::vector<Tensor> inputs{Random({2, 3}, 1), Random({3, 4}, 2)};
  std::vector<Tensor> a, b;
  ASSERT_TRUE((*implicit)->Run(inputs, &a).ok());
  ASSERT_TRUE((*matmul)->Run(inputs, &b).ok());
  ASSERT_EQ(a[0].shape, (Shape{2, 4}));
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(ValuesOf<float>(a[0])[i], ValuesOf<float>(b[0])[i], 1e-5);
  const std::vector<Tensor> mismatched{Random({2, 3}, 1), Random({4, 4}, 2)};
  Status status = (*implicit)->Run(mismatched, &a);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("label 'j' has two sizes"), std::string::npos) << status.message();
}

TEST(SessionTest, UnsupportedOpsAreListedTogetherAtLoad) {
  Graph g = OneNode("NoSuchOp", 1, {});
  Node second = g.nodes[0];
  second.op_type = "AlsoMissing";
  second.name = "second";
  second.inputs = {g.outputs[0]};
  ValueId out = g.AddValue({.name = "out2"});
  second.outputs = {out};
  g.nodes.push_back(second);
  g.outputs = {out};
  auto session = Session::FromGraph(g);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(session.status().message().find("NoSuchOp (node 'under_test')"), std::string::npos);
  EXPECT_NE(session.status().message().find("AlsoMissing (node 'second')"), std::string::npos);
}

TEST(SessionTest, BadAttributeFailsAtLoadNotAtRun) {
  auto session = Session::FromGraph(OneNode("Conv", 2, {{"group", String("two")}}));
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("group"), std::string::npos);
}

TEST(SessionTest, RunErrorsNameTheNode) {
  auto session = Session::FromGraph(OneNode("MatMul", 2, {}));
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> outputs;
  Status status = (*session)->Run(std::vector<Tensor>{Random({2, 3}, 1), Random({4, 5}, 2)}, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("MatMul 'under_test'"), std::string::npos) << status.message();
}

// The vectorised swish that follows oneDNN convolutions (kernels/vector_math.h): every length
// (vector body and scalar tail), both thread counts, the whole float range and the special values.
TEST(VectorMathTest, SwishMatchesTheFormula) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> wide(-100, 100);
  for (int threads : {1, 2}) {
    ASSERT_TRUE(SetIntraOpThreads(threads) || threads == 1);
    for (int64_t count : {1, 7, 8, 9, 31, 100003}) {
      std::vector<float> values(count);
      for (float& v : values) v = wide(rng);
      if (count > 8) {
        values[0] = 0.0f, values[1] = 88.5f, values[2] = -88.5f, values[3] = 1e-30f;
        values[4] = INFINITY, values[5] = NAN, values[6] = 1e30f;
      }
      std::vector<float> got = values;
      SwishInPlace(got.data(), count);
      for (int64_t i = 0; i < count; ++i) {
        const double x = values[i], want = x / (1.0 + std::exp(-x));
        if (std::isnan(x)) {
          EXPECT_TRUE(std::isnan(got[i]));
        } else if (std::isinf(want)) {
          EXPECT_EQ(got[i], static_cast<float>(want));
        } else {
          // Below x = -87 the result is under 1e-35 (it underflows into denormals in the formula).
          EXPECT_NEAR(got[i], want, 3e-7 * std::fabs(want) + 1e-35) << "x=" << x << " count " << count;
        }
      }
    }
  }
  SetIntraOpThreads(1);
}

TEST(VectorMathTest, ChannelScaleMultipliesEachBlockByItsFactors) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> values(-4, 4);
  for (int threads : {1, 2}) {
    ASSERT_TRUE(SetIntraOpThreads(threads) || threads == 1);
    for (int64_t block : {8, 16, 120}) {  // AVX2's and AVX-512's channel blocks, NHWC's every channel
      for (int64_t pixels : {1, 3, 49, 3000}) {
        const int64_t blocks = 5;
        std::vector<float> x(blocks * pixels * block), factors(blocks * block);
        for (float& v : x) v = values(rng);
        for (float& v : factors) v = values(rng);
        std::vector<float> y(x.size()), in_place = x;
        ScaleChannelBlocks(x.data(), factors.data(), y.data(), blocks, pixels, block);
        ScaleChannelBlocks(in_place.data(), factors.data(), in_place.data(), blocks, pixels, block);
        for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
          const float want = x[i] * factors[(i / (pixels * block)) * block + i % block];
          ASSERT_EQ(y[i], want) << "block " << block << " pixels " << pixels << " at " << i;
          ASSERT_EQ(in_place[i], want) << "in place, block " << block << " pixels " << pixels << " at " << i;
        }
      }
    }
  }
  SetIntraOpThreads(1);
}

// A Swish after a convolution runs as that pass, after oneDNN's own post-ops: a residual Add and
// the Swish on a blocked chain whose 5 channels pad to a block of 8.
TEST(VectorMathTest, ConvolutionWithResidualThenSwishMatchesTheReference) {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w1", Random({5, 3, 3, 3}, 1))
                .Constant("w2", Random({5, 5, 3, 3}, 2))
                .Op("Conv", {"x", "w1"}, {"r"}, {{"pads", Ints({1, 1, 1, 1})}})
                .Op("Conv", {"r", "w2"}, {"c"}, {{"pads", Ints({1, 1, 1, 1})}})
                .Op("Add", {"c", "r"}, {"sum"})
                .Op("Sigmoid", {"sum"}, {"gate"})
                .Op("Mul", {"sum", "gate"}, {"s"})
                .Op("MaxPool", {"s"}, {"y"}, {{"kernel_shape", Ints({2, 2})}})
                .Output("y")
                .graph();
  ExpectSameAsReference(g, {Random({2, 3, 8, 8}, 3, -3, 3)});
  auto session = Session::FromGraph(g);
  ASSERT_TRUE(session.ok());
  for (const Node& node : (*session)->graph().nodes) {
    EXPECT_TRUE(node.op_type == "Conv" || node.op_type == "MaxPool" || node.op_type == "Reorder") << node.op_type;
  }
}

}  // namespace
}  // namespace inferd::runtime
