// RNN, GRU and LSTM (kernels/rnn.cc) on what neither the conformance suite (forward only) nor the
// PyTorch comparison (tests/e2e/test_recurrent.py) reaches: reverse with per-sequence lengths,
// bidirectional stacking, LSTM input_forget, clip and parameterised activations, and bad inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/kernels/tensor_util.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;
using Attributes = std::map<std::string, Attribute, std::less<>>;

int Gates(const std::string& op) { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }

Tensor Int32s(std::vector<int32_t> values) {
  Tensor t;
  int32_t* data = AllocateOutputAs<int32_t>(&t, DataType::kInt32, {static_cast<int64_t>(values.size())}).value();
  std::copy(values.begin(), values.end(), data);
  return t;
}

std::vector<float> Values(const Tensor& t) { return {ValuesOf<float>(t), ValuesOf<float>(t) + ElementsOf(t)}; }

// Runs one recurrent node on X with constant weights; returns Y and Y_h (and Y_c for LSTM).
StatusOr<std::vector<Tensor>> RunRecurrent(const std::string& op, const Tensor& x, const Tensor& w, const Tensor& r,
                                           const Tensor* b, const Tensor* lengths, Attributes attributes) {
  GraphBuilder builder;
  builder.Input("x").Constant("w", w).Constant("r", r);
  std::vector<std::string> inputs = {"x", "w", "r", "", ""};
  if (b != nullptr) {
    builder.Constant("b", *b);
    inputs[3] = "b";
  }
  if (lengths != nullptr) {
    builder.Constant("lengths", *lengths);
    inputs[4] = "lengths";
  }
  std::vector<std::string> outputs = {"y", "y_h"};
  if (op == "LSTM") outputs.push_back("y_c");
  builder.Op(op, inputs, outputs, std::move(attributes));
  for (const auto& name : outputs) builder.Output(name);
  Graph g = builder.graph();
  if (lengths != nullptr) g.values[static_cast<size_t>(*g.FindValue("lengths"))].dtype = DataType::kInt32;
  ASSIGN_OR_RETURN(auto session, Session::FromGraph(g));
  std::vector<Tensor> results;
  RETURN_IF_ERROR(session->Run(std::vector<Tensor>{x}, &results));
  return results;
}

// X[t, b] for one batch entry's first `length` steps, in reverse order: [length, 1, I].
Tensor ReversedPrefix(const Tensor& x, int64_t b, int64_t length) {
  const int64_t batch = x.shape[1], input = x.shape[2];
  Tensor out;
  float* dst = AllocateOutputAs<float>(&out, DataType::kFp32, {length, 1, input}).value();
  for (int64_t t = 0; t < length; ++t) {
    const float* src = ValuesOf<float>(x) + ((length - 1 - t) * batch + b) * input;
    std::copy(src, src + input, dst + t * input);
  }
  return out;
}

class RecurrentTest : public ::testing::TestWithParam<std::string> {};

// Reverse over sequences of lengths {5, 3} equals forward over each sequence's own steps reversed;
// steps past a sequence's end are 0 and its final state is the state at its last real step.
TEST_P(RecurrentTest, ReverseWithLengthsEqualsForwardOnReversedSequences) {
  const std::string op = GetParam();
  const int64_t steps = 5, batch = 2, input = 3, hidden = 4, rows = Gates(op) * hidden;
  const Tensor x = Random({steps, batch, input}, 1), w = Random({1, rows, input}, 2), r = Random({1, rows, hidden}, 3);
  const Tensor b = Random({1, 2 * rows}, 4), lengths = Int32s({5, 3});
  auto reverse = RunRecurrent(op, x, w, r, &b, &lengths, {{"hidden_size", Int(hidden)}, {"direction", String("reverse")}});
  ASSERT_TRUE(reverse.ok()) << reverse.status().ToString();
  const std::vector<float> y = Values((*reverse)[0]), y_h = Values((*reverse)[1]);
  for (int64_t entry = 0; entry < batch; ++entry) {
    const int64_t length = entry == 0 ? 5 : 3;
    auto forward = RunRecurrent(op, ReversedPrefix(x, entry, length), w, r, &b, nullptr, {{"hidden_size", Int(hidden)}});
    ASSERT_TRUE(forward.ok()) << forward.status().ToString();
    const std::vector<float> fy = Values((*forward)[0]), fh = Values((*forward)[1]);
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t j = 0; j < hidden; ++j) {
        const float got = y[static_cast<size_t>((t * batch + entry) * hidden + j)];
        const float want = t < length ? fy[static_cast<size_t>((length - 1 - t) * hidden + j)] : 0.0f;
        EXPECT_NEAR(got, want, 1e-5) << op << " entry " << entry << " step " << t;
      }
    }
    for (int64_t j = 0; j < hidden; ++j)
      EXPECT_NEAR(y_h[static_cast<size_t>(entry * hidden + j)], fh[static_cast<size_t>(j)], 1e-5) << op;
  }
}

// Bidirectional: direction 0 is the forward layer, direction 1 the reverse one, each with its own weights.
TEST_P(RecurrentTest, BidirectionalStacksForwardAndReverse) {
  const std::string op = GetParam();
  const int64_t steps = 4, batch = 3, input = 2, hidden = 3, rows = Gates(op) * hidden;
  const Tensor x = Random({steps, batch, input}, 5);
  const Tensor w = Random({2, rows, input}, 6), r = Random({2, rows, hidden}, 7), b = Random({2, 2 * rows}, 8);
  auto both = RunRecurrent(op, x, w, r, &b, nullptr, {{"hidden_size", Int(hidden)}, {"direction", String("bidirectional")}});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  auto half = [](const Tensor& t, int d) {  // direction d of a [2, ...] weight
    Tensor out;
    Shape shape = t.shape;
    shape[0] = 1;
    const int64_t n = ElementsOf(t) / 2;
    float* dst = AllocateOutputAs<float>(&out, DataType::kFp32, shape).value();
    std::copy(ValuesOf<float>(t) + d * n, ValuesOf<float>(t) + (d + 1) * n, dst);
    return out;
  };
  const std::vector<float> y = Values((*both)[0]);
  for (int d = 0; d < 2; ++d) {
    const Tensor bias = half(b, d);
    auto one = RunRecurrent(op, x, half(w, d), half(r, d), &bias, nullptr,
                            {{"hidden_size", Int(hidden)}, {"direction", String(d == 0 ? "forward" : "reverse")}});
    ASSERT_TRUE(one.ok());
    const std::vector<float> single = Values((*one)[0]);
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t i = 0; i < batch * hidden; ++i)
        EXPECT_NEAR(y[static_cast<size_t>((t * 2 + d) * batch * hidden + i)], single[static_cast<size_t>(t * batch * hidden + i)], 1e-5)
            << op << " direction " << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Cells, RecurrentTest, ::testing::Values("RNN", "GRU", "LSTM"));

float Sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// One step, one unit: the forget gate is 1 - input gate, not its own weights.
TEST(LstmTest, InputForgetCouplesTheGates) {
  Tensor x = Random({1, 1, 1}, 9), w = Random({1, 4, 1}, 10), r = Random({1, 4, 1}, 11);
  auto out = RunRecurrent("LSTM", x, w, r, nullptr, nullptr, {{"hidden_size", Int(1)}, {"input_forget", Int(1)}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const float xv = ValuesOf<float>(x)[0];
  const float* wv = ValuesOf<float>(w);  // gates i, o, f, c; initial h and c are 0
  const float i = Sigmoid(xv * wv[0]), o = Sigmoid(xv * wv[1]), c = i * std::tanh(xv * wv[3]);
  EXPECT_NEAR(Values((*out)[2])[0], c, 1e-6);  // (1 - i) * c0 = 0 with c0 = 0; the f weights play no part
  EXPECT_NEAR(Values((*out)[1])[0], o * std::tanh(c), 1e-6);
}

// Clip bounds the activation's input; Affine's alpha and beta come from activation_alpha/beta.
TEST(RnnTest, ClipAppliesBeforeAParameterisedActivation) {
  const Tensor x = Random({1, 4, 3}, 12), w = Random({1, 5, 3}, 13, -4, 4), r = Random({1, 5, 5}, 14);
  auto linear = RunRecurrent("RNN", x, w, r, nullptr, nullptr, {{"hidden_size", Int(5)}, {"activations", Strings({"Affine"})},
                                                                  {"activation_alpha", Floats({1})}, {"activation_beta", Floats({0})}});
  auto clipped = RunRecurrent("RNN", x, w, r, nullptr, nullptr,
                              {{"hidden_size", Int(5)}, {"activations", Strings({"affine"})}, {"activation_alpha", Floats({2})},
                               {"activation_beta", Floats({0.5f})}, {"clip", Float(0.5f)}});
  ASSERT_TRUE(linear.ok() && clipped.ok());
  const std::vector<float> pre = Values((*linear)[0]), got = Values((*clipped)[0]);
  bool some_clipped = false;
  for (size_t i = 0; i < pre.size(); ++i) {
    EXPECT_NEAR(got[i], 2 * std::clamp(pre[i], -0.5f, 0.5f) + 0.5f, 1e-5);
    some_clipped = some_clipped || std::fabs(pre[i]) > 0.5f;
  }
  EXPECT_TRUE(some_clipped);  // the weights are large enough for clip to matter
}

TEST(RnnTest, BadWeightsAndActivationsAreErrors) {
  const Tensor x = Random({2, 1, 3}, 15), r = Random({1, 4, 4}, 16);
  auto wrong_w = RunRecurrent("RNN", x, Random({1, 4, 2}, 17), r, nullptr, nullptr, {{"hidden_size", Int(4)}});
  ASSERT_FALSE(wrong_w.ok());
  EXPECT_NE(wrong_w.status().message().find("W has shape [1,4,2], expected [1,4,3]"), std::string::npos)
      << wrong_w.status().message();
  auto unknown = RunRecurrent("RNN", x, Random({1, 4, 3}, 18), r, nullptr, nullptr,
                              {{"hidden_size", Int(4)}, {"activations", Strings({"Swish"})}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("activation 'swish' is not supported"), std::string::npos);
  auto count = RunRecurrent("GRU", x, Random({1, 12, 3}, 19), Random({1, 12, 4}, 20), nullptr, nullptr,
                            {{"hidden_size", Int(4)}, {"activations", Strings({"Sigmoid"})}});
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("expected 2 activations, got 1"), std::string::npos);
}

}  // namespace
}  // namespace inferd::runtime
