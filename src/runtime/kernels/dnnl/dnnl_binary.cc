// oneDNN binary ops: Add, Sub, Mul, Div, Max, Min on FP32 with numpy broadcasting, plain or blocked
// (the squeeze-excitation Mul and unfused residual Adds of a blocked chain). oneDNN wants the
// first operand in the output's shape, so a commutative op whose first input is the broadcast one
// swaps them; the rest (both inputs broadcast, integer types, the legacy opset < 7 broadcast
// attributes) runs on the reference kernel.
#include <map>
#include <optional>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/dnnl/dnnl_layout.h"
#include "runtime/kernels/int8_attributes.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/kernels/vector_math.h"

namespace inferd::runtime {
namespace {

using namespace dnnl_kernels;
using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

struct BinaryOp {
  const char* op;
  dnnl::algorithm algorithm;
  bool commutative;
};

constexpr BinaryOp kBinaryOps[] = {
    {"Add", dnnl::algorithm::binary_add, true}, {"Sub", dnnl::algorithm::binary_sub, false},
    {"Mul", dnnl::algorithm::binary_mul, true}, {"Div", dnnl::algorithm::binary_div, false},
    {"Max", dnnl::algorithm::binary_max, true}, {"Min", dnnl::algorithm::binary_min, true},
};

class DnnlBinary final : public Kernel {
 public:
  // quantised_output: set where every reader is an int8 Conv that takes this output quantised
  // (qdq_fusion.cc, FuseInt8Requantize): squeeze-excitation's scale quantises as it writes; any
  // other case computes fp32 and quantises after.
  DnnlBinary(BinaryOp op, Layouts layouts, std::unique_ptr<Kernel> fallback,
             std::optional<simd::ChannelScaleOutput> quantised_output)
      : op_(op), layouts_(std::move(layouts)), fallback_(std::move(fallback)), quantised_(quantised_output) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { plans_.Forget(shape_set); }

  // Element-wise: each output element is written after the inputs' elements at its place are
  // read, on every path, except that oneDNN takes its destination in place of its first operand
  // only (Run swaps a commutative op's operands, or falls back, when the plan chose the second).
  // (Not a quantised output: a byte written per float read would overtake the reading threads.)
  bool OutputMayReuseInput(size_t input) const override {
    return !quantised_ && (input == 0 || (input == 1 && op_.commutative));
  }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    if (!quantised_) return Compute(in, out, nullptr);
    Tensor fp32;
    bool written = false;
    RETURN_IF_ERROR(Compute(in, std::span<Tensor>(&fp32, 1), &out[0], &written));
    if (written) return Status::Ok();
    return QuantiseOutput(fp32, &out[0]);
  }

 private:
  // The op's result in `out` (fp32); with `quantised_out`, the squeeze-excitation path writes
  // there quantised instead and sets *written.
  Status Compute(Inputs in, Outputs out, Tensor* quantised_out, bool* written = nullptr) {
    if (in.size() != 2 || in[0] == nullptr || in[1] == nullptr || in[0]->dtype != DataType::kFp32 ||
        in[1]->dtype != DataType::kFp32 || ElementsOf(*in[0]) == 0 || ElementsOf(*in[1]) == 0) {
      return Fallback(in, out);
    }
    auto out_shape = BroadcastShapes(in[0]->shape, in[1]->shape);
    if (!out_shape.ok()) return Fallback(in, out);  // the reference kernel words the error
    // The operand in the output's shape goes first.
    size_t first = 0;
    if (in[0]->shape != *out_shape) {
      if (!op_.commutative || in[1]->shape != *out_shape) return Fallback(in, out);
      first = 1;
    }
    // oneDNN takes its destination in place of its first operand only: where the memory plan put
    // the output over the second (same shape and layout), a commutative op swaps them.
    if (first == 0 && op_.commutative && in[1]->shape == *out_shape && layouts_.input(1) == layouts_.input(0) &&
        out[0].data != nullptr && out[0].data.get() == in[1]->data.get()) {
      first = 1;
    }
    const Tensor& src0 = *in[first];
    const Tensor& src1 = *in[1 - first];
    const bool blocked = layouts_.output(0);
    if (blocked != layouts_.input(first) || (blocked && out_shape->size() != 4) || out_shape->size() > 6) {
      return Fallback(in, out);
    }
    // A plain second operand of a blocked op is reordered into the blocked layout (oneDNN's binary
    // mixing the two runs on its reference path). Constants are reordered once.
    const Tensor* second = &src1;
    const bool second_blocked = layouts_.input(1 - first);
    if (blocked && !second_blocked) {
      ASSIGN_OR_RETURN(second, BlockedSecondOperand(src1));
    }
    Shape padded = second->shape;
    padded.insert(padded.begin(), out_shape->size() - padded.size(), 1);
    if (out_shape->empty()) padded = {1};
    if (blocked && op_.algorithm == dnnl::algorithm::binary_mul && IsPerChannel(padded, *out_shape) &&
        (quantised_out == nullptr || layouts_.channels_last)) {
      if (quantised_out == nullptr) return ScaleChannels(src0, *second, *out_shape, &out[0], {});
      *written = true;
      return ScaleChannels(src0, *second, *out_shape, quantised_out, *quantised_);
    }
    const Shape dst_shape = out_shape->empty() ? Shape{1} : *out_shape;
    auto key = std::make_pair(dst_shape, padded);
    ASSIGN_OR_RETURN(Plan* found, FindOrCreatePlan(plans_, key, "binary", [&](Plan* created) {
      return CreatePlan(dst_shape, padded, blocked, created);
    }));
    Plan& plan = *found;
    if (!plan.usable) return Fallback(in, out);
    last_ = "onednn:" + plan.implementation;
    return Guarded("binary", [&]() -> Status {
      ASSIGN_OR_RETURN(float* dst, AllocateWithDesc(&out[0], *out_shape, plan.dst_desc));
      RunPrimitive(plan.primitive, {{DNNL_ARG_SRC_0, Wrap(plan.dst_desc, src0.data.get())},
                                              {DNNL_ARG_SRC_1, Wrap(plan.src1_desc, second->data.get())},
                                              {DNNL_ARG_DST, Wrap(plan.dst_desc, dst)}});
      ThreadStream().wait();
      return Status::Ok();
    });
  }

  // `fp32` (the output's layout) quantised into `out`, one byte per value.
  Status QuantiseOutput(const Tensor& fp32, Tensor* out) {
    const DataType type = quantised_->is_signed ? DataType::kInt8 : DataType::kUint8;
    const dnnl::memory::desc desc = layouts_.Desc(fp32.shape, layouts_.output(0), DnnlType(type));
    if (fp32.dtype != DataType::kFp32 || fp32.byte_size != desc.get_size() * sizeof(float)) {
      return Status::Internal("binary: a quantised output needs an fp32 result without padding");
    }
    ASSIGN_OR_RETURN(void* dst, AllocateWithDesc(out, fp32.shape, desc, type));
    QuantizeInto(fp32.values<float>().data(), static_cast<int64_t>(desc.get_size()), quantised_->scale,
                 quantised_->zero_point, quantised_->is_signed, dst);
    last_ = (last_.empty() ? "reference" : last_) + " then quantised";
    return Status::Ok();
  }

  struct Plan {
    bool usable = false;
    dnnl::memory::desc src1_desc, dst_desc;
    dnnl::binary primitive;
    std::string implementation;
  };

  Status Fallback(Inputs in, Outputs out) { return RunFallback(*fallback_, layouts_, in, out); }

  // [N, C, 1, 1] or [1, C, 1, 1] onto [N, C, H, W]: a factor per channel (and image).
  static bool IsPerChannel(const Shape& factors, const Shape& out_shape) {
    return out_shape.size() == 4 && factors.size() == 4 && (factors[0] == out_shape[0] || factors[0] == 1) &&
           factors[1] == out_shape[1] && factors[2] == 1 && factors[3] == 1;
  }

  // Squeeze-excitation's scaling, and a constant per-channel scale, on blocked tensors by our loop
  // (kernels/vector_math.h). oneDNN 2.6's binary ran the first through jit:uni at about half the
  // speed, and the second (one factor set for every image) on its reference path with 16-channel
  // blocks. NHWC (int8 graphs) is one block of every channel per image.
  Status ScaleChannels(const Tensor& x, const Tensor& factors, const Shape& out_shape, Tensor* out,
                       const simd::ChannelScaleOutput& output) {
    const int64_t block = layouts_.channels_last ? out_shape[1] : ChannelBlock();
    const DataType type = !output.quantised ? DataType::kFp32 : output.is_signed ? DataType::kInt8 : DataType::kUint8;
    ASSIGN_OR_RETURN(void* dst_memory,
                     AllocateWithDesc(out, out_shape, BlockedDesc(out_shape, layouts_.channels_last, DnnlType(type)), type));
    auto* dst = static_cast<uint8_t*>(dst_memory);
    const int64_t value_bytes = output.quantised ? 1 : static_cast<int64_t>(sizeof(float));
    const int64_t channel_blocks = (out_shape[1] + block - 1) / block;
    const int64_t pixels = out_shape[2] * out_shape[3];
    const float* source = x.values<float>().data();
    if (factors.shape[0] == out_shape[0]) {
      ScaleChannelBlocks(source, factors.values<float>().data(), dst, out_shape[0] * channel_blocks, pixels, block,
                         output);
    } else {
      const int64_t image = channel_blocks * pixels * block;
      for (int64_t n = 0; n < out_shape[0]; ++n) {
        ScaleChannelBlocks(source + n * image, factors.values<float>().data(), dst + n * image * value_bytes,
                           channel_blocks, pixels, block, output);
      }
    }
    last_ = output.quantised ? "inferd:channel_scale (int8 out)" : "inferd:channel_scale";
    return Status::Ok();
  }

  Status CreatePlan(const Shape& dst_shape, const Shape& src1_shape, bool blocked, Plan* plan) {
    plan->dst_desc = layouts_.Desc(dst_shape, blocked);
    plan->src1_desc = layouts_.Desc(src1_shape, blocked);
    dnnl::binary::primitive_desc pd(dnnl::binary::desc(op_.algorithm, plan->dst_desc, plan->src1_desc, plan->dst_desc),
                                    OwnScratchpad(), Engine());
    plan->implementation = pd.impl_info_str();
    // oneDNN's reference binary is slower than ours.
    if (plan->implementation.rfind("ref", 0) == 0) return Status::Ok();
    plan->primitive = dnnl::binary(pd);
    plan->usable = true;
    return Status::Ok();
  }

  // The plain operand `src` (rank <= 4, broadcasting onto the output) in the blocked layout.
  StatusOr<const Tensor*> BlockedSecondOperand(const Tensor& src) {
    if (SameBuffer(src.data, reordered_source_) && reordered_.shape.size() == 4) return &reordered_;
    Shape padded = src.shape;
    padded.insert(padded.begin(), 4 - std::min<size_t>(padded.size(), 4), 1);
    if (padded.size() != 4) return Status::InvalidArgument("binary: operand of rank above 4 on a blocked tensor");
    Tensor as_4d = src;
    as_4d.shape = padded;
    RETURN_IF_ERROR(ReorderTensor(as_4d, PlainDesc(ToDims(padded)), BlockedDesc(padded, layouts_.channels_last), &reordered_));
    // Held, so that the address cannot come back as another tensor's while we compare against it.
    reordered_source_ = src.data;
    return &reordered_;
  }

  BinaryOp op_;
  Layouts layouts_;
  std::unique_ptr<Kernel> fallback_;
  ShapePlans<std::pair<Shape, Shape>, Plan> plans_;
  std::shared_ptr<const uint8_t> reordered_source_;
  Tensor reordered_;
  std::optional<simd::ChannelScaleOutput> quantised_;
  std::string last_;
};

// The output quantisation FuseInt8Requantize wrote on the node, if any.
StatusOr<std::optional<simd::ChannelScaleOutput>> ReadQuantisedOutput(const Node& node) {
  ASSIGN_OR_RETURN(std::optional<Int8Quantisation> output, ReadInt8Output(node));
  if (!output) return std::optional<simd::ChannelScaleOutput>();
  return std::optional(simd::ChannelScaleOutput{
      .quantised = true, .scale = output->scale, .zero_point = output->zero_point, .is_signed = output->is_signed});
}

}  // namespace

void RegisterDnnlBinaryKernels(KernelRegistry* r) {
  for (const BinaryOp& op : kBinaryOps) {
    KernelFactory reference = FactoryBefore(*r, op.op);
    r->Register(op.op, 7, [op, reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
      ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, reference(node, opset));
      ASSIGN_OR_RETURN(Layouts layouts, ReadLayouts(node));
      ASSIGN_OR_RETURN(std::optional<simd::ChannelScaleOutput> quantised, ReadQuantisedOutput(node));
      return std::unique_ptr<Kernel>(
          std::make_unique<DnnlBinary>(op, std::move(layouts), std::move(fallback), quantised));
    });
  }
}

}  // namespace inferd::runtime
