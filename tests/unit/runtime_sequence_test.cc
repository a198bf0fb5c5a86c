// ONNX sequence ops (kernels/sequence.cc): what the conformance suite's sequence models do not
// reach: items that outlive the arena slot they came from, and the error paths.
#include <gtest/gtest.h>

#include "runtime/kernels/tensor_util.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;

Tensor Int64Scalar(int64_t value) {
  Tensor t;
  *AllocateOutputAs<int64_t>(&t, DataType::kInt64, {}).value() = value;
  return t;
}

// GraphBuilder's values are FP32; positions are not.
void MakeInt64(Graph* g, const std::string& name) { g->values[static_cast<size_t>(*g->FindValue(name))].dtype = DataType::kInt64; }

std::vector<float> Values(const Tensor& t) {
  const float* data = ValuesOf<float>(t);
  return {data, data + ElementsOf(t)};
}

TEST(SequenceTest, ItemsOutliveTheArenaSlotTheyCameFrom) {
  // relu's buffer is free once the sequence holds it; neg and abs may take its arena slot.
  Graph g = GraphBuilder()
                .Input("x")
                .Input("at")
                .Op("Relu", {"x"}, {"relu"})
                .Op("SequenceConstruct", {"relu"}, {"seq"})
                .Op("Neg", {"x"}, {"neg"})
                .Op("Abs", {"neg"}, {"abs"})
                .Op("SequenceAt", {"seq", "at"}, {"item"})
                .Output("item")
                .Output("abs")
                .graph();
  MakeInt64(&g, "at");
  auto session = Session::FromGraph(g);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const Tensor x = Random({64}, 1);
  std::vector<float> expected = Values(x);
  for (float& v : expected) v = std::max(v, 0.0f);
  for (int run = 0; run < 3; ++run) {  // the first run records, the others run in the arena
    std::vector<Tensor> outputs;
    const std::vector<Tensor> inputs{x, Int64Scalar(-1)};
    Status status = (*session)->Run(inputs, &outputs);
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(Values(outputs[0]), expected) << "run " << run;
  }
}

TEST(SequenceTest, SplitThenStackAndLength) {
  Graph g = GraphBuilder()
                .Input("x")
                .Op("SplitToSequence", {"x"}, {"rows"}, {{"axis", Int(1)}, {"keepdims", Int(0)}})
                .Op("ConcatFromSequence", {"rows"}, {"stacked"}, {{"axis", Int(0)}, {"new_axis", Int(1)}})
                .Op("SequenceLength", {"rows"}, {"count"})
                .Output("stacked")
                .Output("count")
                .graph();
  auto session = Session::FromGraph(g);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const Tensor x = Random({2, 3}, 2);
  std::vector<Tensor> outputs;
  const std::vector<Tensor> inputs{x};
  ASSERT_TRUE((*session)->Run(inputs, &outputs).ok());
  // Columns stacked as rows: the transpose.
  EXPECT_EQ(outputs[0].shape, (Shape{3, 2}));
  const std::vector<float> in = Values(x), out = Values(outputs[0]);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 2; ++c) EXPECT_EQ(out[r * 2 + c], in[c * 3 + r]);
  }
  EXPECT_EQ(*ValuesOf<int64_t>(outputs[1]), 3);
}

TEST(SequenceTest, BadPositionsAreClearErrors) {
  Graph g = GraphBuilder()
                .Input("x")
                .Input("at")
                .Op("SequenceConstruct", {"x", "x"}, {"seq"})
                .Op("SequenceErase", {"seq", "at"}, {"shorter"})
                .Op("SequenceAt", {"shorter", "at"}, {"item"})
                .Output("item")
                .graph();
  MakeInt64(&g, "at");
  auto session = Session::FromGraph(g);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<Tensor> outputs;
  const std::vector<Tensor> out_of_range{Random({2}, 1), Int64Scalar(2)};
  Status status = (*session)->Run(out_of_range, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("position 2 is outside a sequence of 2"), std::string::npos) << status.message();
  // Erasing item 0 leaves one item; position 0 of that is fine.
  const std::vector<Tensor> fine{Random({2}, 1), Int64Scalar(0)};
  EXPECT_TRUE((*session)->Run(fine, &outputs).ok());
  // A tensor where a sequence belongs.
  Graph wrong = GraphBuilder().Input("x").Op("SequenceLength", {"x"}, {"n"}).Output("n").graph();
  auto wrong_session = Session::FromGraph(wrong);
  ASSERT_TRUE(wrong_session.ok());
  const std::vector<Tensor> tensor{Random({2}, 1)};
  status = (*wrong_session)->Run(tensor, &outputs);
  EXPECT_NE(status.message().find("must be a sequence"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace inferd::runtime
