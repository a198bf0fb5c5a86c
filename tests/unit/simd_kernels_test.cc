// Our own SIMD kernels (runtime/kernels/simd/), each run on every SIMD target that Highway
// compiled and this CPU supports (on an AVX2 machine: AVX2, SSE4, SSSE3, and the portable
// EMU128/scalar ones), against a plain loop. One source serves them all, so a target this machine
// lacks (AVX-512) runs the logic these tests check.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "runtime/kernels/quantize_rules.h"
#include "runtime/kernels/simd/channel_scale.h"
#include "runtime/kernels/simd/channels_last_quantize.h"
#include "runtime/kernels/simd/depthwise_conv.h"
#include "runtime/kernels/simd/depthwise_int8.h"
#include "runtime/kernels/simd/dynamic_quantize.h"
#include "runtime/kernels/simd/global_pool.h"
#include "runtime/kernels/simd/pointwise_conv.h"
#include "runtime/kernels/simd/swish.h"
#include "runtime/kernels/simd/targets.h"

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

float Activated(const Activation& a, float v) {
  switch (a.kind) {
    case Activation::Kind::kNone: return v;
    case Activation::Kind::kRelu: return std::max(v, 0.0f);
    case Activation::Kind::kClip: return std::min(std::max(v, a.low), a.high);
    case Activation::Kind::kHardSwish: return v * std::clamp(v / 6.0f + 0.5f, 0.0f, 1.0f);  // ONNX's definition
    case Activation::Kind::kSwish: return static_cast<float>(v / (1.0 + std::exp(-static_cast<double>(v))));
  }
  return v;
}

// Against a plain loop over ONNX's [C, 1, KH, KW] weights; padded channels must come out zero.
void CheckDepthwise(const DepthwiseShape& s, const Activation& activation, bool with_bias) {
  const int64_t blocks = (s.channels + s.block - 1) / s.block, padded = blocks * s.block;
  std::vector<float> x = RandomValues(static_cast<size_t>(s.batch * padded * s.in_h * s.in_w), 5);
  const GlobalPoolShape in_layout{.batch = s.batch, .channels = s.channels, .pixels = s.in_h * s.in_w, .block = s.block};
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t c = s.channels; c < padded; ++c) {
      for (int64_t p = 0; p < s.in_h * s.in_w; ++p) x[At(in_layout, n, c, p)] = 0;
    }
  }
  const std::vector<float> w = RandomValues(static_cast<size_t>(s.channels * s.kernel_h * s.kernel_w), 6);
  std::vector<float> bias = RandomValues(static_cast<size_t>(padded), 7);
  std::fill(bias.begin() + s.channels, bias.end(), 0.0f);
  const std::vector<float> packed = PackDepthwiseWeights(w.data(), s);
  std::vector<float> y(static_cast<size_t>(s.batch * padded * s.out_h * s.out_w), 99.0f);
  DepthwiseConv(s, x.data(), packed.data(), with_bias ? bias.data() : nullptr, activation, y.data());
  const GlobalPoolShape out_layout{.batch = s.batch, .channels = s.channels, .pixels = s.out_h * s.out_w, .block = s.block};
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t c = 0; c < padded; ++c) {
      for (int64_t oh = 0; oh < s.out_h; ++oh) {
        for (int64_t ow = 0; ow < s.out_w; ++ow) {
          double sum = with_bias ? bias[static_cast<size_t>(c)] : 0.0;
          for (int64_t kh = 0; c < s.channels && kh < s.kernel_h; ++kh) {
            for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
              const int64_t ih = oh * s.stride_h - s.pad_top + kh, iw = ow * s.stride_w - s.pad_left + kw;
              if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) continue;
              sum += double{x[At(in_layout, n, c, ih * s.in_w + iw)]} * w[static_cast<size_t>((c * s.kernel_h + kh) * s.kernel_w + kw)];
            }
          }
          const float expected = c < s.channels ? Activated(activation, static_cast<float>(sum)) : 0.0f;
          const float got = y[At(out_layout, n, c, oh * s.out_w + ow)];
          ASSERT_NEAR(got, expected, 1e-4 * std::max(1.0f, std::abs(expected)))
              << "n=" << n << " c=" << c << " oh=" << oh << " ow=" << ow << " block=" << s.block << " k=" << s.kernel_h
              << " stride=" << s.stride_h << " in=" << s.in_h << "x" << s.in_w;
        }
      }
    }
  }
}

TEST(SimdDepthwiseConvTest, MatchesAPlainLoopOnEveryTargetKernelStrideAndEdge) {
  using Kind = Activation::Kind;
  const std::vector<Activation> activations = {
      {Kind::kNone}, {Kind::kRelu}, {.kind = Kind::kClip, .low = 0, .high = 6}, {Kind::kHardSwish}, {Kind::kSwish}};
  OnEveryTarget([&] {
    for (int64_t block : {8, 16}) {
      for (int64_t kernel : {3, 5}) {
        for (int64_t stride : {1, 2}) {
          // Images narrower than a group of four interior pixels, odd sizes, one without interior
          // at all (3 wide, 5x5 kernel), and a wide one whose rows take several runs of the
          // sliding interior loop and leave a rest; channels that leave the last block part padding.
          for (auto [h, w] : {std::pair<int64_t, int64_t>{7, 7}, {14, 14}, {13, 11}, {3, 3}, {1, 9}, {5, 37}}) {
            for (int64_t channels : {5, 16, 24}) {
              const int64_t pad = kernel / 2;
              DepthwiseShape s{.batch = 2, .channels = channels, .block = block, .in_h = h, .in_w = w,
                               .out_h = (h + 2 * pad - kernel) / stride + 1, .out_w = (w + 2 * pad - kernel) / stride + 1,
                               .kernel_h = kernel, .kernel_w = kernel, .stride_h = stride, .stride_w = stride,
                               .pad_top = pad, .pad_left = pad};
              for (const Activation& activation : activations) {
                CheckDepthwise(s, activation, /*with_bias=*/activation.kind != Kind::kRelu);
                if (HasFatalFailure()) return;
              }
            }
          }
          // Asymmetric padding (a TensorFlow "SAME" stride-2 layer pads only bottom/right).
          DepthwiseShape s{.batch = 1, .channels = 16, .block = block, .in_h = 8, .in_w = 8, .out_h = 4, .out_w = 4,
                           .kernel_h = kernel, .kernel_w = kernel, .stride_h = 2, .stride_w = 2, .pad_top = 0, .pad_left = 0};
          CheckDepthwise(s, {Kind::kNone}, true);
          if (HasFatalFailure()) return;
        }
      }
    }
  });
}

// Against a plain loop over ONNX's [Cout, Cin, 1, 1] weights: bias, then the residual, then the
// activation; padded output channels must come out zero. With `in_place`, the residual is y.
void CheckPointwise(const PointwiseShape& s, const Activation& activation, bool with_bias, bool with_residual,
                    bool in_place) {
  const int64_t in_padded = (s.in_channels + s.block - 1) / s.block * s.block;
  const int64_t out_padded = (s.out_channels + s.block - 1) / s.block * s.block;
  const GlobalPoolShape in_layout{.batch = s.batch, .channels = s.in_channels, .pixels = s.pixels, .block = s.block};
  const GlobalPoolShape out_layout{.batch = s.batch, .channels = s.out_channels, .pixels = s.pixels, .block = s.block};
  std::vector<float> x = RandomValues(static_cast<size_t>(s.batch * in_padded * s.pixels), 8);
  std::vector<float> residual = RandomValues(static_cast<size_t>(s.batch * out_padded * s.pixels), 9);
  for (int64_t n = 0; n < s.batch; ++n) {  // a blocked layout's padded channels are zero
    for (int64_t p = 0; p < s.pixels; ++p) {
      for (int64_t c = s.in_channels; c < in_padded; ++c) x[At(in_layout, n, c, p)] = 0;
      for (int64_t c = s.out_channels; c < out_padded; ++c) residual[At(out_layout, n, c, p)] = 0;
    }
  }
  const std::vector<float> w = RandomValues(static_cast<size_t>(s.out_channels * s.in_channels), 10);
  std::vector<float> bias = RandomValues(static_cast<size_t>(out_padded), 11);
  std::fill(bias.begin() + s.out_channels, bias.end(), 0.0f);
  const std::vector<float> packed = PackPointwiseWeights(w.data(), s);
  std::vector<float> y = in_place ? residual : std::vector<float>(residual.size(), 99.0f);
  const PointwiseEpilogue epilogue{.bias = with_bias ? bias.data() : nullptr,
                                   .residual = with_residual ? (in_place ? y.data() : residual.data()) : nullptr,
                                   .activation = activation};
  PointwiseConv(s, x.data(), packed.data(), epilogue, y.data());
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t c = 0; c < out_padded; ++c) {
      for (int64_t p = 0; p < s.pixels; ++p) {
        double sum = with_bias ? bias[static_cast<size_t>(c)] : 0.0;
        for (int64_t i = 0; c < s.out_channels && i < s.in_channels; ++i) {
          sum += double{x[At(in_layout, n, i, p)]} * w[static_cast<size_t>(c * s.in_channels + i)];
        }
        if (with_residual) sum += residual[At(out_layout, n, c, p)];
        const float expected = c < s.out_channels ? Activated(activation, static_cast<float>(sum)) : 0.0f;
        const float got = y[At(out_layout, n, c, p)];
        ASSERT_NEAR(got, expected, 1e-4 * std::max(1.0f, std::abs(expected)))
            << "n=" << n << " c=" << c << " p=" << p << " block=" << s.block << " cin=" << s.in_channels
            << " cout=" << s.out_channels << " pixels=" << s.pixels;
      }
    }
  }
}

TEST(SimdPointwiseConvTest, MatchesAPlainLoopOnEveryTargetChannelsPixelsAndEpilogue) {
  using Kind = Activation::Kind;
  OnEveryTarget([&] {
    for (int64_t block : {8, 16}) {
      // Channels that fill whole blocks, leave the last one part padding, and give an odd number
      // of output blocks (one left after the pairs); pixels below, at and past whole tiles.
      for (auto [cin, cout] : {std::pair<int64_t, int64_t>{16, 16}, {5, 24}, {40, 72}, {24, 3}}) {
        for (int64_t pixels : {1, 7, 11, 12, 23, 49, 50}) {
          PointwiseShape s{.batch = 2, .in_channels = cin, .out_channels = cout, .block = block, .pixels = pixels};
          CheckPointwise(s, {Kind::kNone}, true, false, false);
          CheckPointwise(s, {Kind::kRelu}, false, true, false);
          CheckPointwise(s, {.kind = Kind::kClip, .low = 0, .high = 6}, true, true, true);
          CheckPointwise(s, {Kind::kHardSwish}, true, false, false);
          CheckPointwise(s, {Kind::kSwish}, true, true, true);
          if (HasFatalFailure()) return;
        }
      }
    }
  });
}

TEST(SimdDepthwiseConvTest, OnlyClipsThatKeepZeroMapZeroPaddingToZero) {
  using Kind = Activation::Kind;
  EXPECT_TRUE(KeepsZeroPadding({.kind = Kind::kClip, .low = 0, .high = 6}));
  EXPECT_TRUE(KeepsZeroPadding({Kind::kHardSwish}));
  EXPECT_FALSE(KeepsZeroPadding({.kind = Kind::kClip, .low = 0.5f, .high = 6}));
  EXPECT_FALSE(KeepsZeroPadding({.kind = Kind::kClip, .low = -6, .high = -1}));
}

// Dynamic quantisation must give the reference kernel's bytes exactly: halves to even (x / scale
// lands on k + 0.5 with a power-of-two scale), saturation at both ends, and every tail length.
TEST(SimdDynamicQuantizeTest, MatchesTheReferenceRulesOnEveryTargetIncludingHalvesAndSaturation) {
  for (int64_t count : {0, 1, 7, 16, 33, 1027}) {
    std::vector<float> x = RandomValues(static_cast<size_t>(count), 11);
    for (size_t i = 0; i < x.size(); i += 3) x[i] = (static_cast<float>(i % 40) - 20.0f) * 0.25f + 0.125f;
    if (count > 4) x[1] = -1000.0f, x[2] = 1000.0f;
    float low = 0, high = 0;
    for (float v : x) low = std::min(low, v), high = std::max(high, v);
    OnEveryTarget([&] {
      const ValueRange range = RangeWithZero(x.data(), count);
      EXPECT_EQ(range.low, low);
      EXPECT_EQ(range.high, high);
      for (const auto& [scale, zero_point] : {std::pair{0.25f, uint8_t{100}}, std::pair{0.037f, uint8_t{3}}}) {
        std::vector<uint8_t> q(x.size(), 7);
        QuantizeToUint8(x.data(), count, scale, zero_point, q.data());
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(q[i], Quantize<uint8_t>(x[i], scale, zero_point)) << "x=" << x[i] << " scale=" << scale << " i=" << i;
        }
      }
    });
  }
}

// The int8 depthwise kernel against a plain loop in integers and doubles: uint8 and int8 inputs
// with zero points (padding is the real 0), 3x3 and 5x5, strides 1 and 2, channel counts that take
// vectors of 16, 8, 4 and 1 lanes, each activation, fp32 and requantised outputs. fp32 agrees to
// rounding; a requantised value may differ by one step where the fp32 result sits on a half.
double ActivateReference(const Activation& a, double v) {
  switch (a.kind) {
    case Activation::Kind::kNone: return v;
    case Activation::Kind::kRelu: return std::max(v, 0.0);
    case Activation::Kind::kClip: return std::clamp(v, static_cast<double>(a.low), static_cast<double>(a.high));
    case Activation::Kind::kHardSwish: return v * std::clamp(v + 3.0, 0.0, 6.0) / 6.0;
    case Activation::Kind::kSwish: return v / (1.0 + std::exp(-v));
  }
  return v;
}

void CheckDepthwiseInt8(const DepthwiseInt8Shape& s, DepthwiseInt8Params p, const std::string& what) {
  SCOPED_TRACE(what);
  std::mt19937 random(21);
  const size_t in_count = static_cast<size_t>(s.batch * s.in_h * s.in_w * s.channels);
  std::vector<uint8_t> x(in_count);  // the bytes of uint8 or int8 values
  for (uint8_t& v : x) v = static_cast<uint8_t>(random() % 256);
  std::vector<int8_t> w(static_cast<size_t>(s.channels * s.kernel_h * s.kernel_w));
  for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(random() % 255) - 127);
  std::vector<float> scales(static_cast<size_t>(s.channels)), bias(static_cast<size_t>(s.channels));
  for (size_t c = 0; c < scales.size(); ++c) scales[c] = 1e-4f * static_cast<float>(1 + c % 7), bias[c] = static_cast<float>(c % 11) * 97.5f - 400;
  p.scales = scales;
  p.bias = bias;
  const std::vector<float> packed = PackDepthwiseInt8(w.data(), s, &p);
  const size_t out_count = static_cast<size_t>(s.batch * s.out_h * s.out_w * s.channels);
  auto x_at = [&](size_t i) { return p.x_signed ? static_cast<int>(static_cast<int8_t>(x[i])) : static_cast<int>(x[i]); };
  std::vector<double> want(out_count);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oh = 0; oh < s.out_h; ++oh)
      for (int64_t ow = 0; ow < s.out_w; ++ow)
        for (int64_t c = 0; c < s.channels; ++c) {
          int64_t sum = 0;
          for (int64_t kh = 0; kh < s.kernel_h; ++kh)
            for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
              const int64_t ih = oh * s.stride_h - s.pad_top + kh, iw = ow * s.stride_w - s.pad_left + kw;
              if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) continue;
              const auto i = static_cast<size_t>(((n * s.in_h + ih) * s.in_w + iw) * s.channels + c);
              sum += (x_at(i) - p.x_zero_point) * w[static_cast<size_t>((c * s.kernel_h + kh) * s.kernel_w + kw)];
            }
          want[static_cast<size_t>(((n * s.out_h + oh) * s.out_w + ow) * s.channels + c)] =
              ActivateReference(p.activation, (static_cast<double>(sum) + bias[c]) * scales[c]);
        }
  OnEveryTarget([&] {
    if (!p.y_quantised) {
      std::vector<float> y(out_count, 99.0f);
      DepthwiseConvInt8(s, x.data(), packed.data(), p, y.data());
      for (size_t i = 0; i < out_count; ++i) ASSERT_NEAR(y[i], want[i], 2e-5 * (1 + std::fabs(want[i]))) << "at " << i;
      return;
    }
    std::vector<uint8_t> y(out_count, 99);
    DepthwiseConvInt8(s, x.data(), packed.data(), p, y.data());
    size_t off_by_one = 0;
    for (size_t i = 0; i < out_count; ++i) {
      const double q = std::clamp(std::nearbyint(want[i] / p.y_scale) + p.y_zero_point, p.y_signed ? -128.0 : 0.0,
                                  p.y_signed ? 127.0 : 255.0);
      const int got = p.y_signed ? static_cast<int8_t>(y[i]) : y[i];
      ASSERT_LE(std::fabs(got - q), 1.0) << "at " << i << " want " << want[i] / p.y_scale;
      off_by_one += got != q;
    }
    EXPECT_LE(off_by_one, out_count / 100 + 1);
  });
}

TEST(SimdDepthwiseInt8Test, MatchesAPlainLoopOnEveryTargetInputOutputKernelStrideAndChannels) {
  using Kind = Activation::Kind;
  // Whole vectors of 16, then the rest in 8s (24, 72), 4s (12) or ones (5, 21).
  for (int64_t channels : {32, 24, 72, 12, 5, 21}) {
    for (const auto& [kernel, stride, pad] : {std::tuple{3, 1, 1}, std::tuple{3, 2, 1}, std::tuple{5, 1, 2},
                                               std::tuple{5, 2, 2}, std::tuple{3, 2, 0}}) {
      // (3x3 stride 2 without padding leaves the input's last column unread.)
      const int64_t in = 9, out = (in + 2 * pad - kernel) / stride + 1;
      const DepthwiseInt8Shape s{.batch = 2, .channels = channels, .in_h = in, .in_w = in + 1, .out_h = out,
                                 .out_w = (in + 1 + 2 * pad - kernel) / stride + 1, .kernel_h = kernel, .kernel_w = kernel,
                                 .stride_h = stride, .stride_w = stride, .pad_top = pad, .pad_left = pad};
      const std::string where = std::to_string(channels) + " channels, " + std::to_string(kernel) + "x" +
                                std::to_string(kernel) + " stride " + std::to_string(stride) + " pad " + std::to_string(pad);
      CheckDepthwiseInt8(s, {.x_signed = false, .x_zero_point = 128}, where + ", uint8 in, fp32 out");
      CheckDepthwiseInt8(s, {.x_signed = true, .x_zero_point = 0, .activation = {Kind::kSwish}}, where + ", int8 in, swish");
      CheckDepthwiseInt8(s, {.x_signed = true, .x_zero_point = -3, .activation = {Kind::kHardSwish}, .y_quantised = true,
                             .y_scale = 0.02f, .y_zero_point = 0, .y_signed = true}, where + ", hardswish, int8 out");
      CheckDepthwiseInt8(s, {.x_signed = false, .x_zero_point = 0, .activation = {Kind::kRelu}, .y_quantised = true,
                             .y_scale = 0.015f, .y_zero_point = 0, .y_signed = false}, where + ", relu, uint8 out");
      CheckDepthwiseInt8(s, {.x_signed = false, .x_zero_point = 90, .activation = {Kind::kSwish}, .y_quantised = true,
                             .y_scale = 0.01f, .y_zero_point = 40, .y_signed = false}, where + ", swish, uint8 out with a zero point");
    }
  }
}

// The channel scale on every target: blocked layouts' blocks (8, 16) and NHWC's (every channel
// count: a pixel at a time in vectors of 8, 4 and 1 lanes, or several pixels as one flat run with
// the factors wrapped, as mobilenet's 40, 72 and 120 channels), in place too.
TEST(SimdChannelScaleTest, MatchesAPlainLoopOnEveryTargetAndBlock) {
  for (int64_t block : {8, 16, 24, 12, 5, 40, 72, 120}) {
    for (int64_t pixels : {1, 3, 49}) {
      const std::vector<float> x = RandomValues(static_cast<size_t>(pixels * block), 31);
      const std::vector<float> factors = RandomValues(static_cast<size_t>(block), 32);
      OnEveryTarget([&] {
        std::vector<float> y(x.size(), 99.0f), in_place = x;
        ScaleChannelBlock(x.data(), factors.data(), y.data(), pixels, block);
        ScaleChannelBlock(in_place.data(), factors.data(), in_place.data(), pixels, block);
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(y[i], x[i] * factors[i % static_cast<size_t>(block)]) << "block " << block << " at " << i;
          ASSERT_EQ(in_place[i], y[i]);
        }
        // Written quantised: the reference rule applied to the same products, byte for byte.
        std::vector<int8_t> q8(x.size(), 99);
        ScaleChannelBlock(x.data(), factors.data(), q8.data(), pixels, block,
                          {.quantised = true, .scale = 0.05f, .zero_point = -4, .is_signed = true});
        std::vector<uint8_t> qu(x.size(), 99);
        ScaleChannelBlock(x.data(), factors.data(), qu.data(), pixels, block,
                          {.quantised = true, .scale = 0.02f, .zero_point = 128, .is_signed = false});
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(q8[i], Quantize<int8_t>(y[i], 0.05f, -4)) << "block " << block << " at " << i;
          ASSERT_EQ(qu[i], Quantize<uint8_t>(y[i], 0.02f, 128)) << "block " << block << " at " << i;
        }
      });
    }
  }
}

// Swish against the double-precision formula on every target: every tail length (the tail runs
// through the vector code on a copy), the clamped ends of the exponential, and the special values.
TEST(SimdSwishTest, MatchesTheFormulaOnEveryTargetAndTail) {
  for (int64_t count : {1, 7, 8, 9, 16, 17, 1003}) {
    std::vector<float> x = RandomValues(static_cast<size_t>(count), 13);
    for (float& v : x) v *= 25.0f;  // [-100, 100]
    if (count > 8) x[0] = 0.0f, x[1] = 88.5f, x[2] = -88.5f, x[3] = 1e-30f, x[4] = INFINITY, x[5] = NAN, x[6] = 1e30f;
    OnEveryTarget([&] {
      std::vector<float> got = x;
      Swish(got.data(), got.size());
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = x[i] / (1.0 + std::exp(-static_cast<double>(x[i])));
        if (std::isnan(x[i])) {
          EXPECT_TRUE(std::isnan(got[i])) << "i=" << i;
        } else if (std::isinf(want)) {
          EXPECT_EQ(got[i], static_cast<float>(want)) << "i=" << i;
        } else {
          // Below x = -87 the result is under 1e-35 (the formula underflows into denormals there).
          ASSERT_NEAR(got[i], want, 3e-7 * std::fabs(want) + 1e-35) << "x=" << x[i] << " count " << count;
        }
      }
    });
  }
}

// The fused pass is Swish's value requantised as oneDNN requantises (times 1 / scale, rounded half
// to even, saturated), byte for byte; the plain pass is QuantizeLinear's rule, byte for byte: int8
// and uint8, zero points on both sides of 0, saturation at both ends, every tail length.
template <typename Q>
Q RequantizedByReciprocal(float v, float scale, int32_t zero_point) {
  const float q = std::nearbyint(v * (1.0f / scale)) + static_cast<float>(zero_point);
  return static_cast<Q>(std::clamp(q, static_cast<float>(std::numeric_limits<Q>::min()),
                                   static_cast<float>(std::numeric_limits<Q>::max())));
}

TEST(SimdSwishTest, QuantisedOutputIsTheReferenceRuleAppliedToSwishOnEveryTarget) {
  for (int64_t count : {1, 5, 16, 31, 1029}) {
    std::vector<float> x = RandomValues(static_cast<size_t>(count), 17);
    if (count > 4) x[1] = -1000.0f, x[2] = 1000.0f, x[3] = 0.0f;
    OnEveryTarget([&] {
      std::vector<float> swish = x;
      Swish(swish.data(), swish.size());
      for (const float scale : {0.031f, 0.0125f}) {
        for (const int32_t zero_point : {0, 5, -7}) {
          std::vector<int8_t> q8(x.size(), 99);
          SwishQuantize(x.data(), x.size(), scale, zero_point, /*is_signed=*/true, q8.data());
          for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_EQ(q8[i], RequantizedByReciprocal<int8_t>(swish[i], scale, zero_point)) << "x=" << x[i] << " i=" << i;
          }
          std::vector<int8_t> plain8(x.size(), 99);  // the rounding alone
          QuantizeValues(x.data(), x.size(), scale, zero_point, /*is_signed=*/true, plain8.data());
          for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(plain8[i], Quantize<int8_t>(x[i], scale, zero_point)) << i;
          if (zero_point < 0) continue;
          std::vector<uint8_t> qu(x.size(), 99);
          SwishQuantize(x.data(), x.size(), scale, zero_point, /*is_signed=*/false, qu.data());
          for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_EQ(qu[i], RequantizedByReciprocal<uint8_t>(swish[i], scale, zero_point)) << "x=" << x[i] << " i=" << i;
          }
          QuantizeValues(x.data(), x.size(), scale, zero_point, /*is_signed=*/false, qu.data());
          for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(qu[i], Quantize<uint8_t>(x[i], scale, zero_point)) << i;
        }
      }
    });
  }
}

// The NCHW -> NHWC quantising store is QuantizeLinear's rule value for value, each value at its
// channels-last place: 1 to 4 channels, int8 and uint8, zero points on both sides, saturation at
// both ends (values up to 1000x the scale), pixel counts below, at and past a vector of every
// width, and two images (the second image's values must land in its own pixels).
template <typename Q>
void CheckChannelsLastQuantize(int64_t channels, int64_t pixels, float scale, int32_t zero_point) {
  const int64_t batch = 2;
  std::vector<float> x = RandomValues(static_cast<size_t>(batch * channels * pixels), 29);
  for (float& v : x) v *= 4.0f;  // [-16, 16]: past 127 * scale for the scales below
  if (x.size() > 2) x[1] = 1000.0f * scale, x[2] = -1000.0f * scale;
  constexpr bool kSigned = std::is_same_v<Q, int8_t>;
  std::vector<Q> got(x.size(), Q{99});
  QuantizeToChannelsLast(x.data(), batch, channels, pixels, scale, zero_point, kSigned, got.data());
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t p = 0; p < pixels; ++p) {
        const float value = x[static_cast<size_t>((n * channels + c) * pixels + p)];
        ASSERT_EQ(got[static_cast<size_t>((n * pixels + p) * channels + c)], Quantize<Q>(value, scale, zero_point))
            << "channels " << channels << " pixels " << pixels << " image " << n << " channel " << c << " pixel " << p;
      }
    }
  }
}

TEST(SimdChannelsLastQuantizeTest, IsQuantizeLinearAtEachValuesChannelsLastPlaceOnEveryTarget) {
  EXPECT_FALSE(QuantizesToChannelsLast(0));
  EXPECT_FALSE(QuantizesToChannelsLast(5));
  OnEveryTarget([] {
    for (int64_t channels : {1, 2, 3, 4}) {
      for (int64_t pixels : {1, 7, 16, 17, 49, 5000}) {
        CheckChannelsLastQuantize<int8_t>(channels, pixels, 0.05f, 0);
        CheckChannelsLastQuantize<int8_t>(channels, pixels, 0.031f, -7);
        CheckChannelsLastQuantize<uint8_t>(channels, pixels, 0.0125f, 128);
        CheckChannelsLastQuantize<uint8_t>(channels, pixels, 0.07f, 3);
      }
    }
  });
}

// ONEDNN_MAX_CPU_ISA caps our targets as it caps oneDNN's: an AVX2 value leaves AVX2 and below.
TEST(SimdTargetsTest, OneDnnIsaCapDisablesTheTargetsAboveIt) {
  const long long avx512 = HWY_AVX3 | HWY_AVX3_DL;
  EXPECT_EQ(TargetsAboveOneDnnIsa("AVX2") & avx512, avx512);
  EXPECT_EQ(TargetsAboveOneDnnIsa("avx2_vnni") & HWY_AVX2, 0);
  EXPECT_EQ(TargetsAboveOneDnnIsa("AVX2") & HWY_AVX2, 0);
  EXPECT_NE(TargetsAboveOneDnnIsa("AVX") & HWY_AVX2, 0);
  EXPECT_NE(TargetsAboveOneDnnIsa("SSE41") & HWY_AVX2, 0);
  EXPECT_EQ(TargetsAboveOneDnnIsa("SSE41") & (HWY_SSE4 | HWY_SSSE3), 0);
  EXPECT_EQ(TargetsAboveOneDnnIsa("AVX512_CORE_VNNI"), 0);
  EXPECT_EQ(TargetsAboveOneDnnIsa("ALL"), 0);
  EXPECT_EQ(TargetsAboveOneDnnIsa(""), 0);
}

}  // namespace
}  // namespace inferd::runtime::simd
