#include "runtime/kernels/vector_math.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/simd/channel_scale.h"
#include "runtime/kernels/simd/swish.h"
#include "runtime/threading.h"

namespace inferd::runtime {
namespace {

constexpr int64_t kGrain = 1 << 14;  // elements per parallel item: enough to pay the fork

// `pass(begin, count)` over [0, count) in kGrain pieces on the intra-op threads.
template <typename Pass>
void ForEachPiece(int64_t count, const Pass& pass) {
  ParallelFor((count + kGrain - 1) / kGrain, [&](int64_t first, int64_t last) {
    const int64_t begin = first * kGrain;
    pass(begin, static_cast<size_t>(std::min(count, last * kGrain) - begin));
  });
}

}  // namespace

void ScaleChannelBlocks(const float* x, const float* factors, void* y, int64_t blocks, int64_t pixels, int64_t block,
                        const simd::ChannelScaleOutput& output) {
  const int64_t value_bytes = output.quantised ? 1 : static_cast<int64_t>(sizeof(float));
  // Items of a block's pixels, so that NHWC's few large blocks (one per image) split too.
  const int64_t chunk = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, block));
  const int64_t chunks = (pixels + chunk - 1) / chunk;
  ParallelFor(blocks * chunks, [&](int64_t first, int64_t last) {
    for (int64_t item = first; item < last; ++item) {
      const int64_t b = item / chunks, pixel = item % chunks * chunk;
      const int64_t offset = (b * pixels + pixel) * block;
      simd::ScaleChannelBlock(x + offset, factors + b * block, static_cast<uint8_t*>(y) + offset * value_bytes,
                              std::min(chunk, pixels - pixel), block, output);
    }
  });
}

void SwishInPlace(float* data, int64_t count) {
  ForEachPiece(count, [&](int64_t begin, size_t n) { simd::Swish(data + begin, n); });
}

// (One byte per quantised value.)
void SwishQuantize(const float* x, int64_t count, float scale, int32_t zero_point, bool is_signed, void* y) {
  ForEachPiece(count, [&](int64_t begin, size_t n) {
    simd::SwishQuantize(x + begin, n, scale, zero_point, is_signed, static_cast<uint8_t*>(y) + begin);
  });
}

void QuantizeInto(const float* x, int64_t count, float scale, int32_t zero_point, bool is_signed, void* y) {
  ForEachPiece(count, [&](int64_t begin, size_t n) {
    simd::QuantizeValues(x + begin, n, scale, zero_point, is_signed, static_cast<uint8_t*>(y) + begin);
  });
}

}  // namespace inferd::runtime
