// Our own blocked-layout convolutions (simd/depthwise_conv.h, simd/pointwise_conv.h) as a
// candidate of the Conv kernel's tuning (dnnl_conv.cc): which of them fits a layer, the layer's
// weights packed for it, and a run. They read and write the blocked layout only (dnnl_layout.h),
// so they apply only where the layout pass kept the layer's input and output blocked. An int8
// depthwise layer (simd/depthwise_int8.h) reads and writes the int8 graphs' NHWC instead, its
// input already quantised.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "runtime/kernels/post_ops.h"
#include "runtime/kernels/simd/activation.h"
#include "runtime/kernels/int8_attributes.h"
#include "runtime/kernels/simd/depthwise_conv.h"
#include "runtime/kernels/simd/depthwise_int8.h"
#include "runtime/kernels/simd/pointwise_conv.h"
#include "runtime/kernels/window.h"

namespace inferd::runtime::dnnl_kernels {

// What the Conv kernel knows of one layer at one input shape.
struct ConvGeometry {
  Shape x_shape, w_shape, out_shape;
  int64_t group = 1;
  const WindowAttributes* window = nullptr;  // resolved: kernel, strides, dilations, pads
  bool blocked_input = false, blocked_output = false;
  // The fused post-ops (our kernels apply a trailing Swish themselves); a leading Add's residual
  // has the output's shape and layout when residual_matches_output.
  const std::vector<PostOp>* post_ops = nullptr;
  bool residual_matches_output = false;
  // An int8 layer: its input's type, and whether input and output are NHWC.
  const Int8Params* int8 = nullptr;
  DataType x_type = DataType::kFp32;
  bool channels_last_input = false, channels_last_output = false;
};

class SimdConv {
 public:
  enum class Kind { kDepthwise, kPointwise, kDepthwiseInt8 };

  // The one of our kernels that runs this layer at this shape, if any does.
  static std::optional<SimdConv> For(const ConvGeometry& geometry, int64_t block);
  static std::optional<SimdConv> ForInt8(const ConvGeometry& geometry);

  // The layer's weights ([out, in / group, kh, kw]) and bias packed for the kernel: the same for
  // every batch size.
  struct Packed {
    std::vector<float> weights, bias;  // bias: padded to whole blocks; empty without one
    simd::DepthwiseInt8Params int8;     // kDepthwiseInt8: scales, bias and the output's quantisation
  };
  // `weights` are fp32, or int8 for kDepthwiseInt8 (whose bias is in the int32 sums' units).
  Packed Pack(const void* weights, const float* bias) const;

  // x and y: fp32, or (kDepthwiseInt8) as the layer quantises them. residual: null unless the
  // layer's post-ops start with an Add; may be y.
  void Run(const void* x, const Packed& packed, const float* residual, void* y) const;
  bool int8() const { return kind_ == Kind::kDepthwiseInt8; }

  Kind kind() const { return kind_; }
  // For the tuning key ("simd_depthwise"), and for Kernel::Implementation() ("simd:depthwise_conv:AVX3").
  static std::string KindName(Kind kind);
  std::string Implementation() const;

 private:
  Kind kind_ = Kind::kDepthwise;
  simd::DepthwiseShape depthwise_;
  simd::PointwiseShape pointwise_;
  simd::DepthwiseInt8Shape depthwise_int8_;
  std::optional<Int8Params> int8_;
  int64_t out_channels_ = 0, block_ = 0;
  simd::Activation activation_;
};

}  // namespace inferd::runtime::dnnl_kernels
