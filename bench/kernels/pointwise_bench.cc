// Our 1x1 convolution kernel (runtime/kernels/simd/pointwise_conv) alone, on the shapes of
// resnet50's and mobilenet_v3_large's 1x1 layers at batch 8, one and two intra-op threads.
// Prints GFLOP/s per shape: where the kernel stands against the core's peak, without the model
// around it (docs/BENCHMARKS.md, issue 19).
//   build/bench/pointwise_kernel_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "runtime/kernels/simd/pointwise_conv.h"
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

// Arguments: input channels, output channels, height (= width), threads, residual (0/1).
void BM_Pointwise(benchmark::State& state) {
  const PointwiseShape shape{.batch = 8, .in_channels = state.range(0), .out_channels = state.range(1),
                             .block = 16, .pixels = state.range(2) * state.range(2)};
  if (!inferd::runtime::SetIntraOpThreads(static_cast<int>(state.range(3))) || kOneDnnVersion == nullptr) {
    state.SkipWithError("no OpenMP runtime loaded");
    return;
  }
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
  std::vector<float> flush(64 << 20 >> 2);
  for (auto _ : state) {
    if (getenv("COLD")) { state.PauseTiming(); for (size_t i = 0; i < flush.size(); i += 16) flush[i] += 1.0f; state.ResumeTiming(); }
    inferd::runtime::simd::PointwiseConv(shape, x.data(), packed.data(), epilogue, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * shape.batch * shape.pixels * shape.in_channels * shape.out_channels;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void ResnetAndMobilenetShapes(benchmark::internal::Benchmark* b) {
  const int64_t shapes[][4] = {
      // resnet50: {in, out, size, residual}
      {64, 64, 56, 0}, {64, 256, 56, 1}, {256, 64, 56, 0}, {256, 128, 56, 0}, {128, 512, 28, 1},
      {512, 128, 28, 0}, {512, 256, 28, 0}, {256, 1024, 14, 1}, {1024, 256, 14, 0}, {1024, 512, 14, 0},
      {512, 2048, 7, 1}, {2048, 512, 7, 0},
      // mobilenet_v3_large's expansions and projections
      {16, 64, 112, 0}, {24, 72, 56, 0}, {40, 120, 28, 0}, {80, 480, 14, 0}, {480, 112, 14, 0},
      {160, 960, 7, 0}, {960, 160, 7, 1}};
  for (const auto& s : shapes) {
    for (int64_t threads : {1, 2}) b->Args({s[0], s[1], s[2], threads, s[3]});
  }
}

BENCHMARK(BM_Pointwise)->Apply(ResnetAndMobilenetShapes)->ArgNames({"in", "out", "hw", "threads", "residual"})
    ->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
