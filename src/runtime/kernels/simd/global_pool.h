// Global average and max pooling: per (image, channel), the mean or the maximum over its pixels,
// in NCHW or in oneDNN's blocked nChw{block}c (dnnl_layout.h).
//
// Why we write it: on AVX-512 servers oneDNN 2.6's pooling ran GlobalAveragePool at 0.39x ORT's
// speed (issue 19, batch 8), and on AVX2 efficientnet_b0's 17 global pools took 3.5 ms against
// ORT's 2.9. It is offered to the pooling kernel's tuning next to oneDNN's primitive, so it runs
// where it measures faster on the machine the model runs on.
//
// One source for every x86 SIMD target (docs/ARCHITECTURE.md, "Our own SIMD kernels"): Highway compiles it for each and picks
// the best the CPU has at run time, so what the tests run on this machine's targets is the code
// that runs on AVX-512.
#pragma once

#include <cstdint>
#include <string>

namespace inferd::runtime::simd {

enum class PoolReduction { kMean, kMax };

struct GlobalPoolShape {
  int64_t batch = 0, channels = 0, pixels = 0;
  int64_t block = 1;  // 1: NCHW; 8 or 16: nChw8c / nChw16c (channels padded to a multiple)
};

// x: N x ceil(C / block) x pixels x block floats; y: N x ceil(C / block) x block (a blocked y's
// padded channels come out 0, from a blocked x's zero padding). Parallel over the intra-op threads.
void GlobalPool(PoolReduction reduction, const GlobalPoolShape& shape, const float* x, float* y);

// The SIMD target the kernels in this folder run on now, as Highway names it ("AVX2", "AVX3",
// "SSE4"...), for Kernel::Implementation().
std::string DispatchedTargetName();

}  // namespace inferd::runtime::simd
