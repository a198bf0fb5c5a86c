#include "runtime/kernels/simd/global_pool.h"

#include <algorithm>
#include <cstddef>
#include <limits>

// Highway re-includes this file once per SIMD target (foreach_target.h); the code between
// HWY_BEFORE_NAMESPACE and HWY_AFTER_NAMESPACE is compiled for each.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/simd/global_pool.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace inferd::runtime::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct SumOp {
  template <class V>
  V operator()(V a, V b) const { return hn::Add(a, b); }
  float operator()(float a, float b) const { return a + b; }
  static constexpr float kStart = 0.0f;
};
struct MaxOp {
  template <class V>
  V operator()(V a, V b) const { return hn::Max(a, b); }
  float operator()(float a, float b) const { return std::max(a, b); }
  static constexpr float kStart = -std::numeric_limits<float>::infinity();
};

// Reduces one plane, `pixels` x `block` floats, into `out[block]`. The plane is read as one flat
// run: with a step that is a multiple of the block, the float at offset i of a step belongs to
// channel i % block, so four vector accumulators fold into the block's channels at the end,
// whatever the vector width and the block (1, 8, 16).
template <class Op>
void ReducePlane(const float* HWY_RESTRICT x, size_t pixels, size_t block, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const size_t total = pixels * block;
  constexpr size_t kMaxStep = 4 * HWY_LANES(float) > 16 ? 4 * HWY_LANES(float) : 16;
  HWY_ALIGN float folded[kMaxStep];
  const Op op;
  size_t step = 4 * lanes, i = 0;
  if (step % block == 0) {
    auto a0 = hn::Set(d, Op::kStart), a1 = a0, a2 = a0, a3 = a0;
    for (; i + step <= total; i += step) {
      a0 = op(a0, hn::LoadU(d, x + i));
      a1 = op(a1, hn::LoadU(d, x + i + lanes));
      a2 = op(a2, hn::LoadU(d, x + i + 2 * lanes));
      a3 = op(a3, hn::LoadU(d, x + i + 3 * lanes));
    }
    hn::Store(a0, d, folded);
    hn::Store(a1, d, folded + lanes);
    hn::Store(a2, d, folded + 2 * lanes);
    hn::Store(a3, d, folded + 3 * lanes);
  } else {
    // Narrow vectors against a wide block (the scalar target, block 16): one block per step.
    step = block;
    std::fill(folded, folded + step, Op::kStart);
    for (; i + step <= total; i += step) {
      for (size_t j = 0; j < step; j += lanes) hn::Store(op(hn::Load(d, folded + j), hn::LoadU(d, x + i + j)), d, folded + j);
    }
  }
  std::fill(out, out + block, Op::kStart);
  for (size_t j = 0; j < step; ++j) out[j % block] = op(out[j % block], folded[j]);
  for (; i < total; ++i) out[i % block] = op(out[i % block], x[i]);
}

void PoolPlanes(int reduction, const float* x, int64_t first_plane, int64_t planes, int64_t pixels, int64_t block,
                float* y) {
  const auto n = static_cast<size_t>(pixels), b = static_cast<size_t>(block);
  const float scale = 1.0f / static_cast<float>(pixels);
  for (int64_t plane = first_plane; plane < first_plane + planes; ++plane) {
    const float* in = x + static_cast<size_t>(plane) * n * b;
    float* out = y + static_cast<size_t>(plane) * b;
    if (reduction == static_cast<int>(PoolReduction::kMax)) {
      ReducePlane<MaxOp>(in, n, b, out);
    } else {
      ReducePlane<SumOp>(in, n, b, out);
      for (size_t c = 0; c < b; ++c) out[c] *= scale;
    }
  }
}

int64_t CompiledTarget() { return HWY_TARGET; }

}  // namespace inferd::runtime::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "runtime/threading.h"

namespace inferd::runtime::simd {

HWY_EXPORT(PoolPlanes);
HWY_EXPORT(CompiledTarget);

void GlobalPool(PoolReduction reduction, const GlobalPoolShape& shape, const float* x, float* y) {
  const int64_t planes = shape.batch * ((shape.channels + shape.block - 1) / shape.block);
  ParallelFor(planes, [&](int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(PoolPlanes)(static_cast<int>(reduction), x, begin, end - begin, shape.pixels, shape.block, y);
  });
}

std::string DispatchedTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(CompiledTarget)()); }

}  // namespace inferd::runtime::simd
#endif
