#include "runtime/kernels/dnnl/dnnl_layout.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime::dnnl_kernels {

using tag = dnnl::memory::format_tag;

namespace {

// The time of oneDNN's first convolution implementation for a layer with its activations in
// `layout`: the best of a few runs after a warm-up, in seconds (infinity where it has none).
double ConvolutionSeconds(const dnnl::memory::dims& src, const dnnl::memory::dims& weights, int64_t pad, tag layout) {
  using dt = dnnl::memory::data_type;
  const dnnl::memory::dims dst{src[0], weights[0], src[2], src[3]};
  const dnnl::memory::desc src_desc(src, dt::f32, layout), dst_desc(dst, dt::f32, layout);
  const dnnl::memory::desc any_weights(weights, dt::f32, tag::any);
  dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_desc,
                                      any_weights, dst_desc, {1, 1}, {pad, pad}, {pad, pad}),
      Engine(), /*allow_empty=*/true);
  // oneDNN's reference loops (its only nChw16c convolution on AVX2) cannot win, and timing them
  // would cost each process start seconds.
  if (!pd || std::string_view(pd.impl_info_str()).rfind("ref", 0) == 0) return std::numeric_limits<double>::infinity();
  const dnnl::convolution_forward convolution(pd);
  dnnl::memory x(src_desc, Engine()), w(pd.weights_desc(), Engine()), y(dst_desc, Engine());
  std::fill_n(static_cast<float*>(x.get_data_handle()), x.get_desc().get_size() / sizeof(float), 0.5f);
  std::fill_n(static_cast<float*>(w.get_data_handle()), w.get_desc().get_size() / sizeof(float), 0.25f);
  dnnl::stream& stream = ThreadStream();
  double best = std::numeric_limits<double>::infinity();
  for (int run = 0; run < 6; ++run) {
    const auto start = std::chrono::steady_clock::now();
    convolution.execute(stream, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
    stream.wait();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (run > 0) best = std::min(best, seconds);  // run 0 warms up
  }
  return best;
}

// Which block is faster here, by timing: oneDNN's convolutions for a 1x1 and a 3x3 layer of
// typical CNN sizes, in nChw8c and in nChw16c. Asking oneDNN which layout it prefers does not
// answer it: on AVX-512 oneDNN 2.6 prefers NHWC (brgconv), and its jit kernels for nChw16c ran
// resnet50 and mobilenet_v3_large 1.1-1.4x faster than nChw8c there (docs/BENCHMARKS.md); on
// AVX2 it has no fast kernel for nChw16c. The difference is large either way, so a few runs decide.
int64_t TimedChannelBlock() {
  try {
    auto total = [](tag layout) {
      return ConvolutionSeconds({1, 256, 14, 14}, {256, 256, 1, 1}, 0, layout) +
             ConvolutionSeconds({1, 64, 28, 28}, {64, 64, 3, 3}, 1, layout);
    };
    return total(tag::nChw16c) < total(tag::nChw8c) ? 16 : 8;
  } catch (const dnnl::error&) {
    return 8;
  }
}

}  // namespace

int64_t ChannelBlock() {
  static const int64_t block = [] {
    if (const char* forced = std::getenv("INFERD_CHANNEL_BLOCK")) {
      const std::string_view text(forced);
      if (text == "8" || text == "16") return text == "8" ? int64_t{8} : int64_t{16};
      // A test or benchmark that meant to force the layout must not silently time it instead.
      std::fprintf(stderr, "inferd: INFERD_CHANNEL_BLOCK=%s is neither 8 nor 16; the block is timed\n", forced);
    }
    return TimedChannelBlock();
  }();
  return block;
}

dnnl::memory::desc BlockedDesc(const Shape& shape, bool channels_last, dnnl::memory::data_type type) {
  return dnnl::memory::desc(ToDims(shape), type,
                            channels_last ? tag::nhwc : ChannelBlock() == 16 ? tag::nChw16c : tag::nChw8c);
}

dnnl::memory::data_type DnnlType(DataType type) {
  switch (type) {
    case DataType::kFp32: return dnnl::memory::data_type::f32;
    case DataType::kUint8: return dnnl::memory::data_type::u8;
    case DataType::kInt8: return dnnl::memory::data_type::s8;
    case DataType::kBf16: return dnnl::memory::data_type::bf16;
    default: return dnnl::memory::data_type::undef;
  }
}

DataType DataTypeOf(dnnl::memory::data_type type) {
  switch (type) {
    case dnnl::memory::data_type::u8: return DataType::kUint8;
    case dnnl::memory::data_type::s8: return DataType::kInt8;
    case dnnl::memory::data_type::bf16: return DataType::kBf16;
    default: return DataType::kFp32;
  }
}

std::string LayoutName(const dnnl::memory::desc& desc) {
  const dnnl_memory_desc_t& md = desc.data;
  if (md.format_kind != dnnl_blocked) return "format_kind=" + std::to_string(static_cast<int>(md.format_kind));
  const dnnl_blocking_desc_t& blocking = md.format_desc.blocking;
  std::string name = "strides=";
  for (int d = 0; d < md.ndims; ++d) name += (d ? "," : "") + std::to_string(blocking.strides[d]);
  name += " blocks=";
  for (int b = 0; b < blocking.inner_nblks; ++b) {
    name += (b ? "," : "") + std::to_string(blocking.inner_blks[b]) + "@" + std::to_string(blocking.inner_idxs[b]);
  }
  return name;
}

dnnl::memory::desc LayoutDesc(const Shape& shape, bool blocked, bool channels_last, dnnl::memory::data_type type) {
  return blocked ? BlockedDesc(shape, channels_last, type) : PlainDesc(ToDims(shape), type);
}

bool Layouts::any() const {
  return std::find(inputs.begin(), inputs.end(), true) != inputs.end() ||
         std::find(outputs.begin(), outputs.end(), true) != outputs.end();
}

StatusOr<Layouts> ReadLayouts(const Node& node) {
  Layouts layouts;
  layouts.inputs.assign(node.inputs.size(), false);
  layouts.outputs.assign(node.outputs.size(), false);
  ASSIGN_OR_RETURN(std::vector<int64_t> inputs, node.Ints("_blocked_inputs"));
  ASSIGN_OR_RETURN(std::vector<int64_t> outputs, node.Ints("_blocked_outputs"));
  ASSIGN_OR_RETURN(int64_t channels_last, node.Int("_channels_last", 0));
  layouts.channels_last = channels_last != 0;
  for (int64_t i : inputs) {
    if (i < 0 || i >= static_cast<int64_t>(layouts.inputs.size())) {
      return Status::InvalidArgument(node.Describe() + ": _blocked_inputs names a missing input");
    }
    layouts.inputs[i] = true;
  }
  for (int64_t i : outputs) {
    if (i < 0 || i >= static_cast<int64_t>(layouts.outputs.size())) {
      return Status::InvalidArgument(node.Describe() + ": _blocked_outputs names a missing output");
    }
    layouts.outputs[i] = true;
  }
  return layouts;
}

StatusOr<void*> AllocateWithDesc(Tensor* out, const Shape& shape, const dnnl::memory::desc& desc, DataType type) {
  ASSIGN_OR_RETURN(int64_t elements, ElementCount(shape, kMaxKernelElements));
  (void)elements;  // the check; the size comes from the descriptor (padding included)
  const size_t bytes = desc.get_size();
  uint8_t* data = TakeOutputBuffer(out, bytes);
  out->dtype = type;
  out->shape = shape;
  out->byte_size = bytes;
  return data;
}

StatusOr<float*> AllocateWithDesc(Tensor* out, const Shape& shape, const dnnl::memory::desc& desc) {
  ASSIGN_OR_RETURN(void* data, AllocateWithDesc(out, shape, desc, DataType::kFp32));
  return static_cast<float*>(data);
}

Status ReorderTensor(const Tensor& src, const dnnl::memory::desc& from, const dnnl::memory::desc& to, Tensor* dst,
                     const dnnl::reorder* reorder) {
  return Guarded("Reorder", [&]() -> Status {
    ASSIGN_OR_RETURN(void* out, AllocateWithDesc(dst, src.shape, to, DataTypeOf(to.data_type())));
    dnnl::memory from_memory = Wrap(from, src.data.get());
    dnnl::memory to_memory(to, Engine(), out);
    if (reorder != nullptr) {
      RunReorder(*reorder, from_memory, to_memory);
    } else {
      RunReorder(from_memory, to_memory);
    }
    return Status::Ok();
  });
}

void ZeroChannelPadding(float* data, const Shape& shape, bool channels_last) {
  if (channels_last) return;  // NHWC has no padding
  const int64_t block = ChannelBlock();
  const int64_t channels = shape[1], tail = channels % block;
  if (tail == 0) return;
  const int64_t blocks = (channels + block - 1) / block, spatial = shape[2] * shape[3];
  for (int64_t n = 0; n < shape[0]; ++n) {
    float* last_block = data + ((n * blocks + blocks - 1) * spatial) * block;
    for (int64_t s = 0; s < spatial; ++s) {
      std::fill(last_block + s * block + tail, last_block + (s + 1) * block, 0.0f);
    }
  }
}

Status RunViaPlain(Kernel& plain_kernel, const Layouts& layouts, std::span<const Tensor* const> inputs,
                   std::span<Tensor> outputs) {
  std::vector<Tensor> plain_inputs(inputs.size());
  std::vector<const Tensor*> input_pointers(inputs.begin(), inputs.end());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!layouts.input(i) || inputs[i] == nullptr) continue;
    const Shape& shape = inputs[i]->shape;
    RETURN_IF_ERROR(ReorderTensor(*inputs[i], BlockedDesc(shape, layouts.channels_last), PlainDesc(ToDims(shape)),
                                 &plain_inputs[i]));
    input_pointers[i] = &plain_inputs[i];
  }
  RETURN_IF_ERROR(plain_kernel.Run(input_pointers, outputs));
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!layouts.output(o)) continue;
    Tensor& out = outputs[o];
    if (out.dtype != DataType::kFp32 || out.shape.size() != 4) {
      return Status::Internal("a blocked output must be a 4-D FP32 tensor, got " + ShapeToString(out.shape));
    }
    Tensor blocked;
    RETURN_IF_ERROR(ReorderTensor(out, PlainDesc(ToDims(out.shape)), BlockedDesc(out.shape, layouts.channels_last), &blocked));
    out = std::move(blocked);
  }
  return Status::Ok();
}

}  // namespace inferd::runtime::dnnl_kernels

namespace inferd::runtime {
namespace {

// inferd.Reorder: moves a 4-D value between the plain and the blocked layout. The layout pass puts
// one at each edge of a blocked chain: FP32, or (int8 graphs) what an int8 Conv wrote quantised.
class ReorderKernel final : public Kernel {
 public:
  ReorderKernel(bool to_blocked, bool channels_last) : to_blocked_(to_blocked), channels_last_(channels_last) {}
  std::string Implementation() const override { return "onednn:reorder"; }
  Status Run(std::span<const Tensor* const> in, std::span<Tensor> out) override {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Reorder"));
    const Tensor& x = *in[0];
    const dnnl::memory::data_type type = dnnl_kernels::DnnlType(x.dtype);
    if (type == dnnl::memory::data_type::undef || x.shape.size() != 4) {
      return Status::Internal("Reorder: a blocked layout needs a 4-D FP32, UINT8 or INT8 tensor, got " +
                              std::string(DataTypeName(x.dtype)) + " " + ShapeToString(x.shape));
    }
    const dnnl::memory::desc plain = dnnl_kernels::PlainDesc(dnnl_kernels::ToDims(x.shape), type);
    const dnnl::memory::desc blocked = dnnl_kernels::BlockedDesc(x.shape, channels_last_, type);
    const dnnl::memory::desc& from = to_blocked_ ? plain : blocked;
    const dnnl::memory::desc& to = to_blocked_ ? blocked : plain;
    const dnnl::reorder* reorder = nullptr;
    RETURN_IF_ERROR(dnnl_kernels::Guarded("Reorder", [&]() -> Status {
      reorder = &dnnl_kernels::FindOrCreate(reorders_, x.shape, [&] { return dnnl_kernels::ReorderDesc(from, to); }).first;
      return Status::Ok();
    }));
    return dnnl_kernels::ReorderTensor(x, from, to, &out[0], reorder);
  }
  void ForgetShapeSet(ShapeSetId shape_set) override { reorders_.Forget(shape_set); }

 private:
  bool to_blocked_;
  bool channels_last_;
  // One primitive per input shape, dropped with the shape sets that used it, as the other kernels
  // keep theirs: making one took longer than running it at the small shapes at the end of a network.
  dnnl_kernels::PrimitiveMap<dnnl::reorder, Shape> reorders_;
};

}  // namespace

void RegisterDnnlLayoutKernels(KernelRegistry* r) {
  r->Register("inferd.Reorder", 1, [](const Node& node, int) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::string to, node.String("to", ""));
    if (to != "blocked" && to != "plain") return Status::InvalidArgument(node.Describe() + ": 'to' must be blocked or plain");
    ASSIGN_OR_RETURN(int64_t channels_last, node.Int("_channels_last", 0));
    return std::unique_ptr<Kernel>(std::make_unique<ReorderKernel>(to == "blocked", channels_last != 0));
  });
}

}  // namespace inferd::runtime
