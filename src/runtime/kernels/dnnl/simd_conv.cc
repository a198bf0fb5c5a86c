#include "runtime/kernels/dnnl/simd_conv.h"

#include <algorithm>

#include "runtime/kernels/simd/global_pool.h"

namespace inferd::runtime::dnnl_kernels {
namespace {

bool AllEqual(const std::vector<int64_t>& values, int64_t expected) {
  return std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == expected; });
}

}  // namespace

// An int8 depthwise layer whose input arrives quantised, NHWC in and out, with at most one
// activation (a Swish included) and no residual.
std::optional<SimdConv> SimdConv::ForInt8(const ConvGeometry& g) {
  const DataType quantised = g.int8->x_signed ? DataType::kInt8 : DataType::kUint8;
  const int64_t channels = g.x_shape[1];
  if (!g.channels_last_input || !g.channels_last_output || g.x_type != quantised || g.group != channels ||
      g.w_shape[0] != channels || g.window->kernel[0] > 16) {
    return std::nullopt;
  }
  const std::optional<simd::Activation> activation = simd::ActivationOf(*g.post_ops);
  if (!activation) return std::nullopt;
  const WindowAttributes& w = *g.window;
  SimdConv conv;
  conv.kind_ = Kind::kDepthwiseInt8;
  conv.activation_ = *activation;
  conv.out_channels_ = channels;
  conv.int8_ = *g.int8;
  conv.depthwise_int8_ = {.batch = g.x_shape[0], .channels = channels, .in_h = g.x_shape[2], .in_w = g.x_shape[3],
                          .out_h = g.out_shape[2], .out_w = g.out_shape[3], .kernel_h = w.kernel[0],
                          .kernel_w = w.kernel[1], .stride_h = w.strides[0], .stride_w = w.strides[1],
                          .pad_top = w.pads[0], .pad_left = w.pads[1]};
  return conv;
}

std::optional<SimdConv> SimdConv::For(const ConvGeometry& g, int64_t block) {
  if (g.x_shape.size() != 4 || !AllEqual(g.window->dilations, 1)) return std::nullopt;
  if (g.int8 != nullptr) return ForInt8(g);
  if (!g.blocked_input || !g.blocked_output) {
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

SimdConv::Packed SimdConv::Pack(const void* weights, const float* bias) const {
  Packed packed;
  if (kind_ == Kind::kDepthwiseInt8) {
    simd::DepthwiseInt8Params& p = packed.int8;
    p.x_signed = int8_->x_signed;
    p.x_zero_point = int8_->x_zero_point;
    p.scales = int8_->OutputScales();
    if (p.scales.size() == 1) p.scales.assign(static_cast<size_t>(out_channels_), p.scales[0]);
    if (bias != nullptr) p.bias.assign(bias, bias + out_channels_);
    p.activation = activation_;
    p.y_quantised = int8_->y_scale.has_value();
    p.y_scale = int8_->y_scale.value_or(1.0f);
    p.y_zero_point = int8_->y_zero_point;
    p.y_signed = int8_->y_signed;
    packed.weights = simd::PackDepthwiseInt8(static_cast<const int8_t*>(weights), depthwise_int8_, &p);
    return packed;
  }
  const auto* fp32_weights = static_cast<const float*>(weights);
  packed.weights = kind_ == Kind::kDepthwise ? simd::PackDepthwiseWeights(fp32_weights, depthwise_)
                                             : simd::PackPointwiseWeights(fp32_weights, pointwise_);
  if (bias != nullptr) {
    packed.bias.assign(static_cast<size_t>((out_channels_ + block_ - 1) / block_ * block_), 0.0f);
    std::copy_n(bias, out_channels_, packed.bias.begin());
  }
  return packed;
}

void SimdConv::Run(const void* x, const Packed& packed, const float* residual, void* y) const {
  const float* bias = packed.bias.empty() ? nullptr : packed.bias.data();
  switch (kind_) {
    case Kind::kDepthwise:
      simd::DepthwiseConv(depthwise_, static_cast<const float*>(x), packed.weights.data(), bias, activation_,
                          static_cast<float*>(y));
      return;
    case Kind::kPointwise:
      simd::PointwiseConv(pointwise_, static_cast<const float*>(x), packed.weights.data(),
                          {.bias = bias, .residual = residual, .activation = activation_}, static_cast<float*>(y));
      return;
    case Kind::kDepthwiseInt8:
      simd::DepthwiseConvInt8(depthwise_int8_, x, packed.weights.data(), packed.int8, y);
      return;
  }
}

std::string SimdConv::KindName(Kind kind) {
  switch (kind) {
    case Kind::kDepthwise: return "simd_depthwise";
    case Kind::kPointwise: return "simd_pointwise";
    case Kind::kDepthwiseInt8: return "simd_depthwise_int8";
  }
  return "";
}

std::string SimdConv::Implementation() const {
  const char* name = kind_ == Kind::kDepthwise ? "simd:depthwise_conv:"
                     : kind_ == Kind::kPointwise ? "simd:pointwise_conv:" : "simd:depthwise_int8:";
  return name + simd::DispatchedTargetName();
}

}  // namespace inferd::runtime::dnnl_kernels
