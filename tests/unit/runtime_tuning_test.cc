// Kernel auto-tuning: both candidates of a tuned kernel give the reference's numbers, choices are
// shared by shape and persist in the cache file, and a file from another machine setup is ignored.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <algorithm>
#include <set>
#include <sstream>
#include <thread>

#include "runtime/kernels/dnnl/dnnl_layout.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/run_context.h"
#include "runtime/session.h"
#include "runtime/threading.h"
#include "runtime/tuning.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;

// Y = MatMul(X, W) + bias, with X [batch, rows, K]: a Linear layer (the Add fuses into the MatMul).
Graph LinearLayer(int64_t k, int64_t n) {
  Graph g;
  g.opset = 17;
  const ValueId x = g.AddValue({.name = "x", .dtype = DataType::kFp32});
  const ValueId w = g.AddValue({.name = "w", .dtype = DataType::kFp32});
  const ValueId bias = g.AddValue({.name = "bias", .dtype = DataType::kFp32});
  const ValueId product = g.AddValue({.name = "product"});
  const ValueId y = g.AddValue({.name = "y"});
  g.inputs = {x};
  g.initializers[w] = Random({k, n}, 1);
  g.initializers[bias] = Random({n}, 2);
  g.nodes.push_back({.name = "matmul", .op_type = "MatMul", .inputs = {x, w}, .outputs = {product}});
  g.nodes.push_back({.name = "add", .op_type = "Add", .inputs = {product, bias}, .outputs = {y}});
  g.outputs = {y};
  return g;
}

std::string MatMulImplementation(const Session& session) {
  for (size_t n = 0; n < session.graph().nodes.size(); ++n) {
    if (session.graph().nodes[n].op_type == "MatMul") return session.kernel(n).Implementation();
  }
  return "";
}

void ExpectMatchesReference(Session& session, const Graph& graph, const Tensor& x) {
  auto reference = Session::FromGraph(graph, {.registry = &KernelRegistry::Reference(), .optimize = false});
  ASSERT_TRUE(reference.ok());
  std::vector<Tensor> inputs{x}, expected, actual;
  ASSERT_TRUE((*reference)->Run(inputs, &expected).ok());
  for (int run = 0; run < 2; ++run) ASSERT_TRUE(session.Run(inputs, &actual).ok());
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t o = 0; o < expected.size(); ++o) {
    ASSERT_EQ(actual[o].shape, expected[o].shape);
    for (int64_t i = 0; i < ElementsOf(expected[o]); ++i) {
      ASSERT_NEAR(ValuesOf<float>(actual[o])[i], ValuesOf<float>(expected[o])[i], 1e-3) << "output " << o << " at " << i;
    }
  }
}

// Runs a tuned session on `x` once (checked against the reference) with its tuning cache at
// `file`, and returns what the cache file holds then: the choices a test edits to force others.
std::string TimedCacheFile(const Graph& graph, const Tensor& x, const std::filesystem::path& file) {
  auto session = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = file, .persist_tuning = true, .intra_op_threads = 2});
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return "";
  ExpectMatchesReference(**session, graph, x);
  std::stringstream text;
  text << std::ifstream(file).rdbuf();
  return text.str();
}

TEST(TuningTest, BothMatMulCandidatesMatchTheReference) {
  const Graph graph = LinearLayer(24, 40);
  // Untuned, few rows take the 1x1 convolution and many rows the GEMM: both paths are checked.
  for (int64_t rows : {6, 300}) {
    auto session = Session::FromGraph(graph, {.tune = TuneMode::kOff});
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    ExpectMatchesReference(**session, graph, Random({2, rows / 2, 24}, 3));
    const bool conv = MatMulImplementation(**session).find("as 1x1 conv") != std::string::npos;
    EXPECT_EQ(conv, rows <= 256) << MatMulImplementation(**session);
  }
}

TEST(TuningTest, ChoicesAreTimedOncePerShapeAndPersist) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("inferd_tuning_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);  // a directory left by a dead process of the same pid
  std::filesystem::create_directories(dir);
  const std::filesystem::path cache = dir / "model.onnx.tuning";
  const Graph graph = LinearLayer(16, 32);
  {
    auto session = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = cache, .persist_tuning = true, .intra_op_threads = 2});
    ASSERT_TRUE(session.ok());
    ExpectMatchesReference(**session, graph, Random({1, 8, 16}, 4));
    EXPECT_EQ((*session)->tuning().size(), 1u);
    // Another instance of the same model, loaded meanwhile, shares the choices at once.
    auto instance = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = cache, .persist_tuning = true, .intra_op_threads = 2});
    ASSERT_TRUE(instance.ok());
    EXPECT_EQ(&(*instance)->tuning(), &(*session)->tuning());
  }
  ASSERT_TRUE(std::filesystem::exists(cache));
  {
    // A new session (a restart) reads the choice instead of timing again.
    auto session = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = cache, .persist_tuning = true, .intra_op_threads = 2});
    ASSERT_TRUE(session.ok());
    EXPECT_EQ((*session)->tuning().size(), 1u);
  }
  {
    // Timings made with another thread count do not apply.
    auto session = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = cache, .persist_tuning = true, .intra_op_threads = 3});
    ASSERT_TRUE(session.ok());
    EXPECT_EQ((*session)->tuning().size(), 0u);
  }
  std::filesystem::remove_all(dir);
}

// x -> Conv 3x3 -> r -> Conv 3x3 + Relu -> Conv 3x3 + r (residual) + Relu -> Conv 1x1 -> y: after
// the first convolution every tensor up to the last is blocked, so the second and third can take
// Winograd (graph inputs and outputs are plain).
Graph ConvChain() {
  GraphBuilder b;
  b.Input("x");
  for (const char* name : {"w1", "w2", "w3"}) b.Constant(name, Random({16, 16, 3, 3}, name[1], -0.3f, 0.3f));
  b.Constant("w4", Random({16, 16, 1, 1}, 4, -0.3f, 0.3f));
  b.Constant("b", Random({16}, 9));
  const auto pads = Ints({1, 1, 1, 1});
  b.Op("Conv", {"x", "w1", "b"}, {"r"}, {{"pads", pads}})
      .Op("Conv", {"r", "w2", "b"}, {"c2"}, {{"pads", pads}})
      .Op("Relu", {"c2"}, {"a2"})
      .Op("Conv", {"a2", "w3", "b"}, {"c3"}, {{"pads", pads}})
      .Op("Add", {"c3", "r"}, {"sum"})
      .Op("Relu", {"sum"}, {"a3"})
      .Op("Conv", {"a3", "w4", "b"}, {"y"})
      .Output("y");
  return b.graph();
}

int WinogradConvs(const Session& session) {
  int count = 0;
  for (size_t n = 0; n < session.graph().nodes.size(); ++n) {
    if (session.kernel(n).Implementation().find("winograd") != std::string::npos) ++count;
  }
  return count;
}

TEST(TuningTest, WinogradAndOneDnnCandidatesBothMatchTheReference) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("inferd_winograd_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);  // a directory left by a dead process of the same pid
  std::filesystem::create_directories(dir);
  const Graph graph = ConvChain();
  const Tensor x = Random({2, 16, 9, 9}, 5);
  const std::string timed = TimedCacheFile(graph, x, dir / "timed");
  ASSERT_NE(timed.find("+winograd2,4"), std::string::npos) << timed;
  // Whatever the timing chose, force each candidate in turn through an edited cache file: the two
  // Winograd tilings, then oneDNN's first implementation.
  for (int choice : {0, 1, 2}) {
    const std::filesystem::path forced = dir / ("forced" + std::to_string(choice));
    std::ofstream(forced) << std::regex_replace(timed, std::regex("(\\+winograd2,4\t)\\d+"), "$01" + std::to_string(choice));
    auto session = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = forced, .persist_tuning = true, .intra_op_threads = 2});
    ASSERT_TRUE(session.ok());
    ExpectMatchesReference(**session, graph, x);
    EXPECT_EQ(WinogradConvs(**session), choice < 2 ? 2 : 0) << "choice " << choice;
    // The residual Add's convolution wrote over r, the residual (both paths add it in place).
    ASSERT_TRUE((*session)->memory_plan({x.shape}).has_value());
    EXPECT_EQ((*session)->memory_plan({x.shape})->reused_buffers, 1);
  }
  std::filesystem::remove_all(dir);
}

std::vector<std::string> ConvImplementations(const Session& session) {
  std::vector<std::string> implementations;
  for (size_t n = 0; n < session.graph().nodes.size(); ++n) {
    if (session.graph().nodes[n].op_type == "Conv") implementations.push_back(session.kernel(n).Implementation());
  }
  return implementations;
}

// The cache lines of a Winograd-eligible convolution at `batch`, with `choice` in place of the
// timed one (cache files from sessions that ran only that batch size).
std::string ForcedLines(const std::string& timed, int64_t batch, int choice) {
  std::istringstream lines(timed);
  std::string kept;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#", 0) == 0 || line.find("x=[" + std::to_string(batch) + ",") == std::string::npos) continue;
    kept += std::regex_replace(line, std::regex("(\\+winograd2,4\t)\\d+"), "$01" + std::to_string(choice)) + "\n";
  }
  return kept;
}

// A layer keeps the weights form its first shape chose (Winograd's transform for one tile size, or
// oneDNN's layout) at every other batch size, even where a cached choice for that size alone says
// otherwise: memory holds one transformed copy of a layer's weights, not one per batch size.
TEST(TuningTest, ALayerKeepsTheWeightsFormOfItsFirstShapeAtOtherBatchSizes) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("inferd_forms_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);  // a directory left by a dead process of the same pid
  std::filesystem::create_directories(dir);
  const Graph graph = ConvChain();
  const Tensor first = Random({2, 16, 9, 9}, 5), other = Random({5, 16, 9, 9}, 6);
  std::string header, timed[2];
  for (int i = 0; i < 2; ++i) {
    const std::filesystem::path file = dir / ("timed" + std::to_string(i));
    auto session = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = file, .persist_tuning = true, .intra_op_threads = 2});
    ASSERT_TRUE(session.ok());
    std::vector<Tensor> inputs{i == 0 ? first : other}, outputs;
    ASSERT_TRUE((*session)->Run(inputs, &outputs).ok());
    std::stringstream text;
    text << std::ifstream(file).rdbuf();
    timed[i] = text.str();
    header = timed[i].substr(0, timed[i].find('\n') + 1);
  }
  // {first shape's choice, the other shape's cached choice}: 1 = Winograd F(4x4), 2 = oneDNN.
  for (auto [first_choice, other_choice] : {std::pair{1, 2}, std::pair{2, 1}}) {
    const std::filesystem::path forced = dir / ("forced" + std::to_string(first_choice));
    std::ofstream(forced) << header << ForcedLines(timed[0], 2, first_choice) << ForcedLines(timed[1], 5, other_choice);
    auto session = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = forced, .persist_tuning = true, .intra_op_threads = 2});
    ASSERT_TRUE(session.ok());
    ExpectMatchesReference(**session, graph, first);
    const std::vector<std::string> chosen = ConvImplementations(**session);
    EXPECT_EQ(WinogradConvs(**session), first_choice == 1 ? 2 : 0);
    ExpectMatchesReference(**session, graph, other);
    if (first_choice == 1) {
      // The Winograd layers keep their tile size (the others may take another implementation of
      // the same weights layout).
      const std::vector<std::string> now = ConvImplementations(**session);
      ASSERT_EQ(now.size(), chosen.size());
      for (size_t i = 0; i < now.size(); ++i) {
        if (chosen[i].find("winograd") != std::string::npos) {
          EXPECT_EQ(now[i], chosen[i]) << "conv " << i;
        }
      }
      EXPECT_EQ(WinogradConvs(**session), 2);
    } else {
      EXPECT_EQ(WinogradConvs(**session), 0);
    }
  }
  std::filesystem::remove_all(dir);
}

// x -> Conv 3x3 + Relu -> Conv 3x3 + Relu -> y (8 channels, as the e2e planned-batch model).
Graph TwoConvs() {
  GraphBuilder b;
  b.Input("x");
  b.Constant("w1", Random({8, 8, 3, 3}, 11, -0.3f, 0.3f)).Constant("w2", Random({8, 8, 3, 3}, 12, -0.3f, 0.3f));
  const auto pads = Ints({1, 1, 1, 1});
  b.Op("Conv", {"x", "w1"}, {"c1"}, {{"pads", pads}})
      .Op("Relu", {"c1"}, {"a1"})
      .Op("Conv", {"a1", "w2"}, {"c2"}, {{"pads", pads}})
      .Op("Relu", {"c2"}, {"y"})
      .Output("y");
  return b.graph();
}

// A model is prepared on the thread that loads it (planned batch sizes, warmup) and served on its
// instance's thread. oneDNN's library-managed scratchpad is a buffer per thread, sized when a
// primitive is made: a GEMM-based convolution made on one thread and run on another wrote its
// im2col columns through the other thread's (null) buffer, and the server died. Every candidate
// is forced in turn, as tuning could pick any of them.
// x -> Conv 3x3 -> GlobalAveragePool -> Conv 1x1 -> squeezed (a squeeze-excitation's start), and
// x -> GlobalMaxPool -> max: one global pool between convolutions, which keeps its tensors
// blocked, and one of a plain graph input.
Graph GlobalPools() {
  GraphBuilder b;
  b.Input("x");
  b.Constant("w", Random({24, 16, 3, 3}, 7, -0.3f, 0.3f));
  b.Constant("w_squeeze", Random({8, 24, 1, 1}, 9, -0.3f, 0.3f));
  b.Op("Conv", {"x", "w"}, {"c"}, {{"pads", Ints({1, 1, 1, 1})}})
      .Op("GlobalAveragePool", {"c"}, {"avg"})
      .Op("Conv", {"avg", "w_squeeze"}, {"squeezed"})
      .Op("GlobalMaxPool", {"x"}, {"max"})
      .Output("squeezed")
      .Output("max");
  return b.graph();
}

std::vector<std::string> PoolImplementations(const Session& session) {
  std::vector<std::string> implementations;
  for (size_t n = 0; n < session.graph().nodes.size(); ++n) {
    if (session.graph().nodes[n].op_type.starts_with("Global")) implementations.push_back(session.kernel(n).Implementation());
  }
  return implementations;
}

TEST(TuningTest, BothGlobalPoolCandidatesMatchTheReferenceOnBlockedAndPlainInputs) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("inferd_pools_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);  // a directory left by a dead process of the same pid
  std::filesystem::create_directories(dir);
  const Graph graph = GlobalPools();
  const Tensor x = Random({3, 16, 7, 7}, 8);
  const std::string timed = TimedCacheFile(graph, x, dir / "timed");
  const std::string blocked = "GlobalAveragePool x=[3,24,7,7] blocked" + std::to_string(dnnl_kernels::ChannelBlock());
  ASSERT_NE(timed.find(blocked + " +simd\t"), std::string::npos) << timed;
  ASSERT_NE(timed.find("GlobalMaxPool x=[3,16,7,7] plain +simd\t"), std::string::npos) << timed;
  // Whatever the timing chose, force each candidate: 0 is ours, 1 oneDNN's primitive.
  for (int choice : {0, 1}) {
    const std::filesystem::path forced = dir / ("forced" + std::to_string(choice));
    std::ofstream(forced) << std::regex_replace(timed, std::regex("( \\+simd\t)\\d+"), "$01" + std::to_string(choice));
    auto session = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = forced, .persist_tuning = true, .intra_op_threads = 2});
    ASSERT_TRUE(session.ok());
    ExpectMatchesReference(**session, graph, x);
    for (const std::string& implementation : PoolImplementations(**session)) {
      EXPECT_TRUE(implementation.starts_with(choice == 0 ? "simd:global_pool:" : "onednn:")) << choice << ": " << implementation;
    }
    EXPECT_EQ(PoolImplementations(**session).size(), 2u);
  }
  std::filesystem::remove_all(dir);
}

// x -> Conv 1x1 (16 -> 24) -> depthwise 3x3 + Relu -> depthwise 5x5 stride 2 + bias + Clip(0, 6)
// -> Conv 1x1 (24 -> 8): MobileNet's shapes, with 24 channels so that a 16-wide block is padded.
Graph DepthwiseChain() {
  GraphBuilder b;
  b.Input("x");
  b.Constant("w_in", Random({24, 16, 1, 1}, 21, -0.3f, 0.3f))
      .Constant("w_dw3", Random({24, 1, 3, 3}, 22, -0.5f, 0.5f))
      .Constant("w_dw5", Random({24, 1, 5, 5}, 23, -0.3f, 0.3f))
      .Constant("b_dw5", Random({24}, 24, -0.5f, 0.5f))
      .Constant("w_out", Random({8, 24, 1, 1}, 25, -0.3f, 0.3f))
      .Constant("lo", Random({}, 26, 0.0f, 0.0f))
      .Constant("hi", Random({}, 27, 6.0f, 6.0f));
  b.Op("Conv", {"x", "w_in"}, {"c"})
      .Op("Conv", {"c", "w_dw3"}, {"d3"}, {{"group", Int(24)}, {"pads", Ints({1, 1, 1, 1})}})
      .Op("Relu", {"d3"}, {"a3"})
      .Op("Conv", {"a3", "w_dw5", "b_dw5"}, {"d5"},
          {{"group", Int(24)}, {"pads", Ints({2, 2, 2, 2})}, {"strides", Ints({2, 2})}})
      .Op("Clip", {"d5", "lo", "hi"}, {"a5"})
      .Op("Conv", {"a5", "w_out"}, {"y"})
      .Output("y");
  return b.graph();
}

// Times `graph` on `x`, then forces each choice of the two layers whose tuning key offers our
// `kind` of convolution (0: ours, 1: oneDNN's first implementation): either way the answers match
// the reference, at `x` and at `other` (another batch size, which keeps each layer's weights
// form), and Conv nodes `convs` ran what was forced. `also` checks more of each forced session.
// Returns the timed cache file.
std::string ForceEachSimdChoice(const Graph& graph, const Tensor& x, const Tensor& other, const std::string& kind,
                                const std::string& implementation, std::vector<size_t> convs,
                                const std::function<void(Session&)>& also = {}) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("inferd_" + kind + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);  // a directory left by a dead process of the same pid
  std::filesystem::create_directories(dir);
  const std::string timed = TimedCacheFile(graph, x, dir / "timed");
  const std::regex choice_in_key("( \\+" + kind + "\t)\\d+");
  EXPECT_EQ(std::distance(std::sregex_iterator(timed.begin(), timed.end(), choice_in_key), std::sregex_iterator()), 2)
      << timed;
  for (int choice : {0, 1}) {
    const std::filesystem::path forced = dir / ("forced" + std::to_string(choice));
    std::ofstream(forced) << std::regex_replace(timed, choice_in_key, "$01" + std::to_string(choice));
    auto session = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = forced, .persist_tuning = true, .intra_op_threads = 2});
    EXPECT_TRUE(session.ok());
    if (!session.ok()) break;
    for (const Tensor* input : {&x, &other}) {
      ExpectMatchesReference(**session, graph, *input);
      const std::vector<std::string> implementations = ConvImplementations(**session);
      for (size_t conv : convs) {
        EXPECT_TRUE(implementations.at(conv).starts_with(choice == 0 ? implementation : "onednn:"))
            << choice << ": " << implementations.at(conv);
      }
    }
    if (also) also(**session);
  }
  std::filesystem::remove_all(dir);
  return timed;
}

TEST(TuningTest, BothDepthwiseCandidatesMatchTheReference) {
  ForceEachSimdChoice(DepthwiseChain(), Random({3, 16, 11, 13}, 20), Random({1, 16, 11, 13}, 28), "simd_depthwise",
                      "simd:depthwise_conv:", {1, 2});
}

// x -> Conv 3x3 (16 -> 24) = c -> Conv 1x1 (24 -> 40) + bias + HardSwish -> Conv 1x1 (40 -> 24)
// + c + Relu -> Conv 3x3 (24 -> 8): the two 1x1 layers between 3x3 ones keep their tensors blocked,
// the second with a residual Add written over its residual.
Graph PointwiseChain() {
  GraphBuilder b;
  b.Input("x");
  b.Constant("w_in", Random({24, 16, 3, 3}, 31, -0.3f, 0.3f))
      .Constant("w_expand", Random({40, 24, 1, 1}, 32, -0.3f, 0.3f))
      .Constant("b_expand", Random({40}, 33, -0.5f, 0.5f))
      .Constant("w_project", Random({24, 40, 1, 1}, 34, -0.3f, 0.3f))
      .Constant("w_out", Random({8, 24, 3, 3}, 35, -0.3f, 0.3f));
  const auto pads = Ints({1, 1, 1, 1});
  b.Op("Conv", {"x", "w_in"}, {"c"}, {{"pads", pads}})
      .Op("Conv", {"c", "w_expand", "b_expand"}, {"e"})
      .Op("HardSwish", {"e"}, {"h"})
      .Op("Conv", {"h", "w_project"}, {"p"})
      .Op("Add", {"p", "c"}, {"r"})
      .Op("Relu", {"r"}, {"a"})
      .Op("Conv", {"a", "w_out"}, {"y"}, {{"pads", pads}})
      .Output("y");
  return b.graph();
}

TEST(TuningTest, BothPointwiseCandidatesMatchTheReference) {
  const Tensor x = Random({3, 16, 9, 7}, 30);
  const std::string timed = ForceEachSimdChoice(
      PointwiseChain(), x, Random({1, 16, 9, 7}, 36), "simd_pointwise", "simd:pointwise_conv:", {1, 2},
      [&](Session& session) {
        // The residual's convolution wrote over it on both paths.
        ASSERT_TRUE(session.memory_plan({x.shape}).has_value());
        EXPECT_GE(session.memory_plan({x.shape})->reused_buffers, 1);
      });
  EXPECT_NE(timed.find("post=Add,Relu, residual=[3,24,9,7] +simd_pointwise"), std::string::npos) << timed;
}

// x -> Conv 3x3 (16 -> 24) -> Conv 1x1 (24 -> 40) + bias + Swish -> depthwise 3x3 + Swish -> Conv
// 3x3 (40 -> 8): the two middle layers stay blocked, each with a trailing Swish (x * Sigmoid(x)).
Graph SwishChain() {
  GraphBuilder b;
  b.Input("x");
  b.Constant("w_in", Random({24, 16, 3, 3}, 41, -0.3f, 0.3f))
      .Constant("w_expand", Random({40, 24, 1, 1}, 42, -0.3f, 0.3f))
      .Constant("b_expand", Random({40}, 43, -0.5f, 0.5f))
      .Constant("w_dw", Random({40, 1, 3, 3}, 44, -0.5f, 0.5f))
      .Constant("w_out", Random({8, 40, 3, 3}, 45, -0.3f, 0.3f));
  const auto pads = Ints({1, 1, 1, 1});
  b.Op("Conv", {"x", "w_in"}, {"c"}, {{"pads", pads}})
      .Op("Conv", {"c", "w_expand", "b_expand"}, {"e"})
      .Op("Sigmoid", {"e"}, {"e_gate"})
      .Op("Mul", {"e", "e_gate"}, {"e_swish"})
      .Op("Conv", {"e_swish", "w_dw"}, {"d"}, {{"group", Int(40)}, {"pads", pads}})
      .Op("Sigmoid", {"d"}, {"d_gate"})
      .Op("Mul", {"d", "d_gate"}, {"d_swish"})
      .Op("Conv", {"d_swish", "w_out"}, {"y"}, {{"pads", pads}})
      .Output("y");
  return b.graph();
}

// A layer with a trailing Swish has three ways to run, each timed: our kernel applying it in its
// epilogue (0), oneDNN's swish post-op (1), oneDNN then our pass over the output (2). Forced each
// way, both layers match the reference and run what was forced.
TEST(TuningTest, EachWayToRunATrailingSwishMatchesTheReference) {
  const Graph graph = SwishChain();
  const Tensor x = Random({2, 16, 9, 7}, 40);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("inferd_swish_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);  // a directory left by a dead process of the same pid
  std::filesystem::create_directories(dir);
  const std::string timed = TimedCacheFile(graph, x, dir / "timed");
  const std::regex choice_in_key("( swish_in_kernel \\+swish_post_op\t)\\d+");
  EXPECT_EQ(std::distance(std::sregex_iterator(timed.begin(), timed.end(), choice_in_key), std::sregex_iterator()), 2)
      << timed;
  for (int choice : {0, 1, 2}) {
    SCOPED_TRACE("choice " + std::to_string(choice));
    const std::filesystem::path forced = dir / ("forced" + std::to_string(choice));
    std::ofstream(forced) << std::regex_replace(timed, choice_in_key, "$01" + std::to_string(choice));
    auto session = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = forced, .persist_tuning = true, .intra_op_threads = 2});
    ASSERT_TRUE(session.ok());
    ExpectMatchesReference(**session, graph, x);
    const std::vector<std::string> implementations = ConvImplementations(**session);
    for (size_t conv : {1, 2}) {
      const std::string& used = implementations.at(conv);
      EXPECT_TRUE(used.starts_with(choice == 0 ? "simd:" : "onednn:")) << used;
      EXPECT_EQ(used.ends_with(" + swish post-op"), choice == 1) << used;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(TuningTest, KernelsPreparedOnOneThreadRunOnAnother) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("inferd_threads_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);  // a directory left by a dead process of the same pid
  std::filesystem::create_directories(dir);
  const Graph graph = TwoConvs();
  const Tensor x = Random({4, 8, 12, 12}, 13);
  const std::string timed = TimedCacheFile(graph, x, dir / "timed");
  std::set<std::string> implementations;
  for (int choice : {0, 1, 2}) {
    const std::filesystem::path forced = dir / ("forced" + std::to_string(choice));
    std::ofstream(forced) << std::regex_replace(timed, std::regex("\t\\d+\n"), "\t" + std::to_string(choice) + "\n");
    auto session = Session::FromGraph(graph, {.tune = TuneMode::kFast, .tuning_cache = forced, .persist_tuning = true, .intra_op_threads = 2});
    ASSERT_TRUE(session.ok());
    auto run_on_a_new_thread = [&] {
      std::thread([&] {
        SetIntraOpThreads(2);
        ExpectMatchesReference(**session, graph, x);
      }).join();
    };
    run_on_a_new_thread();  // the loading thread: primitives are made here
    run_on_a_new_thread();  // an instance thread
    for (const std::string& implementation : ConvImplementations(**session)) implementations.insert(implementation);
  }
  // The test means something only if some candidate needed a scratchpad: among oneDNN's first
  // three, the GEMM-based convolution (im2col) on AVX2, the brgemm-based one on AVX-512.
  EXPECT_TRUE(std::any_of(implementations.begin(), implementations.end(), [](const std::string& name) {
    return name.find("gemm") != std::string::npos || name.find("brgconv") != std::string::npos;
  })) << ::testing::PrintToString(implementations);
  std::filesystem::remove_all(dir);
}

// Each candidate warms up once, then the timed runs go round the candidates (a slow spell of the
// machine falls on all alike), and the fastest is chosen.
TEST(TuningTest, ChooseFastestTimesTheCandidatesInRounds) {
  TuningCache cache;
  const RunScope scope({TuneMode::kFast, &cache, nullptr});
  std::vector<int> order;
  const int choice = ChooseFastest("op", 3, 0, [&](int candidate) -> Status {
    order.push_back(candidate);
    if (candidate == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (candidate == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    return Status::Ok();
  });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(choice, 1);
}

TEST(TuningTest, ChooseFastestUsesTheCacheAndSkipsFailingCandidates) {
  TuningCache cache;
  const RunScope scope({TuneMode::kFast, &cache, nullptr});
  int runs_of_first = 0;
  const int choice = ChooseFastest("op", 2, 0, [&](int candidate) -> Status {
    if (candidate == 0) {
      ++runs_of_first;
      return Status::Internal("cannot run");
    }
    return Status::Ok();
  });
  EXPECT_EQ(choice, 1);
  EXPECT_EQ(runs_of_first, 1);
  EXPECT_EQ(cache.Find("op"), 1);
  // Cached: no timing at all.
  EXPECT_EQ(ChooseFastest("op", 2, 0, [](int) -> Status { return Status::Internal("must not run"); }), 1);
  EXPECT_FALSE(ParseTuneMode("sometimes").ok());
}

}  // namespace
}  // namespace inferd::runtime
