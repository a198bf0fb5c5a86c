#include "backends/image/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace inferd {
namespace {

// For each kept output coordinate, the source range and normalised weights of PIL's bilinear
// (triangle) filter resampling `in_size` pixels to `out_size`.
struct Taps {
  std::vector<int> first;       // per output coordinate
  std::vector<int> count;
  std::vector<float> weights;   // `stride` per output coordinate
  int stride = 0;
};

Taps TriangleTaps(int in_size, int out_size, int out_first, int out_count) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle's support is 1, widened when shrinking
  Taps taps;
  taps.stride = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.first.resize(static_cast<size_t>(out_count));
  taps.count.resize(static_cast<size_t>(out_count));
  taps.weights.assign(static_cast<size_t>(out_count) * static_cast<size_t>(taps.stride), 0.0f);
  for (int i = 0; i < out_count; ++i) {
    const double center = (out_first + i + 0.5) * scale;
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    const int n = std::max(0, std::min(hi - lo, taps.stride));
    auto weight = [&](int k) { return std::max(0.0, 1.0 - std::abs((lo + k - center + 0.5) / filter_scale)); };
    double sum = 0;
    for (int k = 0; k < n; ++k) sum += weight(k);
    taps.first[static_cast<size_t>(i)] = lo;
    taps.count[static_cast<size_t>(i)] = n;
    for (int k = 0; k < n; ++k) {
      taps.weights[static_cast<size_t>(i * taps.stride + k)] = static_cast<float>(sum > 0 ? weight(k) / sum : 0);
    }
  }
  return taps;
}

inline uint8_t RoundToPixel(float value) {
  return static_cast<uint8_t>(std::clamp(std::floor(value + 0.5f), 0.0f, 255.0f));
}

}  // namespace

ResizePlan PlanResize(int image_width, int image_height, const ImageTransform& transform) {
  if (transform.resize == ResizeMode::kPlain) return {transform.width, transform.height, 0, 0};
  // torchvision's Resize(int): the shorter side becomes `shorter_side`, the longer one keeps the
  // ratio (truncated); CenterCrop rounds the offsets half to even, as Python's round() does.
  ResizePlan plan;
  const int side = transform.shorter_side;
  if (image_width <= image_height) {
    plan.resized_width = side;
    plan.resized_height = static_cast<int>(static_cast<int64_t>(side) * image_height / image_width);
  } else {
    plan.resized_height = side;
    plan.resized_width = static_cast<int>(static_cast<int64_t>(side) * image_width / image_height);
  }
  plan.left = static_cast<int>(std::nearbyint((plan.resized_width - transform.width) / 2.0));
  plan.top = static_cast<int>(std::nearbyint((plan.resized_height - transform.height) / 2.0));
  return plan;
}

void TransformImage(const DecodedImage& image, const ImageTransform& transform, float* out) {
  const ResizePlan plan = PlanResize(image.width, image.height, transform);
  const int c = image.channels;
  const Taps columns = TriangleTaps(image.width, plan.resized_width, plan.left, transform.width);
  const Taps rows = TriangleTaps(image.height, plan.resized_height, plan.top, transform.height);
  const int src_top = rows.first.front();
  const int src_bottom = rows.first.back() + rows.count.back();

  // Horizontal pass over the source rows the kept output rows read.
  std::vector<uint8_t> horizontal(static_cast<size_t>(src_bottom - src_top) * transform.width * c);
  for (int y = src_top; y < src_bottom; ++y) {
    const uint8_t* src = image.pixels.data() + static_cast<size_t>(y) * image.width * c;
    uint8_t* dst = horizontal.data() + static_cast<size_t>(y - src_top) * transform.width * c;
    for (int x = 0; x < transform.width; ++x) {
      const float* w = &columns.weights[static_cast<size_t>(x * columns.stride)];
      const uint8_t* from = src + static_cast<size_t>(columns.first[static_cast<size_t>(x)]) * c;
      for (int ch = 0; ch < c; ++ch) {
        float sum = 0;
        for (int k = 0; k < columns.count[static_cast<size_t>(x)]; ++k) sum += w[k] * from[k * c + ch];
        dst[x * c + ch] = RoundToPixel(sum);
      }
    }
  }

  // Vertical pass, then normalisation straight into the output layout.
  const size_t plane = static_cast<size_t>(transform.width) * transform.height;
  float factor[3], offset[3];  // value = pixel * factor - offset, per output channel
  for (int ch = 0; ch < c; ++ch) {
    factor[ch] = transform.scale / transform.std[static_cast<size_t>(ch)];
    offset[ch] = transform.mean[static_cast<size_t>(ch)] / transform.std[static_cast<size_t>(ch)];
  }
  for (int y = 0; y < transform.height; ++y) {
    const float* w = &rows.weights[static_cast<size_t>(y * rows.stride)];
    const int first = rows.first[static_cast<size_t>(y)] - src_top;
    const int count = rows.count[static_cast<size_t>(y)];
    for (int x = 0; x < transform.width; ++x) {
      for (int ch = 0; ch < c; ++ch) {
        float sum = 0;
        for (int k = 0; k < count; ++k) {
          sum += w[k] * horizontal[(static_cast<size_t>(first + k) * transform.width + x) * c + ch];
        }
        const int out_ch = transform.bgr && c == 3 ? 2 - ch : ch;
        const float value = RoundToPixel(sum) * factor[out_ch] - offset[out_ch];
        const size_t pixel = static_cast<size_t>(y) * transform.width + x;
        if (transform.layout == TensorLayout::kNchw)
          out[static_cast<size_t>(out_ch) * plane + pixel] = value;
        else
          out[pixel * c + out_ch] = value;
      }
    }
  }
}

}  // namespace inferd
