// Each optimizer pass: the graph gives the same outputs before and after, and has the shape the
// pass promises (fewer nodes, post-ops on the right node), and leaves alone what it must not touch.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/ir/shape_inference.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;

// Runs the graph unoptimized on the reference kernels and optimized on the fast ones.
std::unique_ptr<Session> ExpectSameOutputs(const Graph& graph, const std::vector<Tensor>& inputs) {
  auto plain = Session::FromGraph(graph, {.registry = &KernelRegistry::Reference(), .optimize = false});
  auto optimized = Session::FromGraph(graph);
  EXPECT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(optimized.ok()) << optimized.status().ToString();
  if (!plain.ok() || !optimized.ok()) return nullptr;
  std::vector<Tensor> expected, actual;
  EXPECT_TRUE((*plain)->Run(inputs, &expected).ok());
  // Twice: the first run records allocations, the second runs in the memory plan's arena.
  for (int run = 0; run < 2; ++run) {
    Status status = (*optimized)->Run(inputs, &actual);
    EXPECT_TRUE(status.ok()) << status.ToString();
  }
  EXPECT_EQ(expected.size(), actual.size());
  for (size_t o = 0; o < std::min(expected.size(), actual.size()); ++o) {
    EXPECT_EQ(expected[o].shape, actual[o].shape);
    if (expected[o].shape != actual[o].shape) continue;
    int mismatches = 0;
    for (int64_t i = 0; i < ElementsOf(expected[o]); ++i) {
      const float e = ValuesOf<float>(expected[o])[i], a = ValuesOf<float>(actual[o])[i];
      if (std::abs(a - e) > 1e-4 * std::max(1.0f, std::abs(e)) && mismatches++ < 3) {
        ADD_FAILURE() << "output " << o << " element " << i << ": " << a << ", expected " << e;
      }
    }
  }
  return std::move(optimized).value();
}

int Count(const Session& session, const std::string& op) {
  int n = 0;
  for (const Node& node : session.graph().nodes) n += node.op_type == op;
  return n;
}

std::vector<std::string> PostOpsOf(const Session& session, const std::string& op) {
  for (const Node& node : session.graph().nodes) {
    if (node.op_type == op && node.Find("_post_ops")) return node.Find("_post_ops")->strings;
  }
  return {};
}

TEST(PassesTest, ConvBatchNormReluBecomesOneConv) {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w", Random({6, 3, 3, 3}, 1))
                .Constant("b", Random({6}, 2))
                .Constant("scale", Random({6}, 3, 0.5, 1.5))
                .Constant("shift", Random({6}, 4))
                .Constant("mean", Random({6}, 5))
                .Constant("var", Random({6}, 6, 0.5, 2))
                .Op("Conv", {"x", "w", "b"}, {"c"}, {{"pads", Ints({1, 1, 1, 1})}})
                .Op("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"bn"})
                .Op("Relu", {"bn"}, {"y"})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({2, 3, 7, 7}, 7)});
  ASSERT_TRUE(session);
  EXPECT_EQ(session->graph().nodes.size(), 1u);
  EXPECT_EQ(PostOpsOf(*session, "Conv"), std::vector<std::string>{"Relu"});
  EXPECT_EQ(session->kernel(0).Implementation().rfind("onednn:", 0), 0u) << session->kernel(0).Implementation();
}

TEST(PassesTest, ResidualBlockFusesAddThenRelu) {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w1", Random({4, 4, 3, 3}, 1))
                .Constant("w2", Random({4, 4, 3, 3}, 2))
                .Op("Conv", {"x", "w1"}, {"c1"}, {{"pads", Ints({1, 1, 1, 1})}})
                .Op("Relu", {"c1"}, {"r1"})
                .Op("Conv", {"r1", "w2"}, {"c2"}, {{"pads", Ints({1, 1, 1, 1})}})
                .Op("Add", {"c2", "x"}, {"sum"})
                .Op("Relu", {"sum"}, {"y"})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({1, 4, 6, 6}, 3)});
  ASSERT_TRUE(session);
  EXPECT_EQ(session->graph().nodes.size(), 2u);
  EXPECT_EQ(session->graph().nodes[1].op_type, "Conv");
  EXPECT_EQ(session->graph().nodes[1].Find("_post_ops")->strings, (std::vector<std::string>{"Add", "Relu"}));
  EXPECT_EQ(session->kernel(1).Implementation().rfind("onednn:", 0), 0u) << session->kernel(1).Implementation();
}

TEST(PassesTest, BroadcastResidualStillGivesTheRightAnswer) {
  // The residual is larger than the MatMul output: the fused op must broadcast, not truncate.
  Graph g = GraphBuilder()
                .Input("a")
                .Input("r")
                .Constant("b", Random({4, 5}, 1))
                .Op("MatMul", {"a", "b"}, {"m"})
                .Op("Add", {"r", "m"}, {"y"})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({1, 4}, 2), Random({3, 5}, 3)});
  ASSERT_TRUE(session);
  EXPECT_EQ(Count(*session, "Add"), 0);
}

TEST(PassesTest, GemmIdentityClipFusesAcrossTheIdentity) {
  Tensor lo, hi;
  *AllocateOutputAs<float>(&lo, DataType::kFp32, {}).value() = -0.2f;
  *AllocateOutputAs<float>(&hi, DataType::kFp32, {}).value() = 0.3f;
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w", Random({5, 8}, 1))
                .Constant("c", Random({5}, 2))
                .Constant("lo", lo)
                .Constant("hi", hi)
                .Op("Gemm", {"x", "w", "c"}, {"g"}, {{"transB", Int(1)}})
                .Op("Identity", {"g"}, {"i"})
                .Op("Clip", {"i", "lo", "hi"}, {"y"})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({3, 8}, 3)});
  ASSERT_TRUE(session);
  EXPECT_EQ(session->graph().nodes.size(), 1u);
  EXPECT_EQ(PostOpsOf(*session, "Gemm"), std::vector<std::string>{"Clip"});
}

TEST(PassesTest, ConstantSubgraphsFold) {
  Tensor shape;
  int64_t* dims = AllocateOutputAs<int64_t>(&shape, DataType::kInt64, {2}).value();
  dims[0] = 2;
  dims[1] = 6;
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("k", Random({2, 6}, 1))
                .Constant("shape", shape)
                .Op("Exp", {"k"}, {"ek"})
                .Op("Reshape", {"x", "shape"}, {"flat"})
                .Op("Mul", {"flat", "ek"}, {"y"})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({3, 4}, 2)});
  ASSERT_TRUE(session);
  EXPECT_EQ(Count(*session, "Exp"), 0);
  EXPECT_EQ(session->graph().nodes.size(), 2u);
}

TEST(PassesTest, SharedOutputsAndGraphOutputsAreNotFused) {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w", Random({3, 3, 1, 1}, 1))
                .Op("Conv", {"x", "w"}, {"c"})
                .Op("Relu", {"c"}, {"r"})
                .Op("Sigmoid", {"c"}, {"s"})  // c has two readers
                .Op("Add", {"r", "s"}, {"y"})
                .Output("y")
                .Output("c")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({1, 3, 4, 4}, 2)});
  ASSERT_TRUE(session);
  EXPECT_EQ(session->graph().nodes.size(), 4u);
  EXPECT_TRUE(PostOpsOf(*session, "Conv").empty());
}

TEST(PassesTest, ResidualComputedAfterTheOpIsNotFused) {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w", Random({2, 2, 1, 1}, 1))
                .Op("Conv", {"x", "w"}, {"c"})
                .Op("Tanh", {"x"}, {"t"})  // computed between the Conv and the Add
                .Op("Add", {"c", "t"}, {"y"})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({1, 2, 3, 3}, 2)});
  ASSERT_TRUE(session);
  EXPECT_EQ(Count(*session, "Add"), 1);
}

TEST(PassesTest, SigmoidTimesInputBecomesSwishFusedIntoTheConv) {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w", Random({5, 3, 3, 3}, 1))
                .Op("Conv", {"x", "w"}, {"c"}, {{"pads", Ints({1, 1, 1, 1})}})
                .Op("Sigmoid", {"c"}, {"s"})
                .Op("Mul", {"s", "c"}, {"y"})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({2, 3, 6, 6}, 2, -4, 4)});
  ASSERT_TRUE(session);
  EXPECT_EQ(session->graph().nodes.size(), 1u);
  EXPECT_EQ(PostOpsOf(*session, "Conv"), std::vector<std::string>{"Swish"});
}

TEST(PassesTest, HardSigmoidGateBecomesHardSwishAndAGateAloneFusesIntoTheConv) {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w", Random({4, 4, 1, 1}, 1))
                .Op("HardSigmoid", {"x"}, {"gate"}, {{"alpha", Float(1.0f / 6)}, {"beta", Float(0.5f)}})
                .Op("Mul", {"x", "gate"}, {"hs"})
                .Op("Conv", {"hs", "w"}, {"c"})
                .Op("HardSigmoid", {"c"}, {"y"}, {{"alpha", Float(0.3f)}, {"beta", Float(0.4f)}})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({1, 4, 5, 5}, 2, -5, 5)});
  ASSERT_TRUE(session);
  EXPECT_EQ(Count(*session, "HardSwish"), 1);
  EXPECT_EQ(Count(*session, "Mul"), 0);
  EXPECT_EQ(PostOpsOf(*session, "Conv"), std::vector<std::string>{"HardSigmoid"});
}

TEST(PassesTest, SwishWithoutAConvRunsOnOneDnn) {
  Graph g = GraphBuilder()
                .Input("x")
                .Op("Relu", {"x"}, {"r"})
                .Op("Sigmoid", {"r"}, {"s"})
                .Op("Mul", {"r", "s"}, {"y"})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({2, 3, 7}, 2, -6, 6)});
  ASSERT_TRUE(session);
  ASSERT_EQ(session->graph().nodes.size(), 2u);
  EXPECT_EQ(session->graph().nodes[1].op_type, "Swish");
  EXPECT_EQ(session->kernel(1).Implementation().rfind("onednn:", 0), 0u) << session->kernel(1).Implementation();
}

Tensor Scalar(float value) {
  Tensor t;
  *AllocateOutputAs<float>(&t, DataType::kFp32, {}).value() = value;
  return t;
}

TEST(PassesTest, ExactGeluBecomesOneOpFusedIntoTheMatMul) {
  for (bool half_first : {false, true}) {
    GraphBuilder b;
    b.Input("x")
        .Constant("w", Random({6, 8}, 1))
        .Constant("sqrt2", Scalar(1.4142135f))
        .Constant("one", Scalar(1.0f))
        .Constant("half", Scalar(0.5f))
        .Op("MatMul", {"x", "w"}, {"h"})
        .Op("Div", {"h", "sqrt2"}, {"scaled"})
        .Op("Erf", {"scaled"}, {"erf"})
        .Op("Add", {"erf", "one"}, {"shifted"});
    if (half_first) {
      b.Op("Mul", {"h", "half"}, {"halved"}).Op("Mul", {"halved", "shifted"}, {"y"});
    } else {
      b.Op("Mul", {"h", "shifted"}, {"gated"}).Op("Mul", {"gated", "half"}, {"y"});
    }
    auto session = ExpectSameOutputs(b.Output("y").graph(), {Random({2, 5, 6}, 2, -3, 3)});
    ASSERT_TRUE(session);
    EXPECT_EQ(session->graph().nodes.size(), 1u) << "half first: " << half_first;
    EXPECT_EQ(PostOpsOf(*session, "MatMul"), std::vector<std::string>{"Gelu"});
  }
}

TEST(PassesTest, GeluLookalikesAreLeftAlone) {
  // 0.4 instead of 0.5: not a GELU.
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("sqrt2", Scalar(1.4142135f))
                .Constant("one", Scalar(1.0f))
                .Constant("other", Scalar(0.4f))
                .Op("Div", {"x", "sqrt2"}, {"scaled"})
                .Op("Erf", {"scaled"}, {"erf"})
                .Op("Add", {"erf", "one"}, {"shifted"})
                .Op("Mul", {"x", "shifted"}, {"gated"})
                .Op("Mul", {"gated", "other"}, {"y"})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({3, 4}, 2)});
  ASSERT_TRUE(session);
  EXPECT_EQ(Count(*session, "Erf"), 1);
  EXPECT_EQ(Count(*session, "Gelu"), 0);
}

// LayerNorm spelled out as exporters before opset 17 write it.
Graph SpelledOutLayerNorm(int opset, bool square_with_mul) {
  GraphBuilder b;
  b.Input("x")
      .Constant("two", Scalar(2.0f))
      .Constant("eps", Scalar(1e-5f))
      .Constant("gamma", Random({6}, 1))
      .Constant("beta", Random({6}, 2))
      .Op("ReduceMean", {"x"}, {"mean"}, {{"axes", Ints({-1})}})
      .Op("Sub", {"x", "mean"}, {"centered"});
  if (square_with_mul) {
    b.Op("Mul", {"centered", "centered"}, {"squared"});
  } else {
    b.Op("Pow", {"centered", "two"}, {"squared"});
  }
  b.Op("ReduceMean", {"squared"}, {"variance"}, {{"axes", Ints({-1})}})
      .Op("Add", {"variance", "eps"}, {"shifted"})
      .Op("Sqrt", {"shifted"}, {"deviation"})
      .Op("Div", {"centered", "deviation"}, {"normalized"})
      .Op("Mul", {"normalized", "gamma"}, {"scaled"})
      .Op("Add", {"beta", "scaled"}, {"y"})
      .Output("y");
  Graph g = b.graph();
  g.opset = opset;
  return g;
}

TEST(PassesTest, SpelledOutLayerNormBecomesOneOp) {
  for (auto [opset, square_with_mul] : std::vector<std::pair<int, bool>>{{13, false}, {17, true}}) {
    auto session = ExpectSameOutputs(SpelledOutLayerNorm(opset, square_with_mul), {Random({2, 3, 6}, 3, -2, 2)});
    ASSERT_TRUE(session);
    ASSERT_EQ(session->graph().nodes.size(), 1u);
    EXPECT_EQ(session->graph().nodes[0].op_type, "LayerNormalization");
    EXPECT_EQ(session->graph().nodes[0].domain, opset < 17 ? "inferd" : "");
    EXPECT_EQ(session->kernel(0).Implementation().rfind("onednn:", 0), 0u) << session->kernel(0).Implementation();
  }
}

// PyTorch's MultiheadAttention (sequence first): Q, K and V as [S, heads, D], a transpose around
// each, the scale on Q, and the output transposed back.
GraphBuilder ExportedAttention() {
  GraphBuilder b;
  b.Input("q")
      .Input("k")
      .Input("v")
      .Constant("sqrt_d", Scalar(2.0f))
      .Op("Transpose", {"q"}, {"qt"}, {{"perm", Ints({1, 0, 2})}})
      .Op("Div", {"qt", "sqrt_d"}, {"qs"})
      .Op("Transpose", {"k"}, {"kt"}, {{"perm", Ints({1, 2, 0})}})
      .Op("MatMul", {"qs", "kt"}, {"scores"})
      .Op("Softmax", {"scores"}, {"p"}, {{"axis", Int(-1)}})
      .Op("Transpose", {"v"}, {"vt"}, {{"perm", Ints({1, 0, 2})}})
      .Op("MatMul", {"p", "vt"}, {"o"})
      .Op("Transpose", {"o"}, {"y"}, {{"perm", Ints({1, 0, 2})}});
  return b;
}

TEST(PassesTest, ExportedAttentionBecomesOneOpWithItsTransposesAbsorbed) {
  Graph g = ExportedAttention().Output("y").graph();
  // 6 heads: more than one chunk of the oneDNN kernel, with a remainder.
  auto session = ExpectSameOutputs(g, {Random({128, 6, 4}, 1), Random({128, 6, 4}, 2), Random({128, 6, 5}, 3)});
  ASSERT_TRUE(session);
  ASSERT_EQ(session->graph().nodes.size(), 1u);
  const Node& attention = session->graph().nodes[0];
  EXPECT_EQ(attention.op_type, "Attention");
  EXPECT_FLOAT_EQ(attention.Float("scale", 0).value(), 0.5f);
  EXPECT_EQ(attention.Ints("k_perm").value(), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(attention.Ints("out_perm").value(), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(session->kernel(0).Implementation().rfind("onednn:attention", 0), 0u) << session->kernel(0).Implementation();
}

TEST(PassesTest, AttentionWithAMaskAndTheScaleOnTheScores) {
  // [batch, heads, S, D] with K transposed by the exporter, a padding mask over the keys.
  Graph g = GraphBuilder()
                .Input("q")
                .Input("k")
                .Input("v")
                .Input("mask")
                .Constant("scale", Scalar(0.25f))
                .Op("Transpose", {"k"}, {"kt"}, {{"perm", Ints({0, 1, 3, 2})}})
                .Op("MatMul", {"q", "kt"}, {"raw"})
                .Op("Mul", {"scale", "raw"}, {"scaled"})
                .Op("Add", {"scaled", "mask"}, {"masked"})
                .Op("Softmax", {"masked"}, {"p"}, {{"axis", Int(3)}})
                .Op("MatMul", {"p", "v"}, {"y"})
                .Output("y")
                .graph();
  g.values[static_cast<size_t>(*g.FindValue("masked"))].shape = std::vector<Dim>(4);  // rank 4: axis 3 is the last
  auto session = ExpectSameOutputs(
      g, {Random({2, 3, 5, 8}, 1), Random({2, 3, 7, 8}, 2), Random({2, 3, 7, 4}, 3), Random({2, 1, 1, 7}, 4, -3, 0)});
  ASSERT_TRUE(session);
  ASSERT_EQ(session->graph().nodes.size(), 1u);
  EXPECT_EQ(session->graph().nodes[0].inputs.size(), 4u);
  EXPECT_EQ(session->kernel(0).Implementation().rfind("onednn:attention", 0), 0u) << session->kernel(0).Implementation();
}

TEST(PassesTest, AttentionLookalikesAreLeftAlone) {
  // Softmax over another axis.
  Graph other_axis = ExportedAttention().Output("y").graph();
  for (Node& node : other_axis.nodes) {
    if (node.op_type == "Softmax") node.attributes["axis"] = Int(1);
  }
  auto session = ExpectSameOutputs(other_axis, {Random({4, 2, 3}, 1), Random({4, 2, 3}, 2), Random({4, 2, 3}, 3)});
  ASSERT_TRUE(session);
  EXPECT_EQ(Count(*session, "Attention"), 0);
  // The scores are also a graph output: they must stay.
  Graph shared = ExportedAttention().Output("y").Output("scores").graph();
  session = ExpectSameOutputs(shared, {Random({4, 2, 3}, 1), Random({4, 2, 3}, 2), Random({4, 2, 3}, 3)});
  ASSERT_TRUE(session);
  EXPECT_EQ(Count(*session, "Attention"), 0);
  EXPECT_EQ(Count(*session, "Softmax"), 1);
}

Tensor Int64s(std::vector<int64_t> values, bool scalar = false) {
  Tensor t;
  int64_t* data = AllocateOutputAs<int64_t>(&t, DataType::kInt64, scalar ? Shape{} : Shape{static_cast<int64_t>(values.size())}).value();
  std::copy(values.begin(), values.end(), data);
  return t;
}

void SetShape(Graph* g, const std::string& name, std::vector<Dim> dims) {
  g->values[static_cast<size_t>(*g->FindValue(name))].shape = std::move(dims);
}

std::string InferredShape(const Graph& g, const InferredShapes& inferred, const std::string& name) {
  const auto& shape = inferred.shapes[static_cast<size_t>(*g.FindValue(name))];
  return shape ? DimsToString(*shape) : "none";
}

// The shape arithmetic PyTorch exports around a multi-head reshape, on a symbolic batch:
//   t = x.transpose(0, 1); t.reshape(t.shape[0], t.shape[1] * 2, -1)
Graph ExportedReshape() {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("zero", Int64s({0}, true))
                .Constant("one", Int64s({1}, true))
                .Constant("two", Int64s({2}, true))
                .Constant("axes", Int64s({0}))
                .Constant("rest", Int64s({-1}))
                .Op("Transpose", {"x"}, {"t"}, {{"perm", Ints({1, 0, 2})}})
                .Op("Shape", {"t"}, {"shape"})
                .Op("Gather", {"shape", "zero"}, {"rows"})
                .Op("Gather", {"shape", "one"}, {"batch"})
                .Op("Mul", {"batch", "two"}, {"batch2"})
                .Op("Unsqueeze", {"rows", "axes"}, {"rows1"})
                .Op("Unsqueeze", {"batch2", "axes"}, {"batch21"})
                .Op("Concat", {"rows1", "batch21", "rest"}, {"target"}, {{"axis", Int(0)}})
                .Op("Reshape", {"t", "target"}, {"y"})
                .Output("y")
                .graph();
  SetShape(&g, "x", {Dim{.symbol = "batch"}, Dim{.value = 4}, Dim{.value = 6}});
  return g;
}

TEST(ShapeInferenceTest, SymbolicBatchFlowsThroughShapeArithmetic) {
  const Graph g = ExportedReshape();
  const InferredShapes inferred = InferShapes(g);
  EXPECT_EQ(InferredShape(g, inferred, "t"), "[4,batch,6]");
  EXPECT_EQ(ContentsToString(*inferred.contents[*g.FindValue("target")]), "[4,batch*2,-1]");
  EXPECT_EQ(InferredShape(g, inferred, "y"), "[4,batch*2,3]");
  EXPECT_EQ(InferredShape(g, inferred, "rows"), "[]");
}

TEST(ShapeInferenceTest, ConvPoolFlattenAndReshapeMinusOne) {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w", Random({8, 3, 3, 3}, 1))
                .Constant("target", Int64s({0, -1}))
                .Op("Conv", {"x", "w"}, {"c"}, {{"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}})
                .Op("MaxPool", {"c"}, {"p"}, {{"kernel_shape", Ints({2, 2})}, {"strides", Ints({2, 2})}})
                .Op("Flatten", {"p"}, {"f"})
                .Op("Reshape", {"c", "target"}, {"r"})
                .Op("ReduceMean", {"c"}, {"m"}, {{"axes", Ints({2, 3})}, {"keepdims", Int(0)}})
                .Output("f")
                .graph();
  SetShape(&g, "x", {Dim{.symbol = "n"}, Dim{.value = 3}, Dim{.value = 10}, Dim{.value = 10}});
  const InferredShapes inferred = InferShapes(g);
  EXPECT_EQ(InferredShape(g, inferred, "c"), "[n,8,5,5]");
  EXPECT_EQ(InferredShape(g, inferred, "p"), "[n,8,2,2]");
  EXPECT_EQ(InferredShape(g, inferred, "f"), "[n,32]");
  EXPECT_EQ(InferredShape(g, inferred, "r"), "[n,200]");
  EXPECT_EQ(InferredShape(g, inferred, "m"), "[n,8]");
}

TEST(ShapeInferenceTest, WhatItCannotDecideStaysUnknown) {
  // Two different symbols broadcast: either could be 1.
  Graph g = GraphBuilder().Input("a").Input("b").Op("Add", {"a", "b"}, {"y"}).Output("y").graph();
  SetShape(&g, "a", {Dim{.symbol = "p"}, Dim{.value = 3}});
  SetShape(&g, "b", {Dim{.symbol = "q"}, Dim{.value = 1}});
  const InferredShapes inferred = InferShapes(g);
  EXPECT_EQ(InferredShape(g, inferred, "y"), "[?,3]");
}

TEST(PassesTest, ShapeArithmeticFoldsExceptWhatTheBatchReaches) {
  const Graph g = ExportedReshape();
  // Batch 1 and 3 through the same session: only the batch-dependent part may stay.
  auto session = ExpectSameOutputs(g, {Random({1, 4, 6}, 1)});
  ASSERT_TRUE(session);
  std::vector<Tensor> expected, actual;
  auto plain = Session::FromGraph(g, {.registry = &KernelRegistry::Reference(), .optimize = false});
  ASSERT_TRUE(plain.ok());
  const std::vector<Tensor> batch3{Random({3, 4, 6}, 2)};
  ASSERT_TRUE((*plain)->Run(batch3, &expected).ok());
  ASSERT_TRUE(session->Run(batch3, &actual).ok());
  EXPECT_EQ(actual[0].shape, (Shape{4, 6, 3}));
  EXPECT_EQ(actual[0].shape, expected[0].shape);
  // Left: Shape -> Gather(batch) -> Mul -> Unsqueeze -> Concat -> Reshape, and the Transpose.
  EXPECT_EQ(Count(*session, "Gather"), 1);
  EXPECT_EQ(Count(*session, "Shape"), 1);
  EXPECT_EQ(session->graph().nodes.size(), 7u);
}

TEST(PassesTest, AStaleIntermediateShapeIsNotFolded) {
  // The model says r is [2, 1] (from an export with one non-zero), but NonZero's output depends on
  // the data; NonZero has no shape rule, so only that stale value_info could have given r a shape.
  Graph g = GraphBuilder().Input("x").Op("NonZero", {"x"}, {"r"}).Op("Shape", {"r"}, {"shape"}).Output("shape").graph();
  SetShape(&g, "x", {Dim{.symbol = "batch"}, Dim{.value = 4}});
  SetShape(&g, "r", {Dim{.value = 2}, Dim{.value = 1}});
  auto session = Session::FromGraph(g);
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> outputs;
  const std::vector<Tensor> twelve_non_zeros{Random({3, 4}, 1, 1, 2)};
  ASSERT_TRUE((*session)->Run(twelve_non_zeros, &outputs).ok());
  EXPECT_EQ(ValuesOf<int64_t>(outputs[0])[1], 12);
}

TEST(PassesTest, InputsMustBindASymbolToOneSize) {
  Graph g = GraphBuilder().Input("a").Input("b").Op("Add", {"a", "b"}, {"y"}).Output("y").graph();
  SetShape(&g, "a", {Dim{.symbol = "batch"}, Dim{.value = 2}});
  SetShape(&g, "b", {Dim{.symbol = "batch"}, Dim{.value = 2}});
  auto session = Session::FromGraph(g);
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> outputs;
  std::vector<Tensor> mismatched{Random({1, 2}, 1), Random({3, 2}, 2)};
  Status status = (*session)->Run(mismatched, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("dim 'batch' is 1 in input 'a' but 3 in input 'b'"), std::string::npos) << status.message();
  std::vector<Tensor> matched{Random({3, 2}, 1), Random({3, 2}, 2)};
  EXPECT_TRUE((*session)->Run(matched, &outputs).ok());
}

TEST(PassesTest, SigmoidWithAnotherReaderStaysASigmoid) {
  Graph g = GraphBuilder()
                .Input("x")
                .Op("Sigmoid", {"x"}, {"s"})
                .Op("Mul", {"x", "s"}, {"m"})
                .Op("Add", {"m", "s"}, {"y"})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({2, 3}, 2)});
  ASSERT_TRUE(session);
  EXPECT_EQ(Count(*session, "Sigmoid"), 1);
  EXPECT_EQ(Count(*session, "Swish"), 0);
}

// A MobileNet-like network with channel counts that are not a multiple of the channel block (so
// blocked tensors carry padding), batch 2: every op between the first Conv and the Flatten keeps
// the blocked layout, and one reorder brings the result back to plain.
TEST(PassesTest, BlockedLayoutsPropagateThroughAChainAndGiveTheSameOutputs) {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w_stem", Random({12, 3, 3, 3}, 1))
                .Constant("b_stem", Random({12}, 2))
                .Constant("w_dw", Random({12, 1, 3, 3}, 3))
                .Constant("w_se1", Random({4, 12, 1, 1}, 4))
                .Constant("w_se2", Random({12, 4, 1, 1}, 5))
                .Constant("w_pw", Random({12, 12, 1, 1}, 6))
                .Constant("scale", Random({12, 1, 1}, 7))
                .Constant("w_fc", Random({5, 12}, 8))
                .Op("Conv", {"x", "w_stem", "b_stem"}, {"stem"}, {{"pads", Ints({1, 1, 1, 1})}, {"strides", Ints({2, 2})}})
                .Op("HardSwish", {"stem"}, {"a0"})
                .Op("Conv", {"a0", "w_dw"}, {"dw"}, {{"pads", Ints({1, 1, 1, 1})}, {"group", Int(12)}})
                .Op("Relu", {"dw"}, {"a1"})
                .Op("GlobalAveragePool", {"a1"}, {"squeeze"})
                .Op("Conv", {"squeeze", "w_se1"}, {"se1"})
                .Op("Relu", {"se1"}, {"se1r"})
                .Op("Conv", {"se1r", "w_se2"}, {"se2"})
                .Op("HardSigmoid", {"se2"}, {"gate"}, {{"alpha", Float(1.0f / 6)}, {"beta", Float(0.5f)}})
                .Op("Mul", {"a1", "gate"}, {"excited"})
                .Op("Conv", {"excited", "w_pw"}, {"pw"})
                .Op("Add", {"pw", "a0"}, {"res"})
                .Op("MaxPool", {"res"}, {"pool"}, {{"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}})
                .Op("Sigmoid", {"pool"}, {"sig"})  // standalone: its input is a pool, not a Conv
                .Op("Mul", {"sig", "scale"}, {"scaled"})  // a constant operand
                .Op("Add", {"scaled", "pool"}, {"both"})  // two blocked operands
                .Op("GlobalAveragePool", {"both"}, {"gap"})
                .Op("Flatten", {"gap"}, {"flat"})
                .Op("Gemm", {"flat", "w_fc"}, {"y"}, {{"transB", Int(1)}})
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({2, 3, 15, 15}, 9)});
  ASSERT_TRUE(session);
  int blocked_nodes = 0;
  for (const Node& node : session->graph().nodes) blocked_nodes += node.Has("_blocked_outputs");
  EXPECT_GE(blocked_nodes, 9);
  EXPECT_EQ(Count(*session, "Reorder"), 1);  // before the Flatten
  for (size_t n = 0; n < session->graph().nodes.size(); ++n) {
    const Node& node = session->graph().nodes[n];
    if (node.Has("_blocked_outputs")) {
      // oneDNN's, or our own fast path on the blocked layout (the channel scale): never the reference.
      EXPECT_NE(session->kernel(n).Implementation(), "reference") << node.Describe();
    }
  }
}

// Inception-style branches joined by a channel Concat stay blocked; channel counts that are not a
// multiple of the block take the plain path and still give the same numbers.
TEST(PassesTest, ChannelConcatOfBlockedBranches) {
  for (auto [left, right, expect_onednn] : std::vector<std::tuple<int64_t, int64_t, bool>>{{16, 32, true}, {12, 20, false}}) {
    Graph g = GraphBuilder()
                  .Input("x")
                  .Constant("wa", Random({left, 3, 3, 3}, 1))
                  .Constant("wb", Random({right, 3, 1, 1}, 2))
                  .Constant("wc", Random({8, left + right, 1, 1}, 3))
                  .Op("Conv", {"x", "wa"}, {"a"}, {{"pads", Ints({1, 1, 1, 1})}})
                  .Op("Relu", {"a"}, {"ra"})
                  .Op("Conv", {"x", "wb"}, {"b"})
                  .Op("Concat", {"ra", "b"}, {"joined"}, {{"axis", Int(1)}})
                  .Op("Conv", {"joined", "wc"}, {"y"})
                  .Output("y")
                  .graph();
    auto session = ExpectSameOutputs(g, {Random({2, 3, 7, 7}, 4)});
    ASSERT_TRUE(session);
    EXPECT_EQ(Count(*session, "Reorder"), 0);
    for (size_t n = 0; n < session->graph().nodes.size(); ++n) {
      if (session->graph().nodes[n].op_type != "Concat") continue;
      EXPECT_TRUE(session->graph().nodes[n].Has("_blocked_outputs"));
      EXPECT_EQ(session->kernel(n).Implementation().rfind("onednn:", 0) == 0, expect_onednn)
          << left << "+" << right << ": " << session->kernel(n).Implementation();
    }
  }
}

TEST(PassesTest, GraphOutputsInsideABlockedChainArePlain) {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w1", Random({10, 3, 3, 3}, 1))
                .Constant("w2", Random({10, 10, 3, 3}, 2))
                .Op("Conv", {"x", "w1"}, {"c1"}, {{"pads", Ints({1, 1, 1, 1})}})
                .Op("Conv", {"c1", "w2"}, {"c2"}, {{"pads", Ints({1, 1, 1, 1})}})
                .Op("Tanh", {"c2"}, {"t"})
                .Op("Mul", {"c2", "c1"}, {"m"})  // c2 has two readers: nothing fuses into its Conv
                .Op("AveragePool", {"m"}, {"y"}, {{"kernel_shape", Ints({2, 2})}})
                .Output("c1")  // read by the next Conv too
                .Output("t")
                .Output("y")
                .graph();
  auto session = ExpectSameOutputs(g, {Random({3, 3, 6, 6}, 9)});
  ASSERT_TRUE(session);
  EXPECT_FALSE(session->graph().nodes[0].Has("_blocked_outputs"));
  EXPECT_TRUE(session->graph().nodes[1].Has("_blocked_outputs"));
}

TEST(PassesTest, ReferenceKernelsGetNoBlockedLayouts) {
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w", Random({4, 3, 3, 3}, 1))
                .Op("Conv", {"x", "w"}, {"c"})
                .Op("Relu", {"c"}, {"r"})
                .Op("Flatten", {"r"}, {"y"})
                .Output("y")
                .graph();
  auto session = Session::FromGraph(g, {.registry = &KernelRegistry::Reference()});
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ(Count(**session, "Reorder"), 0);
  std::vector<Tensor> inputs{Random({1, 3, 5, 5}, 2)}, out;
  EXPECT_TRUE((*session)->Run(inputs, &out).ok());
}

}  // namespace
}  // namespace inferd::runtime
