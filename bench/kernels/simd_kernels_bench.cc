// Our SIMD convolution kernels alone (runtime/kernels/simd: the 1x1 and the depthwise; Winograd's
// transforms with oneDNN's matmul between them), on the shapes of resnet50's, mobilenet_v3_large's
// and efficientnet_b0's layers (the 1x1 at batch 1 and 8, the others at 8), in nChw16c (Winograd
// in nChw8c too), one and two intra-op threads. Prints GFLOP/s per shape: where a kernel stands against the
// core's peak without the model around it (docs/BENCHMARKS.md, issue 19).
//   build/bench/simd_kernels_bench [--benchmark_filter=Depthwise]
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/kernels/dnnl/dnnl_winograd.h"
#include "runtime/kernels/simd/depthwise_conv.h"
#include "runtime/kernels/simd/pointwise_conv.h"
#include "runtime/kernels/simd/targets.h"
#include "runtime/threading.h"

namespace {

// The intra-op threads are libgomp's, which oneDNN loads: referring to oneDNN keeps it linked
// (the kernels alone would not need it, and two threads would quietly run as one).
const dnnl_version_t* const kOneDnnVersion = dnnl_version();

using inferd::runtime::simd::PointwiseShape;

std::vector<float> RandomValues(size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = value(generator);
  return values;
}

bool UseThreads(benchmark::State& state, int64_t threads) {
  inferd::runtime::simd::CapTargetsLikeOneDnn();  // ONEDNN_MAX_CPU_ISA=AVX2 runs ours as AVX2 too
  if (!inferd::runtime::SetIntraOpThreads(static_cast<int>(threads)) || kOneDnnVersion == nullptr) {
    state.SkipWithError("no OpenMP runtime loaded");
    return false;
  }
  return true;
}

// Arguments: input channels, output channels, height (= width), threads, residual (0/1), batch.
void BM_Pointwise(benchmark::State& state) {
  const PointwiseShape shape{.batch = state.range(5),
                             .in_channels = state.range(0),
                             .out_channels = state.range(1),
                             .block = 16,
                             .pixels = state.range(2) * state.range(2)};
  if (!UseThreads(state, state.range(3))) return;
  const auto padded = [&](int64_t channels) { return static_cast<size_t>((channels + 15) / 16 * 16); };
  const std::vector<float> x = RandomValues(shape.batch * padded(shape.in_channels) * shape.pixels, 1);
  const std::vector<float> weights = RandomValues(shape.in_channels * shape.out_channels, 2);
  const std::vector<float> packed = inferd::runtime::simd::PackPointwiseWeights(weights.data(), shape);
  const std::vector<float> bias(padded(shape.out_channels), 0.5f);
  std::vector<float> residual = RandomValues(shape.batch * padded(shape.out_channels) * shape.pixels, 3);
  std::vector<float> y(residual.size());
  inferd::runtime::simd::PointwiseEpilogue epilogue{.bias = bias.data(),
                                                    .residual = state.range(4) ? residual.data() : nullptr};
  epilogue.activation.kind = inferd::runtime::simd::Activation::Kind::kRelu;
  for (auto _ : state) {
    inferd::runtime::simd::PointwiseConv(shape, x.data(), packed.data(), epilogue, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * shape.batch * shape.pixels * shape.in_channels * shape.out_channels;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void ResnetAndMobilenetShapes(benchmark::internal::Benchmark* b) {
  // clang-format off
  const int64_t shapes[][4] = {
      // resnet50: {in, out, size, residual}
      {64, 64, 56, 0}, {64, 256, 56, 1}, {256, 64, 56, 0}, {256, 128, 56, 0}, {128, 512, 28, 1},
      {512, 128, 28, 0}, {512, 256, 28, 0}, {256, 1024, 14, 1}, {1024, 256, 14, 0}, {1024, 512, 14, 0},
      {512, 2048, 7, 1}, {2048, 512, 7, 0},
      // mobilenet_v3_large's expansions and projections
      {16, 64, 112, 0}, {24, 72, 56, 0}, {40, 120, 28, 0}, {80, 480, 14, 0}, {480, 112, 14, 0},
      {160, 960, 7, 0}, {960, 160, 7, 1}};
  // clang-format on
  for (const auto& s : shapes) {
    for (int64_t batch : {1, 8}) {
      for (int64_t threads : {1, 2}) b->Args({s[0], s[1], s[2], threads, s[3], batch});
    }
  }
}

BENCHMARK(BM_Pointwise)
    ->Apply(ResnetAndMobilenetShapes)
    ->ArgNames({"in", "out", "hw", "threads", "residual", "batch"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Arguments: channels, input height (= width), kernel size, stride, threads; Swish after it (as in
// efficientnet_b0) where the last is 1.
void BM_Depthwise(benchmark::State& state) {
  const int64_t size = state.range(1), kernel = state.range(2), stride = state.range(3);
  const int64_t pad = kernel / 2, out = (size + 2 * pad - kernel) / stride + 1;
  const inferd::runtime::simd::DepthwiseShape shape{.batch = 8,
                                                    .channels = state.range(0),
                                                    .block = 16,
                                                    .in_h = size,
                                                    .in_w = size,
                                                    .out_h = out,
                                                    .out_w = out,
                                                    .kernel_h = kernel,
                                                    .kernel_w = kernel,
                                                    .stride_h = stride,
                                                    .stride_w = stride,
                                                    .pad_top = pad,
                                                    .pad_left = pad};
  if (!UseThreads(state, state.range(4))) return;
  const auto padded = static_cast<size_t>((shape.channels + 15) / 16 * 16);
  const std::vector<float> x = RandomValues(shape.batch * padded * size * size, 1);
  const std::vector<float> weights = RandomValues(shape.channels * kernel * kernel, 2);
  const std::vector<float> packed = inferd::runtime::simd::PackDepthwiseWeights(weights.data(), shape);
  const std::vector<float> bias(padded, 0.5f);
  std::vector<float> y(shape.batch * padded * out * out);
  inferd::runtime::simd::Activation activation;
  activation.kind = state.range(5) ? inferd::runtime::simd::Activation::Kind::kSwish
                                   : inferd::runtime::simd::Activation::Kind::kRelu;
  for (auto _ : state) {
    inferd::runtime::simd::DepthwiseConv(shape, x.data(), packed.data(), bias.data(), activation, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * shape.batch * shape.channels * out * out * kernel * kernel;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void DepthwiseShapes(benchmark::internal::Benchmark* b) {
  // clang-format off
  const int64_t shapes[][5] = {
      // efficientnet_b0 {channels, size, kernel, stride, swish}
      {32, 112, 3, 1, 1}, {96, 112, 3, 2, 1}, {144, 56, 3, 1, 1}, {144, 56, 5, 2, 1}, {240, 28, 5, 1, 1},
      {240, 28, 3, 2, 1}, {480, 14, 3, 1, 1}, {480, 14, 5, 1, 1}, {672, 14, 5, 1, 1}, {1152, 7, 5, 1, 1},
      {1152, 7, 3, 1, 1},
      // mobilenet_v3_large (ReLU or none in the model; ReLU here)
      {64, 112, 3, 2, 0}, {72, 56, 3, 1, 0}, {72, 56, 5, 2, 0}, {120, 28, 5, 1, 0}, {240, 28, 3, 2, 0},
      {200, 14, 3, 1, 0}, {480, 14, 3, 1, 0}, {672, 14, 5, 2, 0}, {960, 7, 5, 1, 0}};
  // clang-format on
  for (const auto& s : shapes) {
    for (int64_t threads : {1, 2}) b->Args({s[0], s[1], s[2], s[3], threads, s[4]});
  }
}

BENCHMARK(BM_Depthwise)
    ->Apply(DepthwiseShapes)
    ->ArgNames({"c", "hw", "k", "s", "threads", "swish"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Winograd (kernels/dnnl/dnnl_winograd.h: our transforms around oneDNN's batched matmul) on
// resnet50's 3x3 layers, batch 8. Arguments: channels (in = out), height (= width), output tile
// (2 or 4), the layout's block (8 or 16), threads. GFLOP/s counts a direct convolution's work.
void BM_Winograd(benchmark::State& state) {
  using inferd::runtime::dnnl_kernels::WinogradConv;
  const int64_t channels = state.range(0), size = state.range(1), block = state.range(3), batch = 8;
  const auto tile = static_cast<int>(state.range(2));
  if (!UseThreads(state, state.range(4))) return;
  auto conv = WinogradConv::Create({.batch = batch,
                                    .in_channels = channels,
                                    .out_channels = channels,
                                    .in_h = size,
                                    .in_w = size,
                                    .out_h = size,
                                    .out_w = size,
                                    .pad_top = 1,
                                    .pad_left = 1,
                                    .layout_block = block},
                                   {{inferd::runtime::PostOp::Kind::kRelu}}, tile);
  const std::vector<float> weights = RandomValues(channels * channels * 9, 2);
  auto transformed = WinogradConv::TransformWeights(weights.data(), tile, channels, channels);
  if (!conv.ok() || !transformed.ok()) {
    state.SkipWithError("Winograd does not apply");
    return;
  }
  const std::vector<float> x = RandomValues(batch * channels * size * size, 1);
  const std::vector<float> bias(channels, 0.5f);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    if (!(*conv)->Run(x.data(), *transformed, bias.data(), nullptr, y.data()).ok())
      state.SkipWithError("failed");
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * batch * channels * channels * 9 * size * size;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void ResnetThreeByThreeShapes(benchmark::internal::Benchmark* b) {
  for (const auto& [channels, size] : {std::pair{64, 56}, {128, 28}, {256, 14}, {512, 7}}) {
    for (int64_t tile : {2, 4}) {
      for (int64_t block : {8, 16}) b->Args({channels, size, tile, block, 2});
    }
  }
}

BENCHMARK(BM_Winograd)
    ->Apply(ResnetThreeByThreeShapes)
    ->ArgNames({"c", "hw", "tile", "block", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
