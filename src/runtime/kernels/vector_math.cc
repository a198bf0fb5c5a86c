#include "runtime/kernels/vector_math.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "runtime/kernels/simd/swish.h"
#include "runtime/threading.h"

namespace inferd::runtime {
namespace {

constexpr int64_t kGrain = 1 << 14;  // elements per parallel item: enough to pay the fork

// One image-and-channel-block's pixels times its factors (`block` lanes each, block % 8 == 0).
__attribute__((target("avx2,fma"))) void ScaleBlockAvx2(const float* x, const float* factors, float* y, int64_t pixels,
                                                        int64_t block) {
  if (block == 8) {  // the AVX2 layout: one register of factors for every pixel
    const __m256 f = _mm256_loadu_ps(factors);
    for (int64_t p = 0; p < pixels; ++p) _mm256_storeu_ps(y + p * 8, _mm256_mul_ps(_mm256_loadu_ps(x + p * 8), f));
    return;
  }
  for (int64_t p = 0; p < pixels; ++p) {
    for (int64_t v = 0; v < block; v += 8) {
      _mm256_storeu_ps(y + p * block + v, _mm256_mul_ps(_mm256_loadu_ps(x + p * block + v), _mm256_loadu_ps(factors + v)));
    }
  }
}

void ScaleBlockScalar(const float* x, const float* factors, float* y, int64_t pixels, int64_t block) {
  for (int64_t p = 0; p < pixels; ++p) {
    for (int64_t l = 0; l < block; ++l) y[p * block + l] = x[p * block + l] * factors[l];
  }
}

}  // namespace

void ScaleChannelBlocks(const float* x, const float* factors, float* y, int64_t blocks, int64_t pixels, int64_t block) {
  const bool avx2 = CpuHasAvx2Fma() && block % 8 == 0;
  const int64_t per_item = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, pixels * block));
  const int64_t items = (blocks + per_item - 1) / per_item;
  ParallelFor(items, [&](int64_t first, int64_t last) {
    for (int64_t b = first * per_item; b < std::min(blocks, last * per_item); ++b) {
      const int64_t offset = b * pixels * block;
      (avx2 ? ScaleBlockAvx2 : ScaleBlockScalar)(x + offset, factors + b * block, y + offset, pixels, block);
    }
  });
}

bool CpuHasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

void SwishInPlace(float* data, int64_t count) {
  const int64_t items = (count + kGrain - 1) / kGrain;
  ParallelFor(items, [&](int64_t first, int64_t last) {
    const int64_t begin = first * kGrain, end = std::min(count, last * kGrain);
    simd::Swish(data + begin, static_cast<size_t>(end - begin));
  });
}

void SwishQuantize(const float* x, int64_t count, float scale, int32_t zero_point, bool is_signed, void* y) {
  const int64_t items = (count + kGrain - 1) / kGrain;
  ParallelFor(items, [&](int64_t first, int64_t last) {
    const int64_t begin = first * kGrain, end = std::min(count, last * kGrain);
    simd::SwishQuantize(x + begin, static_cast<size_t>(end - begin), scale, zero_point, is_signed,
                        static_cast<uint8_t*>(y) + begin);  // one byte per value
  });
}

}  // namespace inferd::runtime
