// Blocked activation layouts. oneDNN's fast convolutions read and write 4-D activations with the
// channels in blocks of 8 or 16, nChw8c / nChw16c (which one is timed: ChannelBlock). Its int8 convolutions want
// the channels last (NHWC) instead: in a graph with int8 convolutions the pass marks its nodes
// `_channels_last`, and "blocked" then means NHWC for them (no padding). The layout propagation pass
// (passes/layout_propagation.cc) keeps a value in that layout between the ops that can read it, so
// reorders happen only at the edges of such a chain.
//
// A blocked tensor keeps its logical shape ([N, C, H, W]) in Tensor::shape; its buffer holds
// N x ceil(C / block) x H x W x block floats, the padded channels zero (oneDNN's own rule for padded
// memory). Only oneDNN kernels read it; which of a node's inputs and outputs are blocked is written
// on the node by the pass:
//   _blocked_inputs  ints: indices of inputs in the blocked layout
//   _blocked_outputs ints: indices of outputs to produce in the blocked layout
//   _channels_last   int:  1 when the blocked layout is NHWC
#pragma once

#include <string>
#include <vector>

#include "runtime/kernels/dnnl/dnnl_context.h"

namespace inferd::runtime::dnnl_kernels {

// The channel block of the blocked layout on this CPU, 8 or 16: timed once per process (oneDNN's
// convolutions in both layouts, the faster wins), or INFERD_CHANNEL_BLOCK=8|16 where set (tests
// run the same graphs in both layouts that way).
int64_t ChannelBlock();

// nChw{block}c for a 4-D shape, or NHWC with `channels_last`.
dnnl::memory::desc BlockedDesc(const Shape& shape, bool channels_last = false,
                               dnnl::memory::data_type type = dnnl::memory::data_type::f32);
dnnl::memory::desc LayoutDesc(const Shape& shape, bool blocked, bool channels_last = false,
                              dnnl::memory::data_type type = dnnl::memory::data_type::f32);
// oneDNN's element type for a tensor's (f32, u8, s8; undef for the rest).
dnnl::memory::data_type DnnlType(DataType type);
// And back (f32 for the types DnnlType does not map).
DataType DataTypeOf(dnnl::memory::data_type type);

// A layout's name for a tuning key: its strides and inner blocks (shape-specific; "16@1,16@0" is
// OIhw16i16o's blocks), or the kind of a non-blocked format.
std::string LayoutName(const dnnl::memory::desc& desc);

// Which of a node's inputs and outputs are blocked.
struct Layouts {
  std::vector<bool> inputs, outputs;
  bool channels_last = false;  // blocked means NHWC on this node
  bool input(size_t i) const { return i < inputs.size() && inputs[i]; }
  bool output(size_t i) const { return i < outputs.size() && outputs[i]; }
  bool any() const;
  // Blocked in nChw{block}c: the layout our own SIMD loops (Winograd, depthwise, 1x1, pooling) read.
  bool channel_blocked_input(size_t i) const { return input(i) && !channels_last; }
  bool channel_blocked_output(size_t i) const { return output(i) && !channels_last; }
  dnnl::memory::desc Desc(const Shape& shape, bool blocked,
                          dnnl::memory::data_type type = dnnl::memory::data_type::f32) const {
    return LayoutDesc(shape, blocked, channels_last, type);
  }
};
StatusOr<Layouts> ReadLayouts(const Node& node);

// Gives `out` an FP32 buffer of `desc`'s size (padding included) for a tensor of `shape`: its arena
// slot when it has one that fits (kernels/tensor_util.h), a fresh buffer otherwise.
StatusOr<float*> AllocateWithDesc(Tensor* out, const Shape& shape, const dnnl::memory::desc& desc);
// The same for a tensor of element type `type` (an int8 convolution's quantised output).
StatusOr<void*> AllocateWithDesc(Tensor* out, const Shape& shape, const dnnl::memory::desc& desc, DataType type);

// Copies `src` (laid out as `from`) into a fresh tensor laid out as `to`: with `reorder` when given
// (MakeReorder(from, to), kept by a caller that runs it again), else with one made for this call.
Status ReorderTensor(const Tensor& src, const dnnl::memory::desc& from, const dnnl::memory::desc& to, Tensor* dst,
                     const dnnl::reorder* reorder = nullptr);

// Zeroes the padded channels of a blocked buffer, after an op that computed on them as if they
// were data (an element-wise op run over the whole buffer makes them f(0)).
void ZeroChannelPadding(float* data, const Shape& shape, bool channels_last = false);

// Runs a kernel that only knows plain layouts on a node with blocked inputs or outputs: blocked
// inputs are reordered to plain first, blocked outputs reordered from plain after. The safety net
// of every layout-aware kernel for what its fast path cannot take.
Status RunViaPlain(Kernel& plain_kernel, const Layouts& layouts, std::span<const Tensor* const> inputs,
                   std::span<Tensor> outputs);

// A layout-aware kernel's way to its reference kernel: through RunViaPlain when anything is blocked.
inline Status RunFallback(Kernel& fallback, const Layouts& layouts, std::span<const Tensor* const> inputs,
                          std::span<Tensor> outputs) {
  return layouts.any() ? RunViaPlain(fallback, layouts, inputs, outputs) : fallback.Run(inputs, outputs);
}

}  // namespace inferd::runtime::dnnl_kernels
