#include "runtime/kernels/vector_math.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "runtime/threading.h"

namespace inferd::runtime {
namespace {

constexpr int64_t kGrain = 1 << 14;  // elements per parallel item: enough to pay the fork

// exp(x) by Cody-Waite range reduction (x = n ln2 + r, |r| <= ln2/2) and a degree-6 polynomial
// for exp(r) (Cephes' coefficients), then 2^n through the exponent bits. Inputs are clamped to
// [-87, 88], where the result stays a normal float.
__attribute__((target("avx2,fma"))) __m256 Exp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i two_to_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(two_to_n));
}

void SwishRangeScalar(float* data, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) data[i] = data[i] / (1.0f + std::exp(-data[i]));
}

__attribute__((target("avx2,fma"))) void SwishRangeAvx2(float* data, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 x = _mm256_loadu_ps(data + i);
    const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), x));
    _mm256_storeu_ps(data + i, _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
  }
  SwishRangeScalar(data, i, end);
}

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
  const bool avx2 = CpuHasAvx2Fma();
  const int64_t items = (count + kGrain - 1) / kGrain;
  ParallelFor(items, [&](int64_t first, int64_t last) {
    const int64_t begin = first * kGrain, end = std::min(count, last * kGrain);
    avx2 ? SwishRangeAvx2(data, begin, end) : SwishRangeScalar(data, begin, end);
  });
}

}  // namespace inferd::runtime
