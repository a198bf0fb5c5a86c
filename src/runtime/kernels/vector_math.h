// Element-wise math our kernels apply to whole buffers, vectorised where the CPU allows.
//
// Why not oneDNN's: its swish post-op on a convolution costs 3-4 times the convolution itself on
// AVX2 (16->96 channels at 112x112, batch 8: 2.5 ms of convolution, 5.7 ms more with the post-op),
// while a separate pass over the output with the function below takes ~2.7 ms, memory included.
#pragma once

#include <cstdint>

namespace inferd::runtime {

// The CPU runs AVX2 and FMA, which our vectorised kernels (this file, Winograd) are written for.
bool CpuHasAvx2Fma();

// x * sigmoid(x) in place, parallel over the intra-op threads. Relative error <= 2e-7 against
// the double-precision formula; NaN stays NaN.
void SwishInPlace(float* data, int64_t count);

}  // namespace inferd::runtime
