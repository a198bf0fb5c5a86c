// The memory plan: arena runs give the reference's outputs for every input shape, views keep
// their buffer alive, computed weights in the arena are not mistaken for last run's, and outputs
// written over a dead input's buffer (Kernel::OutputMayReuseInput) only where that is safe.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/run_context.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;

// The memory plan: later runs put intermediates in one arena smaller than their sum, views
// (Reshape) keep their buffer alive as long as they are read, and each input shape set gets its
// own plan.
TEST(MemoryPlanTest, ArenaRunsGiveTheSameOutputsForEveryShape) {
  Tensor shape;
  int64_t* dims = AllocateOutputAs<int64_t>(&shape, DataType::kInt64, {2}).value();
  dims[0] = 0;
  dims[1] = -1;
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("shape", shape)
                .Op("Exp", {"x"}, {"a"})
                .Op("Reshape", {"a", "shape"}, {"view"})  // a view of a: a's buffer must outlive it
                .Op("Tanh", {"x"}, {"b"})
                .Op("Sigmoid", {"b"}, {"c"})
                .Op("Neg", {"c"}, {"d"})
                .Op("Abs", {"d"}, {"e"})
                .Op("Flatten", {"e"}, {"f"})
                .Op("Add", {"f", "view"}, {"y"})
                .Output("y")
                .graph();
  auto reference = Session::FromGraph(g, {.registry = &KernelRegistry::Reference(), .optimize = false});
  auto session = Session::FromGraph(g);
  ASSERT_TRUE(reference.ok() && session.ok());
  for (int64_t batch : {2, 5, 2, 1, 5}) {
    std::vector<Tensor> inputs{Random({batch, 3, 4}, static_cast<uint32_t>(batch))}, expected, actual;
    ASSERT_TRUE((*reference)->Run(inputs, &expected).ok());
    for (int run = 0; run < 2; ++run) ASSERT_TRUE((*session)->Run(inputs, &actual).ok());
    ASSERT_EQ(actual[0].shape, expected[0].shape);
    for (int64_t i = 0; i < ElementsOf(expected[0]); ++i) {
      ASSERT_NEAR(ValuesOf<float>(actual[0])[i], ValuesOf<float>(expected[0])[i], 1e-5) << "batch " << batch;
    }
    auto plan = (*session)->memory_plan({inputs[0].shape});
    ASSERT_TRUE(plan.has_value());
    EXPECT_LT(plan->arena_bytes, plan->intermediate_bytes);
    EXPECT_GE(plan->planned_values, 4);
  }
}

// Runs `graph` (one input: [batch] + item_shape) three times per batch size, the first recording
// the memory plan and the others in its arena, against the reference kernels; checks how many
// outputs the plan wrote over an input. Returns the session (null on a failure).
std::unique_ptr<Session> ExpectArenaRunsMatchReference(const Graph& graph, const Shape& item_shape, int reused_buffers) {
  auto reference = Session::FromGraph(graph, {.registry = &KernelRegistry::Reference(), .optimize = false});
  auto session = Session::FromGraph(graph);
  if (!reference.ok() || !session.ok()) {
    ADD_FAILURE() << "the graph does not load";
    return nullptr;
  }
  for (int64_t batch : {1, 3, 1}) {
    Shape shape = item_shape;
    shape.insert(shape.begin(), batch);
    std::vector<Tensor> inputs{Random(shape, static_cast<uint32_t>(batch) + 7)}, expected, actual;
    EXPECT_TRUE((*reference)->Run(inputs, &expected).ok());
    for (int run = 0; run < 3; ++run) {
      EXPECT_TRUE((*session)->Run(inputs, &actual).ok());
      if (actual.empty() || expected.empty() || actual[0].shape != expected[0].shape) {
        ADD_FAILURE() << "batch " << batch << " run " << run << ": no output of the reference's shape";
        return nullptr;
      }
      for (int64_t i = 0; i < ElementsOf(expected[0]); ++i) {
        const float got = ValuesOf<float>(actual[0])[i], want = ValuesOf<float>(expected[0])[i];
        if (std::fabs(got - want) > 1e-4) {
          ADD_FAILURE() << "batch " << batch << " run " << run << " at " << i << ": " << got << " vs " << want;
          return nullptr;
        }
      }
    }
    const auto plan = (*session)->memory_plan({shape});
    EXPECT_TRUE(plan.has_value() && plan->reused_buffers == reused_buffers)
        << "batch " << batch << ": " << (plan ? plan->reused_buffers : -1) << " outputs written over an input";
  }
  return std::move(session).value();
}

// A convolution with a fused residual Add may write its output over the residual's buffer
// (Kernel::OutputMayReuseInput), but only where nothing reads the residual afterwards and the
// convolution does not read it as its source too.
TEST(MemoryPlanTest, ResidualConvWritesOverTheResidualOnlyWhenNothingElseNeedsIt) {
  GraphBuilder b;
  b.Input("x");
  for (char name : std::string("1234567")) b.Constant(std::string("w") + name, Random({8, 8, 3, 3}, name, -0.3f, 0.3f));
  const auto pads = Ints({1, 1, 1, 1});
  b.Op("Tanh", {"x"}, {"t"})
      .Op("Conv", {"t", "w1"}, {"c1"}, {{"pads", pads}})
      .Op("Add", {"c1", "t"}, {"d"})  // t is also the convolution's source: no reuse
      .Op("Conv", {"d", "w2"}, {"c2"}, {{"pads", pads}})
      .Op("Relu", {"c2"}, {"v"})
      .Op("Conv", {"v", "w3"}, {"c3"}, {{"pads", pads}})
      .Op("Add", {"c3", "d"}, {"g"})  // d's last reader: the output takes its buffer
      .Op("Conv", {"g", "w4"}, {"k"}, {{"pads", pads}})
      .Op("Conv", {"k", "w5"}, {"c5"}, {{"pads", pads}})
      .Op("Add", {"c5", "g"}, {"m"})  // g is read again below: no reuse
      .Op("Mul", {"m", "g"}, {"y"})
      .Output("y");
  ExpectArenaRunsMatchReference(b.graph(), {8, 6, 7}, /*reused_buffers=*/1);
}

// Element-wise binary ops may write over an operand of the output's size: the first, or either
// of a commutative op (oneDNN then swaps them); a squeeze-excitation scale on a blocked chain
// (our channel-scale loop) writes over the scaled tensor.
TEST(MemoryPlanTest, BinaryOpsWriteOverAnOperandOfTheOutputsSize) {
  GraphBuilder b;
  b.Input("x");
  b.Constant("bias", Random({1, 8, 1, 1}, 3));
  b.Constant("w1", Random({8, 8, 3, 3}, 4, -0.3f, 0.3f));
  b.Constant("w2", Random({8, 8, 1, 1}, 5, -0.3f, 0.3f));
  b.Constant("w3", Random({8, 8, 1, 1}, 6, -0.3f, 0.3f));
  const auto pads = Ints({1, 1, 1, 1});
  b.Op("Tanh", {"x"}, {"t"})
      .Op("Exp", {"x"}, {"e"})
      .Op("Sub", {"t", "bias"}, {"s"})     // over t (the first operand)
      .Op("Mul", {"e", "s"}, {"m"})        // over s (e is read again below): oneDNN gets them swapped
      .Op("Div", {"bias", "m"}, {"q"})     // not commutative, m second: no reuse
      .Op("Add", {"q", "e"}, {"d"})        // over q
      .Op("Conv", {"d", "w1"}, {"c"}, {{"pads", pads}})  // a blocked chain from here
      .Op("GlobalAveragePool", {"c"}, {"pooled"})
      .Op("Conv", {"pooled", "w2"}, {"squeezed"})
      .Op("Sigmoid", {"squeezed"}, {"scale"})
      .Op("Mul", {"scale", "c"}, {"excited"})  // over c, the blocked tensor it scales
      .Op("Conv", {"excited", "w3"}, {"y"})
      .Output("y");
  auto session = ExpectArenaRunsMatchReference(b.graph(), {8, 5, 6}, /*reused_buffers=*/4);
  ASSERT_TRUE(session);
  bool scaled_by_our_loop = false;
  for (size_t n = 0; n < session->graph().nodes.size(); ++n) {
    if (session->kernel(n).Implementation() == "inferd:channel_scale") scaled_by_our_loop = true;
  }
  EXPECT_TRUE(scaled_by_our_loop);
}

TEST(MemoryPlanTest, ComputedWeightsInTheArenaAreNotMistakenForLastRunsWeights) {
  // The Conv caches weights reordered for oneDNN per weights buffer; computed weights come back
  // at the same arena address every run with new contents.
  Graph g = GraphBuilder()
                .Input("x")
                .Input("w")
                .Op("Neg", {"w"}, {"negated"})
                .Op("Conv", {"x", "negated"}, {"y"}, {{"pads", Ints({1, 1, 1, 1})}})
                .Output("y")
                .graph();
  auto reference = Session::FromGraph(g, {.registry = &KernelRegistry::Reference(), .optimize = false});
  auto session = Session::FromGraph(g);
  ASSERT_TRUE(reference.ok() && session.ok());
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    std::vector<Tensor> inputs{Random({1, 16, 6, 6}, 100), Random({16, 16, 3, 3}, seed)}, expected, actual;
    ASSERT_TRUE((*reference)->Run(inputs, &expected).ok());
    ASSERT_TRUE((*session)->Run(inputs, &actual).ok());
    for (int64_t i = 0; i < ElementsOf(expected[0]); ++i) {
      ASSERT_NEAR(ValuesOf<float>(actual[0])[i], ValuesOf<float>(expected[0])[i], 1e-3) << "run " << seed;
    }
  }
}

// Kernels' temporary buffers (a reorder's source and destination) live in one scratch buffer per
// session, as large as the largest request: kept per kernel and shape, they grew with every batch
// size a model ran.
TEST(ScratchTest, OneBufferAsLargeAsTheLargestRequestWithDisjointAlignedParts) {
  ScratchBuffer scratch;
  const RunScope scope({.scratch = &scratch});
  EXPECT_EQ(&KernelScratch(), &scratch);
  dnnl::memory a = dnnl_kernels::ScratchMemory(dnnl_kernels::PlainDesc({10}));
  dnnl::memory b = dnnl_kernels::ScratchMemory(dnnl_kernels::PlainDesc({3, 7}));
  dnnl::memory unused;
  dnnl_kernels::BindScratch({&a, &unused, &b});
  const auto* first = static_cast<uint8_t*>(a.get_data_handle());
  const auto* second = static_cast<uint8_t*>(b.get_data_handle());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  EXPECT_EQ(second - first, 64);  // 40 bytes, rounded up to the alignment
  EXPECT_EQ(scratch.capacity(), 64u + 128u);  // each part rounded up to the alignment
  dnnl_kernels::BindScratch({&a});  // a smaller request reuses the buffer
  EXPECT_EQ(a.get_data_handle(), static_cast<const void*>(first));
  EXPECT_EQ(scratch.capacity(), 64u + 128u);  // each part rounded up to the alignment
  std::memset(scratch.Get(1000), 1, 1000);  // grows (ASan checks the bound)
  EXPECT_EQ(scratch.capacity(), 1000u);
}

// What a session says it holds, which the server's memory admission multiplies by the instances
// still to load: the weights as loaded, and the arena once a shape set is planned.
TEST(MemoryPlanTest, SessionMemoryCountsTheWeightsAndTheArena) {
  const Tensor weights = Random({256, 256}, 7);
  Graph g = GraphBuilder()
                .Input("x")
                .Constant("w", weights)
                .Op("MatMul", {"x", "w"}, {"a"})
                .Op("Tanh", {"a"}, {"b"})
                .Op("Sigmoid", {"b"}, {"c"})
                .Op("Neg", {"c"}, {"y"})
                .Output("y")
                .graph();
  auto session = Session::FromGraph(g);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ((*session)->memory().weight_bytes, weights.byte_size);
  EXPECT_EQ((*session)->memory().arena_bytes, 0u);  // nothing planned before the first run
  std::vector<Tensor> inputs{Random({8, 256}, 1)}, outputs;
  for (int run = 0; run < 2; ++run) ASSERT_TRUE((*session)->Run(inputs, &outputs).ok());
  const SessionMemory memory = (*session)->memory();
  auto plan = (*session)->memory_plan({inputs[0].shape});
  ASSERT_TRUE(plan.has_value());
  EXPECT_GE(memory.arena_bytes, plan->arena_bytes);
  EXPECT_GE(memory.arena_bytes, 8u * 256 * sizeof(float));  // at least one intermediate lives there
  EXPECT_EQ(memory.weight_bytes, weights.byte_size);
}

}  // namespace
}  // namespace inferd::runtime
