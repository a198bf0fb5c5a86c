// Our own SIMD kernels (runtime/kernels/simd/), each run on every SIMD target that Highway
// compiled and this CPU supports (on an AVX2 machine: AVX2, SSE4, SSSE3, and the portable
// EMU128/scalar ones), against a plain loop. One source serves them all, so a target this machine
// lacks (AVX-512) runs the logic these tests check.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/kernels/simd/global_pool.h"

namespace inferd::runtime::simd {
namespace {

// Runs `body` once per target, with dispatch forced to it; restores the default after.
template <typename Body>
void OnEveryTarget(const Body& body) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    EXPECT_EQ(DispatchedTargetName(), hwy::TargetName(target));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

std::vector<float> RandomValues(size_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> value(-4, 4);
  std::vector<float> values(count);
  for (float& v : values) v = value(random);
  return values;
}

// The blocked layout's index of (image, channel, pixel), or NCHW's with block 1.
size_t At(const GlobalPoolShape& s, int64_t n, int64_t c, int64_t p) {
  const int64_t blocks = (s.channels + s.block - 1) / s.block;
  return static_cast<size_t>(((n * blocks + c / s.block) * s.pixels + p) * s.block + c % s.block);
}

void CheckGlobalPool(PoolReduction reduction, const GlobalPoolShape& s) {
  const int64_t blocks = (s.channels + s.block - 1) / s.block;
  std::vector<float> x = RandomValues(static_cast<size_t>(s.batch * blocks * s.pixels * s.block), 3);
  for (int64_t n = 0; n < s.batch; ++n) {  // a blocked layout's padded channels are zero
    for (int64_t c = s.channels; c < blocks * s.block; ++c) {
      for (int64_t p = 0; p < s.pixels; ++p) x[At(s, n, c, p)] = 0;
    }
  }
  std::vector<float> y(static_cast<size_t>(s.batch * blocks * s.block), 99.0f);
  GlobalPool(reduction, s, x.data(), y.data());
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t c = 0; c < blocks * s.block; ++c) {
      double expected = reduction == PoolReduction::kMax ? -INFINITY : 0;
      for (int64_t p = 0; p < s.pixels; ++p) {
        const float v = x[At(s, n, c, p)];
        expected = reduction == PoolReduction::kMax ? std::max<double>(expected, v) : expected + v;
      }
      if (reduction == PoolReduction::kMean) expected /= static_cast<double>(s.pixels);
      const float got = y[static_cast<size_t>((n * blocks + c / s.block) * s.block + c % s.block)];
      ASSERT_NEAR(got, expected, 1e-5 * std::max(1.0, std::abs(expected)))
          << "n=" << n << " c=" << c << " pixels=" << s.pixels << " block=" << s.block;
    }
  }
}

TEST(SimdGlobalPoolTest, MatchesAPlainLoopOnEveryTargetLayoutAndSize) {
  OnEveryTarget([] {
    for (PoolReduction reduction : {PoolReduction::kMean, PoolReduction::kMax}) {
      for (int64_t block : {1, 8, 16}) {
        // Pixel counts below, at and above a step of every vector width, odd ones for the tails;
        // channel counts that leave a blocked layout's last block part padding.
        for (int64_t pixels : {1, 3, 7, 49, 64, 197}) {
          for (int64_t channels : {1, 8, 21, 40}) {
            CheckGlobalPool(reduction, {.batch = 2, .channels = channels, .pixels = pixels, .block = block});
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace inferd::runtime::simd
