// A session keeps at most SessionOptions::max_shape_sets input shape sets prepared: a new one
// beyond them forgets the least recently run, and the kernels drop what only it used
// (kernels/shape_plans.h), so what a session holds does not grow with every shape it has seen.
#include <gtest/gtest.h>

#include "runtime/kernels/shape_plans.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/run_context.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;

int RunAs(ShapeSetId shape_set, ShapePlans<int, int>& plans, int key) {
  const RunScope scope({.shape_set = shape_set});
  if (int* found = plans.Find(key)) return *found;
  return plans.Add(key, key * 10);
}

TEST(ShapePlansTest, AnEntryGoesWithTheLastShapeSetThatUsedIt) {
  ShapePlans<int, int> plans;
  RunAs(1, plans, 7);  // used by shape sets 1 and 2
  RunAs(2, plans, 7);
  RunAs(2, plans, 8);  // by 2 only
  RunAs(kNoShapeSet, plans, 9);  // outside any session run: nobody forgets it
  ASSERT_EQ(plans.size(), 3u);
  plans.Forget(2);
  EXPECT_EQ(plans.size(), 2u);
  EXPECT_NE(plans.Find(7), nullptr);
  EXPECT_EQ(plans.Find(8), nullptr);
  plans.Forget(1);
  EXPECT_EQ(plans.size(), 1u);
  EXPECT_NE(plans.Find(9), nullptr);
  plans.Forget(3);  // a shape set that used nothing here
  EXPECT_EQ(plans.size(), 1u);
}

// A kernel that keeps one entry per input shape, as the oneDNN kernels do, and publishes how many
// it holds.
size_t g_entries_held = 0;

class PerShapeKernel final : public Kernel {
 public:
  Status Run(std::span<const Tensor* const> in, std::span<Tensor> out) override {
    if (plans_.Find(in[0]->shape) == nullptr) plans_.Add(in[0]->shape, 0);
    g_entries_held = plans_.size();
    ASSIGN_OR_RETURN(float* y, AllocateOutputAs<float>(&out[0], DataType::kFp32, in[0]->shape));
    const float* x = ValuesOf<float>(*in[0]);
    for (int64_t i = 0; i < ElementsOf(*in[0]); ++i) y[i] = x[i] * 2;
    return Status::Ok();
  }
  void ForgetShapeSet(ShapeSetId shape_set) override {
    plans_.Forget(shape_set);
    g_entries_held = plans_.size();
  }

 private:
  ShapePlans<Shape, int> plans_;
};

std::unique_ptr<Session> PerShapeSession(size_t max_shape_sets) {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    r.Register("Double", 1, [](const Node&, int) -> StatusOr<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<PerShapeKernel>());
    });
    return r;
  }();
  Graph g = GraphBuilder().Input("x").Op("Double", {"x"}, {"a"}).Op("Double", {"a"}, {"y"}).Output("y").graph();
  auto session = Session::FromGraph(g, {.registry = &registry, .optimize = false, .max_shape_sets = max_shape_sets});
  EXPECT_TRUE(session.ok()) << session.status().message();
  return session.ok() ? std::move(session).value() : nullptr;
}

Status RunBatch(Session& session, int64_t batch) {
  std::vector<Tensor> inputs{Random({batch, 3}, static_cast<uint32_t>(batch))}, outputs;
  RETURN_IF_ERROR(session.Run(inputs, &outputs));
  for (int64_t i = 0; i < ElementsOf(inputs[0]); ++i) {
    if (ValuesOf<float>(outputs[0])[i] != 4 * ValuesOf<float>(inputs[0])[i]) return Status::Internal("wrong output");
  }
  return Status::Ok();
}

TEST(SessionShapeSetsTest, ANewShapeSetBeyondTheBoundForgetsTheLeastRecentlyRun) {
  auto session = PerShapeSession(2);
  ASSERT_NE(session, nullptr);
  for (int64_t batch : {1, 2, 1, 3}) ASSERT_TRUE(RunBatch(*session, batch).ok()) << batch;
  // 2 was run longest ago when 3 came: its plan and its kernel entries are gone.
  EXPECT_EQ(session->prepared_shapes(), 2u);
  EXPECT_EQ(session->shape_preparations(), 3u);
  EXPECT_TRUE(session->memory_plan({{1, 3}}).has_value());
  EXPECT_FALSE(session->memory_plan({{2, 3}}).has_value());
  EXPECT_TRUE(session->memory_plan({{3, 3}}).has_value());
  EXPECT_EQ(g_entries_held, 2u);
  // A forgotten shape set is prepared again, and gives the same answers.
  ASSERT_TRUE(RunBatch(*session, 2).ok());
  ASSERT_TRUE(RunBatch(*session, 2).ok());  // in its arena this time
  EXPECT_EQ(session->shape_preparations(), 4u);
  EXPECT_EQ(session->prepared_shapes(), 2u);
  EXPECT_EQ(g_entries_held, 2u);
}

TEST(SessionShapeSetsTest, WithinTheBoundEveryShapeSetStaysPrepared) {
  auto session = PerShapeSession(8);
  ASSERT_NE(session, nullptr);
  for (int round = 0; round < 2; ++round) {
    for (int64_t batch = 1; batch <= 8; ++batch) ASSERT_TRUE(RunBatch(*session, batch).ok()) << batch;
  }
  EXPECT_EQ(session->prepared_shapes(), 8u);
  EXPECT_EQ(session->shape_preparations(), 8u);
  EXPECT_EQ(g_entries_held, 8u);
}

// The real kernels: a convolution chain run at more batch sizes than the session keeps gives the
// reference's answers at each, also after its shape set was forgotten and prepared again.
TEST(SessionShapeSetsTest, OneDnnKernelsGiveTheSameAnswersAfterForgetting) {
  GraphBuilder b;
  b.Input("x");
  b.Constant("w1", Random({8, 3, 3, 3}, 1, -0.3f, 0.3f));
  b.Constant("w2", Random({8, 8, 1, 1}, 2, -0.3f, 0.3f));
  b.Constant("b", Random({8}, 3));
  b.Op("Conv", {"x", "w1", "b"}, {"c1"}, {{"pads", Ints({1, 1, 1, 1})}})
      .Op("Relu", {"c1"}, {"a1"})
      .Op("Conv", {"a1", "w2", "b"}, {"c2"})
      .Op("Add", {"c2", "a1"}, {"s"})
      .Op("GlobalAveragePool", {"s"}, {"y"})
      .Output("y");
  const Graph graph = b.graph();
  auto reference = Session::FromGraph(graph, {.registry = &KernelRegistry::Reference(), .optimize = false});
  auto session = Session::FromGraph(graph, {.max_shape_sets = 2});
  ASSERT_TRUE(reference.ok() && session.ok());
  for (int64_t batch : {1, 2, 3, 1, 2, 3, 3}) {
    std::vector<Tensor> inputs{Random({batch, 3, 10, 10}, static_cast<uint32_t>(batch))}, expected, actual;
    ASSERT_TRUE((*reference)->Run(inputs, &expected).ok());
    ASSERT_TRUE((*session)->Run(inputs, &actual).ok()) << batch;
    ASSERT_EQ(actual[0].shape, expected[0].shape);
    for (int64_t i = 0; i < ElementsOf(expected[0]); ++i) {
      ASSERT_NEAR(ValuesOf<float>(actual[0])[i], ValuesOf<float>(expected[0])[i], 1e-4) << "batch " << batch;
    }
  }
  EXPECT_EQ((*session)->prepared_shapes(), 2u);
  EXPECT_EQ((*session)->shape_preparations(), 6u);
}

}  // namespace
}  // namespace inferd::runtime
