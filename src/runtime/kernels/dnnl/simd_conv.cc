#include "runtime/kernels/dnnl/simd_conv.h"

#include <algorithm>

#include "runtime/kernels/simd/global_pool.h"

namespace inferd::runtime::dnnl_kernels {
namespace {

bool AllEqual(const std::vector<int64_t>& values, int64_t expected) {
  return std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == expected; });
}

}  // namespace

std::optional<SimdConv> SimdConv::For(const ConvGeometry& g, int64_t block) {
  if (!g.blocked_input || !g.blocked_output || g.x_shape.size() != 4 || !AllEqual(g.window->dilations, 1)) {
    return std::nullopt;
  }
  // A leading Add is the residual (pointwise only), then at most one activation that keeps the
  // blocked layout's padded channels zero.
  const std::vector<PostOp>& ops = *g.post_ops;
  const bool residual = !ops.empty() && ops.front().kind == PostOp::Kind::kAdd;
  const std::optional<simd::Activation> activation =
      simd::ActivationOf(std::vector<PostOp>(ops.begin() + (residual ? 1 : 0), ops.end()));
  if (!activation || !simd::KeepsZeroPadding(*activation) || (residual && !g.residual_matches_output)) {
    return std::nullopt;
  }
  const int64_t channels = g.x_shape[1], filters = g.w_shape[0];
  const WindowAttributes& w = *g.window;
  SimdConv conv;
  conv.activation_ = *activation;
  conv.out_channels_ = filters;
  conv.block_ = block;
  if (!residual && g.group == channels && filters == channels) {
    conv.kind_ = Kind::kDepthwise;
    conv.depthwise_ = {.batch = g.x_shape[0], .channels = channels, .block = block, .in_h = g.x_shape[2],
                       .in_w = g.x_shape[3], .out_h = g.out_shape[2], .out_w = g.out_shape[3],
                       .kernel_h = w.kernel[0], .kernel_w = w.kernel[1], .stride_h = w.strides[0],
                       .stride_w = w.strides[1], .pad_top = w.pads[0], .pad_left = w.pads[1]};
    return conv;
  }
  if (g.group == 1 && AllEqual(w.kernel, 1) && AllEqual(w.strides, 1) && AllEqual(w.pads, 0)) {
    conv.kind_ = Kind::kPointwise;
    conv.pointwise_ = {.batch = g.x_shape[0], .in_channels = channels, .out_channels = filters, .block = block,
                       .pixels = g.x_shape[2] * g.x_shape[3]};
    return conv;
  }
  return std::nullopt;
}

SimdConv::Packed SimdConv::Pack(const float* weights, const float* bias) const {
  Packed packed;
  packed.weights = kind_ == Kind::kDepthwise ? simd::PackDepthwiseWeights(weights, depthwise_)
                                             : simd::PackPointwiseWeights(weights, pointwise_);
  if (bias != nullptr) {
    packed.bias.assign(static_cast<size_t>((out_channels_ + block_ - 1) / block_ * block_), 0.0f);
    std::copy_n(bias, out_channels_, packed.bias.begin());
  }
  return packed;
}

void SimdConv::Run(const float* x, const Packed& packed, const float* residual, float* y) const {
  const float* bias = packed.bias.empty() ? nullptr : packed.bias.data();
  if (kind_ == Kind::kDepthwise) {
    simd::DepthwiseConv(depthwise_, x, packed.weights.data(), bias, activation_, y);
  } else {
    simd::PointwiseConv(pointwise_, x, packed.weights.data(),
                        {.bias = bias, .residual = residual, .activation = activation_}, y);
  }
}

std::string SimdConv::KindName(Kind kind) { return kind == Kind::kDepthwise ? "simd_depthwise" : "simd_pointwise"; }

std::string SimdConv::Implementation() const {
  return std::string(kind_ == Kind::kDepthwise ? "simd:depthwise_conv:" : "simd:pointwise_conv:") +
         simd::DispatchedTargetName();
}

}  // namespace inferd::runtime::dnnl_kernels
