// Winograd F(2x2, 3x3) (kernels/dnnl/dnnl_winograd.cc) against a direct convolution written out
// here, on every SIMD target of the CPU: both tile sizes, edge tiles of odd output sizes, every pad combination it accepts, chunks
// with a shorter last one, bias or none, each post-op it applies, two sets of weights through one
// object.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <ostream>
#include <tuple>
#include <random>

#include "runtime/kernels/dnnl/dnnl_winograd.h"

namespace inferd::runtime::dnnl_kernels {
namespace {

struct Case {
  const char* name;
  int64_t batch, channels, filters, h, w;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  std::vector<PostOp> post_ops;
  bool bias = true;
  int64_t chunk_tiles = 0;
  int tile = 2;  // output block: F(2x2, 3x3) or F(4x4, 3x3)
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<float> RandomValues(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// Where channel ch of pixel p of image i lies in nChw{block}c, channels padded to a whole block.
size_t BlockedIndex(int64_t i, int64_t ch, int64_t p, int64_t c, int64_t hw, int64_t block) {
  const int64_t blocks = (c + block - 1) / block;
  return static_cast<size_t>(((i * blocks + ch / block) * hw + p) * block + ch % block);
}

// NCHW <-> nChw{block}c. The padding channels of an input hold NaN: the convolution must not read them.
std::vector<float> ToBlocked(const std::vector<float>& plain, int64_t n, int64_t c, int64_t hw, int64_t block) {
  std::vector<float> blocked(static_cast<size_t>(n * (c + block - 1) / block * block * hw), NAN);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) blocked[BlockedIndex(i, ch, p, c, hw, block)] = plain[(i * c + ch) * hw + p];
  return blocked;
}

std::vector<float> FromBlocked(const std::vector<float>& blocked, int64_t n, int64_t c, int64_t hw, int64_t block) {
  std::vector<float> plain(static_cast<size_t>(n * c * hw));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) plain[(i * c + ch) * hw + p] = blocked[BlockedIndex(i, ch, p, c, hw, block)];
  return plain;
}

float Apply(float v, const std::vector<PostOp>& ops, float residual) {
  for (const PostOp& op : ops) {
    switch (op.kind) {
      case PostOp::Kind::kAdd: v += residual; break;
      case PostOp::Kind::kRelu: v = std::max(v, 0.0f); break;
      case PostOp::Kind::kLeakyRelu: v = v < 0 ? v * op.alpha : v; break;
      case PostOp::Kind::kClip: v = std::min(std::max(v, op.alpha), op.beta); break;
      default: ADD_FAILURE() << "post-op not in the test's oracle";
    }
  }
  return v;
}

// The oracle: a direct 3x3 convolution, stride 1, in NCHW. `magnitude` gets, per output, the sum
// of the absolute values of its terms: what a rounding error scales with.
std::vector<float> DirectConv(const Case& c, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& bias, const std::vector<float>& residual, int64_t oh, int64_t ow,
                              std::vector<double>* magnitude) {
  std::vector<float> y(c.batch * c.filters * oh * ow);
  magnitude->assign(y.size(), 0.0);
  for (int64_t n = 0; n < c.batch; ++n)
    for (int64_t k = 0; k < c.filters; ++k)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = c.bias ? bias[k] : 0, size = std::fabs(sum);
          for (int64_t ch = 0; ch < c.channels; ++ch)
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = oy + ky - c.pad_top, ix = ox + kx - c.pad_left;
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                const double term = double(x[((n * c.channels + ch) * c.h + iy) * c.w + ix]) * w[((k * c.channels + ch) * 3 + ky) * 3 + kx];
                sum += term;
                size += std::fabs(term);
              }
          const size_t at = ((n * c.filters + k) * oh + oy) * ow + ox;
          y[at] = Apply(static_cast<float>(sum), c.post_ops, residual.empty() ? 0 : residual[at]);
          (*magnitude)[at] = size;
        }
  return y;
}

// Each case in nChw8c and in nChw16c (the layout's block is timed per machine: both must work on
// every machine).
class WinogradTest : public testing::TestWithParam<std::tuple<Case, int64_t>> {};

TEST_P(WinogradTest, MatchesDirectConvolution) {
  const auto& [c, block] = GetParam();
  const Shape x_shape{c.batch, c.channels, c.h, c.w}, w_shape{c.filters, c.channels, 3, 3};
  const std::vector<int64_t> pads{c.pad_top, c.pad_left, c.pad_bottom, c.pad_right};
  if (c.filters % block != 0) {
    EXPECT_FALSE(WinogradConv::Applies(x_shape, w_shape, 1, {1, 1}, {1, 1}, pads, c.post_ops, block));
    return;  // its padding channels would stay unwritten
  }
  ASSERT_TRUE(WinogradConv::Applies(x_shape, w_shape, 1, {1, 1}, {1, 1}, pads, c.post_ops, block));
  const int64_t oh = c.h + c.pad_top + c.pad_bottom - 2, ow = c.w + c.pad_left + c.pad_right - 2;
  auto conv = WinogradConv::Create({.batch = c.batch, .in_channels = c.channels, .out_channels = c.filters, .in_h = c.h,
                                    .in_w = c.w, .out_h = oh, .out_w = ow, .pad_top = c.pad_top, .pad_left = c.pad_left,
                                    .layout_block = block},
                                   c.post_ops, c.tile, c.chunk_tiles);
  ASSERT_TRUE(conv.ok()) << conv.status().ToString();
  const std::vector<float> x = RandomValues(c.batch * c.channels * c.h * c.w, 1);
  const std::vector<float> bias = RandomValues(c.filters, 3);
  std::vector<float> residual;
  for (const PostOp& op : c.post_ops)
    if (op.kind == PostOp::Kind::kAdd) residual = RandomValues(c.batch * c.filters * oh * ow, 4);
  const std::vector<float> x_blocked = ToBlocked(x, c.batch, c.channels, c.h * c.w, block);
  const std::vector<float> residual_blocked =
      residual.empty() ? residual : ToBlocked(residual, c.batch, c.filters, oh * ow, block);
  // On every SIMD target the CPU has (the transforms are one Highway source: what runs here on
  // AVX2 is what runs on AVX-512, at its own vector width); two sets of weights in turn, one conv
  // object.
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (uint32_t seed : {2u, 5u}) {
      const std::vector<float> w = RandomValues(c.filters * c.channels * 9, seed);
      std::vector<float> y_blocked(c.batch * c.filters * oh * ow, NAN);  // filters fill whole blocks
      auto transformed = WinogradConv::TransformWeights(w.data(), c.tile, c.channels, c.filters);
      ASSERT_TRUE(transformed.ok());
      ASSERT_TRUE((*conv)->Run(x_blocked.data(), *transformed, c.bias ? bias.data() : nullptr,
                               residual.empty() ? nullptr : residual_blocked.data(), y_blocked.data()).ok());
      const std::vector<float> got = FromBlocked(y_blocked, c.batch, c.filters, oh * ow, block);
      std::vector<double> magnitude;
      const std::vector<float> want = DirectConv(c, x, w, bias, residual, oh, ow, &magnitude);
      for (size_t i = 0; i < want.size(); ++i) {
        // Rounding grows with the terms summed (the post-ops here never amplify it). F(4x4) rounds
        // more than F(2x2): its transforms have entries up to 8 and down to 1/24.
        const double tolerance = (c.tile == 4 ? 1e-5 : 2e-6) * magnitude[i] + 1e-6;
        ASSERT_NEAR(got[i], want[i], tolerance) << "element " << i << " weights seed " << seed;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

using K = PostOp::Kind;
INSTANTIATE_TEST_SUITE_P(
    Shapes, WinogradTest,
    testing::Combine(testing::Values(Case{"same_pads_relu", 2, 8, 16, 6, 6, 1, 1, 1, 1, {{K::kRelu}}},
                    Case{"odd_output", 1, 16, 8, 7, 5, 1, 1, 1, 1, {}},
                    Case{"no_pads", 1, 8, 8, 6, 7, 0, 0, 0, 0, {}, false},
                    Case{"asymmetric_pads", 2, 8, 8, 5, 6, 2, 0, 1, 2, {{K::kLeakyRelu, 0.1f}}},
                    Case{"residual_then_relu", 2, 16, 16, 9, 9, 1, 1, 1, 1, {{K::kAdd}, {K::kRelu}}},
                    Case{"clip", 1, 8, 24, 8, 8, 1, 1, 1, 1, {{K::kClip, -0.5f, 0.5f}}},
                    // 3 tiles a chunk over 2 x 5 x 5 = 50 tiles: 16 full chunks and a last of 2.
                    Case{"chunks_with_tail", 2, 8, 8, 9, 9, 1, 1, 1, 1, {{K::kRelu}}, true, 3},
                    Case{"wide_channels", 1, 64, 32, 4, 4, 1, 1, 1, 1, {}},
                    Case{"f4_same_pads_relu", 2, 8, 16, 8, 8, 1, 1, 1, 1, {{K::kRelu}}, true, 0, 4},
                    Case{"f4_odd_output", 1, 16, 8, 7, 5, 1, 1, 1, 1, {}, true, 0, 4},
                    Case{"f4_asymmetric_pads", 2, 8, 8, 9, 6, 2, 0, 1, 2, {{K::kLeakyRelu, 0.1f}}, false, 0, 4},
                    Case{"f4_residual_chunks", 2, 16, 16, 11, 10, 1, 1, 1, 1, {{K::kAdd}, {K::kRelu}}, true, 3, 4},
                    Case{"f4_wide_channels", 1, 256, 64, 6, 6, 1, 1, 1, 1, {{K::kClip, -0.5f, 0.5f}}, true, 0, 4},
                    // 24 input channels: in nChw16c the second block is half padding.
                    Case{"padded_input_block", 2, 24, 16, 7, 7, 1, 1, 1, 1, {{K::kAdd}, {K::kRelu}}},
                    Case{"f4_padded_input_block", 1, 40, 32, 9, 9, 1, 1, 1, 1, {}, true, 0, 4}),
                     testing::Values(int64_t{8}, int64_t{16})),
    [](const testing::TestParamInfo<std::tuple<Case, int64_t>>& info) {
      return std::string(std::get<0>(info.param).name) + "_block" + std::to_string(std::get<1>(info.param));
    });

TEST(WinogradTest, AppliesOnlyWhereItIsExact) {
  const Shape x{1, 16, 8, 8}, w{16, 16, 3, 3};
  const std::vector<int64_t> ones{1, 1}, pads{1, 1, 1, 1};
  EXPECT_TRUE(WinogradConv::Applies(x, w, 1, ones, ones, pads, {{K::kAdd}, {K::kRelu}}, 8));
  EXPECT_FALSE(WinogradConv::Applies(x, w, 1, {2, 2}, ones, pads, {}, 8));                     // strided
  EXPECT_FALSE(WinogradConv::Applies(x, w, 1, ones, {2, 2}, pads, {}, 8));                     // dilated
  EXPECT_FALSE(WinogradConv::Applies(x, w, 2, ones, ones, pads, {}, 8));                       // grouped
  EXPECT_FALSE(WinogradConv::Applies(x, {16, 16, 5, 5}, 1, ones, ones, pads, {}, 8));          // 5x5
  EXPECT_FALSE(WinogradConv::Applies({1, 12, 8, 8}, {16, 12, 3, 3}, 1, ones, ones, pads, {}, 8));  // 12 channels
  EXPECT_FALSE(WinogradConv::Applies(x, {12, 16, 3, 3}, 1, ones, ones, pads, {}, 8));          // 12 filters
  EXPECT_FALSE(WinogradConv::Applies(x, w, 1, ones, ones, {3, 1, 1, 1}, {}, 8));               // pad 3
  EXPECT_FALSE(WinogradConv::Applies(x, w, 1, ones, ones, pads, {{K::kSigmoid}}, 8));          // unsupported post-op
  EXPECT_FALSE(WinogradConv::Applies(x, {24, 16, 3, 3}, 1, ones, ones, pads, {}, 16));  // 24 filters in nChw16c
  EXPECT_TRUE(WinogradConv::Applies({1, 24, 8, 8}, {16, 24, 3, 3}, 1, ones, ones, pads, {}, 16));  // 24 channels
}

}  // namespace
}  // namespace inferd::runtime::dnnl_kernels
