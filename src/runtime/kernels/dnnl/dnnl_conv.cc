// oneDNN convolution and transposed convolution (deconvolution). Each kernel keeps one primitive per input shape (oneDNN's lifecycle: memory
// desc -> primitive desc -> primitive -> execute) and falls back to the reference kernel for what
// oneDNN cannot run (other element types, shapes it rejects).
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/dnnl/dnnl_layout.h"
#include "runtime/kernels/dnnl/dnnl_post_ops.h"
#include "runtime/kernels/dnnl/dnnl_winograd.h"
#include "runtime/kernels/int8_attributes.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/post_ops.h"
#include "runtime/kernels/dnnl/simd_conv.h"
#include "runtime/kernels/simd/channels_last_quantize.h"
#include "runtime/kernels/simd/global_pool.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/kernels/vector_math.h"
#include "runtime/tuning.h"
#include "runtime/kernels/window.h"
#include "runtime/precision.h"

namespace inferd::runtime {
namespace {

using namespace dnnl_kernels;
using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;
using tag = dnnl::memory::format_tag;

const Tensor* Input(Inputs in, size_t i) { return InputOrNull(in, i); }

// How an int8 convolution's fp32 input becomes the int8 its primitive reads. oneDNN's scaled
// reorder ran at 15-36 GB/s on an AVX-512 EPYC (issue 19): our passes take the two common cases.
enum class InputQuantisation {
  kReorder,               // oneDNN's scaled reorder (src_reorder)
  kSameLayout,            // the same dense NHWC, value for value (vector_math.h QuantizeInto)
  kPlanarToChannelsLast,  // NCHW of 1-4 channels, a model's image, to NHWC (simd/channels_last_quantize.h)
};

InputQuantisation InputQuantisationFor(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  const dnnl::memory::dims dims = from.dims();
  if (dims.size() != 4 || from.data_type() != dnnl::memory::data_type::f32) return InputQuantisation::kReorder;
  const bool to_channels_last = to == dnnl::memory::desc(dims, dnnl::memory::data_type::s8, tag::nhwc) ||
                                to == dnnl::memory::desc(dims, dnnl::memory::data_type::u8, tag::nhwc);
  if (!to_channels_last) return InputQuantisation::kReorder;
  if (from == dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag::nhwc)) return InputQuantisation::kSameLayout;
  if (from == dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag::nchw) &&
      simd::QuantizesToChannelsLast(dims[1])) {
    return InputQuantisation::kPlanarToChannelsLast;
  }
  return InputQuantisation::kReorder;
}

// ---- Conv ----

// Each tensor has the layout the layout pass gave it (plain, or blocked when the pass keeps a chain
// of convolutions blocked); each candidate primitive has the layout its implementation wants.
// Reorders run only where the two differ, which after layout propagation is at the edges of a
// chain, or where tuning found a plain-layout implementation faster even with them.
class DnnlConv final : public Kernel {
 public:
  // bf16: oneDNN's candidates read the input and the weights as bf16 (reordered from fp32, the
  // weights once) and write fp32 (precision.h), or bf16 with `bf16_output` (the readers are bf16
  // convolutions, passes/bf16_outputs.h); ours stay fp32 and may still win the timing where both
  // tensors are fp32.
  // int8 (a fused QDQ Conv, int8_attributes.h): only oneDNN's int8 implementations; the input is
  // quantised by the reorder into the primitive's layout, the weights are the model's int8.
  DnnlConv(WindowAttributes window, int64_t group, std::vector<PostOp> post_ops, Layouts layouts,
           std::unique_ptr<Kernel> fallback, int residual_input, bool bf16, bool bf16_output,
           std::optional<Int8Params> int8)
      : window_(std::move(window)), group_(group), post_ops_(std::move(post_ops)), layouts_(std::move(layouts)),
        fallback_(std::move(fallback)), residual_input_(residual_input), bf16_(bf16 && !int8),
        bf16_output_(bf16_ && bf16_output), int8_(std::move(int8)) {}

  std::string Implementation() const override { return last_.empty() ? "reference" : last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { plans_.Forget(shape_set); }

  // The output may be written over the residual: the sum post-op and Winograd add it element by
  // element at the place they write; other paths get a copy (OverwritesResidualSafely).
  bool OutputMayReuseInput(size_t input) const override { return static_cast<int>(input) == residual_input_; }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const Tensor* x = Input(in, 0);
    const Tensor* w = Input(in, 1);
    const DataType weights_type = int8_ ? DataType::kInt8 : DataType::kFp32;
    if (x == nullptr || w == nullptr || !InputTypeFits(x->dtype) || w->dtype != weights_type ||
        x->shape.size() < 3 || x->shape.size() > 5 || w->shape.size() != x->shape.size()) {
      if (int8_) return Status::InvalidArgument("int8 Conv: needs an FP32 (or already quantised) input and INT8 weights of rank 3 to 5");
      return Fallback(in, out);
    }
    const Tensor* residual = ResidualOf(post_ops_, in);
    const Tensor* bias = Input(in, 2);
    Plan* plan = nullptr;
    RETURN_IF_ERROR(FindPlan(*x, *w, bias != nullptr, residual, &plan));
    if (plan == nullptr && int8_) return Status::InvalidArgument("int8 Conv: oneDNN has no int8 convolution for this shape");
    if (plan == nullptr) return Fallback(in, out);  // oneDNN rejected this shape
    return Guarded("Conv", [&]() -> Status {
      ASSIGN_OR_RETURN(void* dst, AllocateWithDesc(&out[0], plan->out_shape, plan->dst_desc, OutputType()));
      Tensor residual_copy;
      if (residual != nullptr && residual->data.get() == static_cast<const uint8_t*>(dst) &&
          !(plan->chosen >= 0 && OverwritesResidualSafely(*plan, plan->candidates[plan->chosen]))) {
        // Tuning runs several candidates on one output, and some paths write before they read.
        residual_copy = OwnedCopy(*residual);
        residual = &residual_copy;
      }
      if (plan->chosen < 0) {
        // Candidates are timed on this call's real tensors (tuning.h); each writes the output.
        // Their weights are packed privately meanwhile; the loser's go with them, and the winner
        // takes the session's shared copy.
        const int choice = ChooseFastest(plan->tuning_key, static_cast<int>(plan->candidates.size()), plan->default_choice, [&](int i) {
          return Guarded("Conv", [&] { return Execute(plan, &plan->candidates[i], *x, *w, bias, residual, dst, false); });
        });
        Candidate winner = std::move(plan->candidates[choice]);
        winner.weights = PackedWeights();  // re-taken from the session's shared copy
        plan->candidates.clear();
        plan->candidates.push_back(std::move(winner));
        plan->chosen = 0;
        SettleWeightsForm(plan->candidates[0]);
        DropUnusedWinogradWeights();
        if (!weights_form_->simd) simd_weights_ = {};
      }
      Candidate& chosen = plan->candidates[plan->chosen];
      last_ = chosen.simd ? chosen.implementation : "onednn:" + chosen.implementation + (int8_ ? " (int8)" : "");
      if (chosen.swish_post_op) {
        last_ += " + swish post-op";
      } else if (plan->swish_quantize_after && !chosen.simd) {
        last_ += " + swish_quantize";
      }
      return Execute(plan, &chosen, *x, *w, bias, residual, dst);
    });
  }

 private:
  // One way to run the convolution: one of oneDNN's implementations (in its order of preference),
  // or our own: Winograd F(2x2, 3x3) or F(4x4, 3x3) (dnnl_winograd.h), or the depthwise or 1x1
  // kernel (simd_conv.h), which come first when they apply.
  struct Candidate {
    std::string implementation;
    std::shared_ptr<WinogradConv> winograd;  // set: this candidate is Winograd, the rest is unused
    std::optional<SimdConv> simd;  // set: our depthwise or 1x1 kernel, the rest is unused
    // A trailing Swish as oneDNN's post-op (Plan::swish_post_ops), not our pass after it.
    bool swish_post_op = false;
    dnnl::memory::desc src_desc, dst_desc, weights_desc;
    dnnl::convolution_forward primitive;
    // Set where the primitive's layout differs from the tensor's: reorders and the plan's buffers.
    dnnl::reorder src_reorder, dst_reorder, residual_reorder;
    // How an int8 layer's fp32 input is quantised for the primitive (InputQuantisationFor).
    InputQuantisation input_quantisation = InputQuantisation::kReorder;
    dnnl::memory primitive_src, primitive_dst;
    PackedWeights weights;
  };

  // The weights and bias packed for our SIMD kernel, with the buffers they were packed from.
  struct PackedSimd {
    std::shared_ptr<const uint8_t> weights_source, bias_source;  // held, as in TransformedWeights
    SimdConv::Packed packed;
  };

  struct Plan {
    bool usable = false;
    Shape out_shape;
    // The tensors' own layouts (plain or blocked, as the layout pass decided).
    dnnl::memory::desc src_desc, dst_desc, bias_desc, plain_weights_desc;
    float weights_scale = 1;  // kSevenBitWeights where int8 pairs saturate (Int8PairsSaturate)
    ScaledBias scaled_bias;   // the bias with it
    FusedPostOps post_ops;
    // A trailing Swish runs as our pass over the output, not as oneDNN's post-op, which costs
    // several times the convolution itself on AVX2 (kernels/vector_math.h).
    bool swish_after = false;
    // The same for an int8 Conv that writes its output quantised: oneDNN writes fp32 into the
    // candidate's scratch (primitive_dst, in the output's layout), and our pass applies Swish and
    // quantises into the output.
    bool swish_quantize_after = false;
    // Either way, one candidate takes oneDNN's swish post-op instead (requantising too, for an
    // int8 output), timed like the others: its cost depends on the ISA (on AVX2, several times the
    // convolution; other CPUs may fuse it cheaply), so the machine decides.
    FusedPostOps swish_post_ops;
    std::vector<Candidate> candidates;
    int chosen = -1;  // until the first run has timed them
    int default_choice = 0;  // oneDNN's first: our own kernels run only where timing chose them
    std::string tuning_key;
  };

  // Up to this many implementations are timed: oneDNN lists the best ones first (blocked direct,
  // then GEMM-based), and older-ISA or reference ones after.
  static constexpr size_t kMaxCandidates = 3;

  // The reference kernel writes the output before it adds the residual: it gets a copy when the
  // memory plan put the output over the residual.
  Status Fallback(Inputs in, Outputs out) {
    const auto k = static_cast<size_t>(residual_input_);
    if (residual_input_ < 0 || k >= in.size() || in[k] == nullptr || out[0].data == nullptr ||
        out[0].data.get() != in[k]->data.get()) {
      return RunFallback(*fallback_, layouts_, in, out);
    }
    const Tensor copy = OwnedCopy(*in[k]);
    std::vector<const Tensor*> inputs(in.begin(), in.end());
    inputs[k] = &copy;
    return RunFallback(*fallback_, layouts_, inputs, out);
  }

  // The oneDNN post-ops a candidate's primitive was made with.
  static const FusedPostOps& PostOpsOf(const Plan& plan, const Candidate& c) {
    return c.swish_post_op ? plan.swish_post_ops : plan.post_ops;
  }

  // Whether `c` computes the right sum when the output's buffer is the residual's: the sum post-op
  // accumulates onto the destination as it is (unless the residual must first be reordered into
  // it), Winograd reads each residual value just before it writes that place.
  static bool OverwritesResidualSafely(const Plan& plan, const Candidate& c) {
    if (c.winograd || c.simd) return true;  // ours read each residual value just before writing it
    return PostOpsOf(plan, c).add_as_sum && !(c.residual_reorder && !c.dst_reorder);
  }

  // An int8 Conv reads fp32 (and quantises it) or what its producer already quantised for it.
  bool InputTypeFits(DataType type) const {
    if (type == DataType::kFp32 || (bf16_ && type == DataType::kBf16)) return true;
    return int8_ && type == (int8_->x_signed ? DataType::kInt8 : DataType::kUint8);
  }
  DataType OutputType() const {
    if (bf16_output_) return DataType::kBf16;
    if (!int8_ || !int8_->y_scale) return DataType::kFp32;
    return int8_->y_signed ? DataType::kInt8 : DataType::kUint8;
  }

  // `dst` holds fp32 except for an int8 Conv that writes its output quantised, or a bf16 one that
  // writes bf16 (oneDNN alone then).
  Status Execute(Plan* plan, Candidate* c, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                 void* dst_memory, bool shared_weights = true) {
    float* dst = static_cast<float*>(dst_memory);
    if (c->winograd) {
      ASSIGN_OR_RETURN(const dnnl::memory* transformed, WinogradWeights(c->winograd->tile(), w));
      return c->winograd->Run(x.values<float>().data(), *transformed, bias ? bias->values<float>().data() : nullptr,
                              residual ? residual->values<float>().data() : nullptr, dst);
    }
    if (c->simd) {
      c->simd->Run(x.data.get(), SimdWeights(*c->simd, w, bias).packed,
                   residual ? residual->values<float>().data() : nullptr, dst_memory);
      return Status::Ok();  // (our kernels apply a trailing Swish themselves)
    }
    c->weights.Update(w.data, plan->plain_weights_desc, c->weights_desc, /*private_copy=*/!shared_weights,
                      plan->weights_scale);
    BindScratch({&c->primitive_src, &c->primitive_dst});
    dnnl::stream& stream = ThreadStream();
    dnnl::memory src = Wrap(plan->src_desc, x.data.get());
    dnnl::memory tensor_dst = Wrap(plan->dst_desc, dst);
    const bool signed_input = c->src_desc.data_type() == dnnl::memory::data_type::s8;
    if (c->input_quantisation == InputQuantisation::kPlanarToChannelsLast) {
      const Shape& shape = x.shape;
      simd::QuantizeToChannelsLast(x.values<float>().data(), shape[0], shape[1], shape[2] * shape[3], int8_->x_scale,
                                   int8_->x_zero_point, signed_input, c->primitive_src.get_data_handle());
      src = c->primitive_src;
    } else if (c->input_quantisation == InputQuantisation::kSameLayout) {
      QuantizeInto(x.values<float>().data(), ElementsOf(x), int8_->x_scale, int8_->x_zero_point, signed_input,
                   c->primitive_src.get_data_handle());
      src = c->primitive_src;
    } else if (c->src_reorder) {
      RunPrimitive(c->src_reorder, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, c->primitive_src}});
      src = c->primitive_src;
    }
    const bool our_swish_pass = !c->swish_post_op;
    const FusedPostOps& post_ops = PostOpsOf(*plan, *c);
    dnnl::memory target = c->dst_reorder || (plan->swish_quantize_after && our_swish_pass) ? c->primitive_dst : tensor_dst;
    if (post_ops.add_as_sum) {
      // The sum post-op adds onto what the destination holds: put the residual there.
      if (c->residual_reorder) {
        dnnl::memory residual_memory = Wrap(post_ops.residual_desc, residual->data.get());
        RunPrimitive(c->residual_reorder, {{DNNL_ARG_FROM, residual_memory}, {DNNL_ARG_TO, target}});
      } else if (target.get_data_handle() != residual->data.get()) {  // equal: the plan put the output there
        std::memcpy(target.get_data_handle(), residual->data.get(), c->dst_desc.get_size());
      }
    }
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, c->weights.memory}, {DNNL_ARG_DST, target}};
    if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, Wrap(plan->bias_desc, plan->scaled_bias.For(*bias, plan->weights_scale)));
    AddResidualArgument(post_ops, residual, &args);
    RunPrimitive(c->primitive, std::move(args));
    if (c->dst_reorder) RunPrimitive(c->dst_reorder, {{DNNL_ARG_FROM, c->primitive_dst}, {DNNL_ARG_TO, tensor_dst}});
    stream.wait();
    if (plan->swish_after && our_swish_pass) SwishInPlace(dst, static_cast<int64_t>(plan->dst_desc.get_size() / sizeof(float)));
    if (plan->swish_quantize_after && our_swish_pass) {
      SwishQuantize(static_cast<const float*>(target.get_data_handle()), static_cast<int64_t>(plan->dst_desc.get_size()),
                    *int8_->y_scale, int8_->y_zero_point, int8_->y_signed, dst_memory);  // one byte per value
    }
    return Status::Ok();
  }

  // Winograd's transformed weights for a tile size, shared by the plans of every batch size. Made
  // again when the weights buffer changes (SameBuffer compares owners: an arena slot comes back at
  // the same address), though today only constant weights reach Winograd: layout propagation
  // keeps a convolution blocked only when its weights are constant.
  StatusOr<const dnnl::memory*> WinogradWeights(int tile, const Tensor& w) {
    TransformedWeights& entry = winograd_weights_[tile];
    if (!SameBuffer(entry.source, w.data)) {
      ASSIGN_OR_RETURN(entry.transformed, WinogradConv::TransformWeights(w.values<float>().data(), tile, w.shape[1], w.shape[0]));
      entry.source = w.data;
    }
    return &entry.transformed;
  }

  // Our SIMD kernel's packed weights and bias, shared by the plans of every batch size (a layer
  // settles on one kernel, WeightsForm); packed again when either buffer changes (as
  // WinogradWeights).
  const PackedSimd& SimdWeights(const SimdConv& conv, const Tensor& w, const Tensor* bias) {
    PackedSimd& entry = simd_weights_;
    const bool bias_current = bias == nullptr ? entry.bias_source == nullptr : SameBuffer(entry.bias_source, bias->data);
    if (!SameBuffer(entry.weights_source, w.data) || !bias_current) {
      entry.packed = conv.Pack(w.data.get(), bias ? bias->values<float>().data() : nullptr);
      entry.weights_source = w.data;
      entry.bias_source = bias ? bias->data : nullptr;
    }
    return entry;
  }

  void SettleWeightsForm(const Candidate& chosen) {
    if (weights_form_) return;
    if (chosen.winograd) {
      weights_form_ = WeightsForm{.winograd_tile = chosen.winograd->tile()};
    } else if (chosen.simd) {
      weights_form_ = WeightsForm{.simd = chosen.simd->kind()};
    } else {
      weights_form_ = WeightsForm{.layout = chosen.weights_desc};
    }
  }

  // After a tuning: drops the transformed weights of tile sizes no plan chose.
  void DropUnusedWinogradWeights() {
    std::map<int, TransformedWeights> used;
    plans_.ForEach([&](const Plan& plan) {
      if (plan.chosen < 0) return;
      const Candidate& chosen = plan.candidates[plan.chosen];
      if (chosen.winograd && winograd_weights_.count(chosen.winograd->tile())) {
        used[chosen.winograd->tile()] = winograd_weights_[chosen.winograd->tile()];
      }
    });
    winograd_weights_ = std::move(used);
  }

  Status FindPlan(const Tensor& x, const Tensor& w, bool has_bias, const Tensor* residual, Plan** plan) {
    auto key = std::make_tuple(x.shape, w.shape, ShapeOrEmpty(residual));
    ASSIGN_OR_RETURN(Plan* found, FindOrCreatePlan(plans_, key, "Conv", [&](Plan* created) {
      return CreatePlan(x.shape, x.dtype, w, has_bias, residual, created);
    }));
    *plan = found->usable ? found : nullptr;
    return Status::Ok();
  }

  Status CreatePlan(const Shape& x_shape, DataType x_type, const Tensor& weights, bool has_bias, const Tensor* residual,
                    Plan* plan) {
    const Shape& w_shape = weights.shape;
    const int64_t filters = w_shape[0], group_channels = w_shape[1];
    if (x_shape[1] != group_channels * group_ || filters % group_) {
      return Status::InvalidArgument("Conv: channels do not match groups");
    }
    WindowAttributes w = window_;
    if (w.kernel.empty()) w.kernel.assign(w_shape.begin() + 2, w_shape.end());
    Shape in_spatial(x_shape.begin() + 2, x_shape.end());
    std::vector<int64_t> out_spatial;
    RETURN_IF_ERROR(ResolveWindow(&w, in_spatial, &out_spatial));
    const size_t dims = in_spatial.size();
    dnnl::memory::dims strides(w.strides.begin(), w.strides.end()), dilations, pad_l, pad_r;
    for (size_t d = 0; d < dims; ++d) {
      dilations.push_back(w.dilations[d] - 1);  // oneDNN counts the gaps
      pad_l.push_back(w.pads[d]);
      // oneDNN wants the right padding the output actually uses.
      const int64_t extent = w.dilations[d] * (w.kernel[d] - 1) + 1;
      pad_r.push_back((out_spatial[d] - 1) * w.strides[d] + extent - in_spatial[d] - w.pads[d]);
    }
    plan->out_shape = {x_shape[0], filters};
    plan->out_shape.insert(plan->out_shape.end(), out_spatial.begin(), out_spatial.end());
    if ((layouts_.input(0) && x_shape.size() != 4) || (layouts_.output(0) && plan->out_shape.size() != 4)) {
      return Status::Ok();  // not usable: blocked layouts are 4-D
    }
    plan->src_desc = layouts_.Desc(x_shape, layouts_.input(0), DnnlType(x_type));
    plan->dst_desc = layouts_.Desc(plan->out_shape, layouts_.output(0), DnnlType(OutputType()));
    dnnl::memory::dims weight_dims = ToDims(w_shape);
    if (group_ > 1) {
      weight_dims[0] = filters / group_;
      weight_dims.insert(weight_dims.begin(), group_);
    }
    using dt = dnnl::memory::data_type;
    plan->plain_weights_desc = PlainDesc(weight_dims, int8_ ? dt::s8 : dt::f32);
    const dt compute_type = int8_ ? (int8_->x_signed ? dt::s8 : dt::u8) : bf16_ ? dt::bf16 : dt::f32;
    dnnl::memory::desc any_weights(weight_dims, int8_ ? dt::s8 : compute_type, tag::any);
    plan->bias_desc = PlainDesc({filters});
    auto make_desc = [&](const dnnl::memory::desc& src, const dnnl::memory::desc& dst,
                         const dnnl::memory::desc& weights) {
      return has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                        dnnl::algorithm::convolution_direct, src, weights,
                                                        plan->bias_desc, dst, strides, dilations, pad_l, pad_r)
                      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                        dnnl::algorithm::convolution_direct, src, weights, dst,
                                                        strides, dilations, pad_l, pad_r);
    };
    const bool residual_blocked = residual != nullptr && layouts_.input(layouts_.inputs.size() - 1);
    // A trailing Swish is our pass over the output (quantising it too, where the output is int8).
    const bool trailing_swish = !post_ops_.empty() && post_ops_.back().kind == PostOp::Kind::kSwish;
    plan->swish_after = trailing_swish && OutputType() == DataType::kFp32;
    plan->swish_quantize_after = trailing_swish && OutputType() != DataType::kFp32;
    const std::vector<PostOp> onednn_post_ops(post_ops_.begin(),
                                              post_ops_.end() - (plan->swish_after || plan->swish_quantize_after ? 1 : 0));
    const std::optional<dnnl::memory::desc> residual_desc =
        residual_blocked && layouts_.channels_last ? std::optional(layouts_.Desc(residual->shape, true)) : std::nullopt;
    if (!BuildPostOps(onednn_post_ops, plan->out_shape, residual, &plan->post_ops, /*prefer_sum=*/true, residual_blocked,
                      residual_desc)) {
      return Status::Ok();  // not usable
    }
    // oneDNN's swish post-op, for the candidate that takes it (Plan::swish_post_ops).
    const bool offer_swish_post_op =
        trailing_swish && BuildPostOps(post_ops_, plan->out_shape, residual, &plan->swish_post_ops, /*prefer_sum=*/true,
                                       residual_blocked, residual_desc);
    if (int8_) {
      std::vector<float> scales = int8_->OutputScales();
      // oneDNN halves the weights of a signed input's convolution itself. An unsigned input with a
      // zero point spreads over the whole uint8 range and saturates as readily, so we halve its
      // weights; one with zero point 0 (a ReLU's output) rarely reaches the top of the range, and
      // 7-bit weights cost more than the rare saturation (resnet50 on AVX2: relative logit error
      // 0.056 with them, 0.026 without; docs/BENCHMARKS.md).
      if (!int8_->x_signed && int8_->x_zero_point != 0 && NeedsSevenBitWeights(weights)) {
        plan->weights_scale = kSevenBitWeights;
        for (float& scale : scales) scale /= kSevenBitWeights;
      }
      auto quantise = [&](FusedPostOps* fused, bool requantise) {
        fused->attr.set_output_scales(scales.size() > 1 ? 1 << 1 : 0, scales);  // per output channel
        if (requantise) {
          // Requantised for the next int8 Conv: the post-ops compute in real units, then
          // 1/y_scale; oneDNN rounds to nearest even and saturates into the output type, as
          // QuantizeLinear does.
          dnnl::post_ops ops = fused->attr.get_post_ops();
          ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, 1.0f / *int8_->y_scale, 0.0f);
          fused->attr.set_post_ops(ops);
          if (int8_->y_zero_point != 0) fused->attr.set_zero_points(DNNL_ARG_DST, 0, {int8_->y_zero_point});
        }
        // oneDNN subtracts it from every input value and counts padding as the zero point (a real 0).
        if (int8_->x_zero_point != 0) fused->attr.set_zero_points(DNNL_ARG_SRC, 0, {int8_->x_zero_point});
      };
      quantise(&plan->post_ops, int8_->y_scale && !plan->swish_quantize_after);
      if (offer_swish_post_op) quantise(&plan->swish_post_ops, int8_->y_scale.has_value());
    }
    plan->tuning_key = "Conv x=" + ShapeToString(x_shape) + " w=" + ShapeToString(w_shape) + " group=" +
                       std::to_string(group_) + " strides=" + ShapeToString(w.strides) + " dilations=" +
                       ShapeToString(w.dilations) + " pads=" + ShapeToString(w.pads) + (has_bias ? " bias" : "") +
                       " layouts=" + (layouts_.input(0) ? "b" : "p") + (layouts_.output(0) ? "b" : "p") +
                       (residual_blocked ? "b" : "p");
    // nChw8c and nChw16c time differently: a choice holds for the block it was timed in (NHWC,
    // the int8 graphs' "blocked", has none).
    if (layouts_.any() && !layouts_.channels_last) plan->tuning_key += " block=" + std::to_string(ChannelBlock());
    plan->tuning_key += " post=";
    for (const PostOp& op : post_ops_) plan->tuning_key += PostOpName(op.kind) + ",";
    if (residual != nullptr) plan->tuning_key += " residual=" + ShapeToString(residual->shape);
    if (bf16_) plan->tuning_key += " bf16";
    if (x_type == DataType::kBf16) plan->tuning_key += " x=bf16";
    if (bf16_output_) plan->tuning_key += " y=bf16";
    if (int8_) {
      plan->tuning_key += int8_->x_signed ? " int8=s8" : " int8=u8";
      if (x_type != DataType::kFp32) plan->tuning_key += " x=quantised";
      if (int8_->x_zero_point != 0) plan->tuning_key += " x_zero=" + std::to_string(int8_->x_zero_point);
      if (int8_->y_scale) plan->tuning_key += int8_->y_signed ? " y=s8" : " y=u8";
      if (int8_->y_zero_point != 0) plan->tuning_key += " y_zero=" + std::to_string(int8_->y_zero_point);
      if (plan->swish_quantize_after) plan->tuning_key += " swish_quantize";
    }
    // Our own kernels read and write the blocked layout only, and an Add's residual in the output's;
    // fp32 or int8, not bf16.
    const bool residual_matches_output = residual_blocked && residual->shape == plan->out_shape;
    const bool bf16_tensors = x_type == DataType::kBf16 || bf16_output_;
    const bool winograd_applies =
        !int8_ && !bf16_tensors && layouts_.channel_blocked_input(0) && layouts_.channel_blocked_output(0) && (residual == nullptr || residual_matches_output) &&
        WinogradConv::Applies(x_shape, w_shape, group_, w.strides, w.dilations, w.pads, post_ops_, ChannelBlock());
    // (Our kernels take every post-op: they apply a trailing Swish themselves, in registers.)
    const std::optional<SimdConv> simd_conv = bf16_tensors ? std::nullopt : SimdConv::For(
        {.x_shape = x_shape, .w_shape = w_shape, .out_shape = plan->out_shape, .group = group_, .window = &w,
         .blocked_input = layouts_.channel_blocked_input(0), .blocked_output = layouts_.channel_blocked_output(0),
         .post_ops = &post_ops_, .residual_matches_output = residual_matches_output,
         .int8 = int8_ ? &*int8_ : nullptr, .x_type = x_type,
         .channels_last_input = layouts_.input(0) && layouts_.channels_last,
         .channels_last_output = layouts_.output(0) && layouts_.channels_last},
        ChannelBlock());
    // Once the layer's weights form is settled (WeightsForm), only candidates of that form.
    std::vector<int> winograd_tiles;
    if (winograd_applies && (!weights_form_ || weights_form_->winograd_tile > 0)) {
      winograd_tiles = weights_form_ ? std::vector<int>{weights_form_->winograd_tile} : std::vector<int>{2, 4};
    }
    const bool simd_allowed = simd_conv && (!weights_form_ || weights_form_->simd == simd_conv->kind());
    const bool own_form = weights_form_ && (weights_form_->winograd_tile > 0 || weights_form_->simd);
    const bool onednn_allowed = !own_form || !(winograd_applies || simd_conv);
    const bool fixed_layout = weights_form_ && !own_form;
    // Choices 0 and 1 are Winograd's 2x2 and 4x4 output tiles when they apply, or 0 our depthwise
    // or 1x1 kernel, then oneDNN's implementations; the key says which numbering a cached choice uses.
    const int first_onednn = static_cast<int>(winograd_tiles.size()) + (simd_allowed ? 1 : 0);
    // Then oneDNN's first implementation with the swish post-op, where offered and oneDNN has one
    // (checked here: the numbering of cached choices counts on it), before the rest. It writes the
    // output's own type (int8 requantised, or fp32).
    dnnl::memory::desc src_any(ToDims(x_shape), compute_type, tag::any);
    const dnnl::memory::desc dst_any_type(ToDims(plan->out_shape), DnnlType(OutputType()), tag::any);
    const auto any_swish_desc = make_desc(src_any, dst_any_type, any_weights);
    const bool swish_post_op_allowed =
        offer_swish_post_op && onednn_allowed &&
        dnnl::convolution_forward::primitive_desc(any_swish_desc, plan->swish_post_ops.attr, Engine(), /*allow_empty=*/true);
    const int first_with_pass = first_onednn + (swish_post_op_allowed ? 1 : 0);
    if (weights_form_) {
      plan->tuning_key += " weights=" + (weights_form_->winograd_tile > 0
                                             ? "winograd" + std::to_string(weights_form_->winograd_tile)
                                             : weights_form_->simd ? SimdConv::KindName(*weights_form_->simd)
                                                                   : LayoutName(weights_form_->layout));
    } else if (!winograd_tiles.empty()) {
      plan->tuning_key += " +winograd2,4";
    } else if (simd_allowed) {
      plan->tuning_key += " +" + SimdConv::KindName(simd_conv->kind());
      // Since our fp32 kernels apply it themselves (choices cached before then timed them with the pass).
      if (plan->swish_after) plan->tuning_key += " swish_in_kernel";
    }
    if (swish_post_op_allowed) plan->tuning_key += " +swish_post_op";
    plan->default_choice = onednn_allowed ? first_with_pass : 0;
    // oneDNN's implementations for layouts of its choosing, best first; the primitive desc
    // iterator reads the op desc, which must outlive the iteration. With the choice already known
    // (cached, or tuning off) only that one is built. The weights' layout is fixed once settled,
    // unless no implementation takes it for this shape.
    // Our Swish-and-quantise pass reads oneDNN's fp32 output in the output's own layout.
    const dnnl::memory::desc dst_any =
        plan->swish_quantize_after ? layouts_.Desc(plan->out_shape, layouts_.output(0), dt::f32)
                                   : dnnl::memory::desc(ToDims(plan->out_shape), DnnlType(OutputType()), tag::any);
    const auto any_desc = make_desc(src_any, dst_any, any_weights);
    const auto fixed_desc = fixed_layout ? make_desc(src_any, dst_any, weights_form_->layout) : any_desc;
    const auto fixed_swish_desc = fixed_layout ? make_desc(src_any, dst_any_type, weights_form_->layout) : any_swish_desc;
    auto collect = [&](std::optional<int> only, bool swish_post_op) {
      const dnnl::primitive_attr& attr = swish_post_op ? plan->swish_post_ops.attr : plan->post_ops.attr;
      const auto& fixed = swish_post_op ? fixed_swish_desc : fixed_desc;
      const auto& any = swish_post_op ? any_swish_desc : any_desc;
      dnnl::convolution_forward::primitive_desc pd(fixed, attr, Engine(), /*allow_empty=*/true);
      if (!pd && fixed_layout) pd = dnnl::convolution_forward::primitive_desc(any, attr, Engine(), true);
      for (int index = 0; pd && index < static_cast<int>(kMaxCandidates);) {
        const std::string implementation = pd.impl_info_str();
        const bool weak = implementation.rfind("ref", 0) == 0 || implementation.find("sse41") != std::string::npos;
        if (!weak || index == 0) {
          if (!only || *only == index) AddCandidate(pd, plan, swish_post_op);
          if (only && *only == index) break;
          ++index;
        }
        if (!pd.next_impl()) break;
      }
    };
    auto build = [&](std::optional<int> only) -> Status {
      plan->candidates.clear();
      for (int choice = 0; choice < static_cast<int>(winograd_tiles.size()); ++choice) {
        if (only && *only != choice) continue;
        const int tile = winograd_tiles[static_cast<size_t>(choice)];
        ASSIGN_OR_RETURN(std::unique_ptr<WinogradConv> conv,
                         WinogradConv::Create({.batch = x_shape[0], .in_channels = x_shape[1], .out_channels = filters,
                                               .in_h = x_shape[2], .in_w = x_shape[3], .out_h = out_spatial[0],
                                               .out_w = out_spatial[1], .pad_top = w.pads[0], .pad_left = w.pads[1],
                                               .layout_block = ChannelBlock()},
                                              post_ops_, tile));
        Candidate c;
        c.implementation = "winograd_f" + std::to_string(tile) + "x" + std::to_string(tile) + "_3x3:" +
                           simd::DispatchedTargetName();
        c.winograd = std::move(conv);
        plan->candidates.push_back(std::move(c));
      }
      if (simd_allowed && (!only || *only == first_onednn - 1)) {
        Candidate c;
        c.implementation = simd_conv->Implementation();
        c.simd = simd_conv;
        plan->candidates.push_back(std::move(c));
      }
      if (swish_post_op_allowed && (!only || *only == first_onednn)) collect(0, /*swish_post_op=*/true);
      if (onednn_allowed && (!only || *only >= first_with_pass)) {
        collect(only ? std::optional<int>(*only - first_with_pass) : std::nullopt, /*swish_post_op=*/false);
      }
      return Status::Ok();
    };
    const std::optional<int> known = KnownChoice(plan->tuning_key, plan->default_choice);
    RETURN_IF_ERROR(build(known));
    if (known && plan->candidates.empty()) RETURN_IF_ERROR(build(std::nullopt));  // a stale cached index
    if (int8_ && plan->candidates.empty()) return Status::Internal("no int8 convolution in oneDNN for this shape");
    if (!int8_ && (plan->candidates.empty() ||
        (!plan->candidates[0].winograd && !plan->candidates[0].simd &&
         plan->candidates[0].implementation.rfind("ref", 0) == 0))) {
      // Only reference implementations for free layouts: the tensors' own layouts then.
      plan->candidates.clear();
      const auto own_layouts = make_desc(plan->src_desc, plan->dst_desc,
                                         dnnl::memory::desc(weight_dims, dnnl::memory::data_type::f32, tag::any));
      AddCandidate(dnnl::convolution_forward::primitive_desc(own_layouts, plan->post_ops.attr, Engine()), plan);
    }
    if (plan->candidates.size() == 1) {
      plan->chosen = 0;
      SettleWeightsForm(plan->candidates[0]);
    }
    plan->usable = true;
    return Status::Ok();
  }

  void AddCandidate(const dnnl::convolution_forward::primitive_desc& pd, Plan* plan, bool swish_post_op = false) {
    Candidate c;
    c.implementation = pd.impl_info_str();
    c.swish_post_op = swish_post_op;
    c.src_desc = pd.src_desc();
    c.dst_desc = pd.dst_desc();
    c.weights_desc = pd.weights_desc();
    c.primitive = dnnl::convolution_forward(pd);
    if (c.src_desc != plan->src_desc) {
      c.primitive_src = ScratchMemory(c.src_desc);
      const bool quantises = int8_ && plan->src_desc.data_type() == dnnl::memory::data_type::f32;
      c.input_quantisation = quantises ? InputQuantisationFor(plan->src_desc, c.src_desc) : InputQuantisation::kReorder;
      if (c.input_quantisation == InputQuantisation::kReorder) {
        c.src_reorder = quantises ? MakeScaledReorder(plan->src_desc, c.src_desc, 1.f / int8_->x_scale, int8_->x_zero_point)
                                  : MakeReorder(plan->src_desc, c.src_desc);
      }
    }
    if (plan->swish_quantize_after && !swish_post_op) {
      c.primitive_dst = ScratchMemory(c.dst_desc);  // fp32, read by SwishQuantize
    } else if (c.dst_desc != plan->dst_desc) {
      c.primitive_dst = ScratchMemory(c.dst_desc);
      c.dst_reorder = MakeReorder(c.dst_desc, plan->dst_desc);
    }
    const FusedPostOps& post_ops = PostOpsOf(*plan, c);
    if (post_ops.add_as_sum && post_ops.residual_desc != c.dst_desc) {
      c.residual_reorder = MakeReorder(post_ops.residual_desc, c.dst_desc);
    }
    plan->candidates.push_back(std::move(c));
  }

  WindowAttributes window_;
  int64_t group_;
  std::vector<PostOp> post_ops_;
  Layouts layouts_;
  std::unique_ptr<Kernel> fallback_;
  const int residual_input_;  // the node input a fused Add reads; -1: none
  const bool bf16_;
  const bool bf16_output_;  // writes bf16 for bf16 readers
  const std::optional<Int8Params> int8_;
  ShapePlans<std::tuple<Shape, Shape, Shape>, Plan> plans_;
  struct TransformedWeights {
    std::shared_ptr<const uint8_t> source;  // held, so its address cannot come back as another's
    dnnl::memory transformed;
  };
  std::map<int, TransformedWeights> winograd_weights_;  // by output tile size
  // How the layer keeps its weights, once its first plan has chosen: Winograd's transform for a
  // tile size, or oneDNN's layout. Plans for other shapes (batch sizes) only take candidates that
  // use the same form, so the layer holds one transformed copy of its weights, not one per shape.
  struct WeightsForm {
    int winograd_tile = 0;      // > 0: Winograd
    std::optional<SimdConv::Kind> simd;  // our depthwise or 1x1 kernel's packing
    dnnl::memory::desc layout;  // otherwise: oneDNN's weights layout
  };
  std::optional<WeightsForm> weights_form_;
  PackedSimd simd_weights_;
  std::string last_;  // empty: the fallback ran
};

// ConvTranspose on oneDNN's deconvolution. ONNX keeps the weights as [C_in, C_out / group, k...];
// oneDNN reads them through a strided descriptor in its own dim order and reorders them once.
// Output padding beyond the right pad (a negative oneDNN pad) takes the reference kernel.
class DnnlConvTranspose final : public Kernel {
 public:
  DnnlConvTranspose(WindowAttributes window, int64_t group, std::vector<int64_t> output_padding,
                    std::vector<int64_t> output_shape, std::unique_ptr<Kernel> fallback)
      : window_(std::move(window)), group_(group), output_padding_(std::move(output_padding)),
        output_shape_(std::move(output_shape)), fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { plans_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const Tensor* x = Input(in, 0);
    const Tensor* w = Input(in, 1);
    const Tensor* bias = Input(in, 2);
    if (x == nullptr || w == nullptr || x->dtype != DataType::kFp32 || w->dtype != DataType::kFp32 ||
        (bias != nullptr && bias->dtype != DataType::kFp32) || x->shape.size() < 3 || x->shape.size() > 5 ||
        w->shape.size() != x->shape.size() || w->shape[0] != x->shape[1] || x->shape[1] % group_ != 0) {
      return fallback_->Run(in, out);
    }
    auto key = std::make_tuple(x->shape, w->shape, bias != nullptr);
    ASSIGN_OR_RETURN(Plan* found, FindOrCreatePlan(plans_, key, "ConvTranspose", [&](Plan* created) {
      return CreatePlan(x->shape, w->shape, bias != nullptr, created);
    }));
    Plan& plan = *found;
    if (!plan.usable) return fallback_->Run(in, out);
    last_ = plan.implementation;
    return Guarded("ConvTranspose", [&]() -> Status {
      plan.weights.Update(w->data, plan.onnx_weights_desc, plan.weights_desc);
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, plan.out_shape));
      BindScratch({&plan.primitive_src, &plan.primitive_dst});
      dnnl::stream& stream = ThreadStream();
      dnnl::memory src = Wrap(plan.src_desc, x->data.get());
      dnnl::memory tensor_dst = Wrap(plan.dst_desc, dst);
      if (plan.src_reorder) {
        RunPrimitive(plan.src_reorder, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, plan.primitive_src}});
        src = plan.primitive_src;
      }
      dnnl::memory target = plan.dst_reorder ? plan.primitive_dst : tensor_dst;
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, plan.weights.memory}, {DNNL_ARG_DST, target}};
      if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, Wrap(plan.bias_desc, bias->data.get()));
      RunPrimitive(plan.primitive, std::move(args));
      if (plan.dst_reorder) RunPrimitive(plan.dst_reorder, {{DNNL_ARG_FROM, plan.primitive_dst}, {DNNL_ARG_TO, tensor_dst}});
      stream.wait();
      return Status::Ok();
    });
  }

 private:
  struct Plan {
    bool usable = false;
    std::string implementation;
    Shape out_shape;
    dnnl::memory::desc src_desc, dst_desc, bias_desc, onnx_weights_desc, weights_desc;
    dnnl::deconvolution_forward primitive;
    dnnl::reorder src_reorder, dst_reorder;
    dnnl::memory primitive_src, primitive_dst;
    PackedWeights weights;
  };

  Status CreatePlan(const Shape& x_shape, const Shape& w_shape, bool has_bias, Plan* plan) {
    const size_t dims = x_shape.size() - 2;
    WindowAttributes w = window_;
    if (w.kernel.empty()) w.kernel.assign(w_shape.begin() + 2, w_shape.end());
    const Shape in_spatial(x_shape.begin() + 2, x_shape.end());
    std::vector<int64_t> out_spatial;
    RETURN_IF_ERROR(ResolveTransposedWindow(&w, in_spatial, output_padding_, output_shape_, &out_spatial));
    const int64_t in_channels = x_shape[1], group_out = w_shape[1], out_channels = group_out * group_;
    dnnl::memory::dims strides(w.strides.begin(), w.strides.end()), dilations, pad_l, pad_r;
    for (size_t d = 0; d < dims; ++d) {
      const int64_t extent = w.dilations[d] * (w.kernel[d] - 1) + 1;
      dilations.push_back(w.dilations[d] - 1);
      pad_l.push_back(w.pads[d]);
      // The right pad that makes oneDNN's output size the one ONNX computed (output padding included).
      pad_r.push_back((in_spatial[d] - 1) * w.strides[d] + extent - out_spatial[d] - w.pads[d]);
      if (pad_r.back() < 0 || pad_l.back() < 0) return Status::Ok();  // not usable
    }
    plan->out_shape = {x_shape[0], out_channels};
    plan->out_shape.insert(plan->out_shape.end(), out_spatial.begin(), out_spatial.end());
    plan->src_desc = PlainDesc(ToDims(x_shape));
    plan->dst_desc = PlainDesc(ToDims(plan->out_shape));
    plan->bias_desc = PlainDesc({out_channels});
    // ONNX weights [IC, OC/g, k...] = [g, IC/g, OC/g, k...] read as oneDNN's [g, OC/g, IC/g, k...].
    const int64_t group_in = in_channels / group_;
    int64_t kernel_size = 1;
    for (int64_t k : w.kernel) kernel_size *= k;
    dnnl::memory::dims kernel_dims(w_shape.begin() + 2, w_shape.end());
    dnnl::memory::dims kernel_strides(dims);
    for (size_t d = dims; d-- > 0;) kernel_strides[d] = d + 1 == dims ? 1 : kernel_strides[d + 1] * kernel_dims[d + 1];
    dnnl::memory::dims weight_dims{out_channels, in_channels}, weight_strides{kernel_size, group_out * kernel_size};
    if (group_ > 1) {
      weight_dims = {group_, group_out, group_in};
      weight_strides = {group_in * group_out * kernel_size, kernel_size, group_out * kernel_size};
    }
    weight_dims.insert(weight_dims.end(), kernel_dims.begin(), kernel_dims.end());
    weight_strides.insert(weight_strides.end(), kernel_strides.begin(), kernel_strides.end());
    plan->onnx_weights_desc = dnnl::memory::desc(weight_dims, dnnl::memory::data_type::f32, weight_strides);
    const auto f32 = dnnl::memory::data_type::f32;
    const dnnl::memory::desc src_any(ToDims(x_shape), f32, tag::any), dst_any(ToDims(plan->out_shape), f32, tag::any);
    const dnnl::memory::desc weights_any(weight_dims, f32, tag::any);
    auto desc = has_bias ? dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                             dnnl::algorithm::deconvolution_direct, src_any, weights_any,
                                                             plan->bias_desc, dst_any, strides, dilations, pad_l, pad_r)
                         : dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                             dnnl::algorithm::deconvolution_direct, src_any, weights_any,
                                                             dst_any, strides, dilations, pad_l, pad_r);
    dnnl::deconvolution_forward::primitive_desc pd(desc, OwnScratchpad(), Engine());
    plan->implementation = pd.impl_info_str();
    plan->weights_desc = pd.weights_desc();
    plan->primitive = dnnl::deconvolution_forward(pd);
    if (pd.src_desc() != plan->src_desc) {
      plan->primitive_src = ScratchMemory(pd.src_desc());
      plan->src_reorder = MakeReorder(plan->src_desc, pd.src_desc());
    }
    if (pd.dst_desc() != plan->dst_desc) {
      plan->primitive_dst = ScratchMemory(pd.dst_desc());
      plan->dst_reorder = MakeReorder(pd.dst_desc(), plan->dst_desc);
    }
    plan->usable = true;
    return Status::Ok();
  }

  WindowAttributes window_;
  int64_t group_;
  std::vector<int64_t> output_padding_, output_shape_;
  std::unique_ptr<Kernel> fallback_;
  ShapePlans<std::tuple<Shape, Shape, bool>, Plan> plans_;
  std::string last_;
};

}  // namespace

void RegisterDnnlConvKernels(KernelRegistry* r) {
  KernelFactory conv_reference = FactoryBefore(*r, "Conv");
  r->Register("Conv", 1, [conv_reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, conv_reference(node, opset));
    ASSIGN_OR_RETURN(WindowAttributes window, ReadWindow(node));
    ASSIGN_OR_RETURN(int64_t group, node.Int("group", 1));
    ASSIGN_OR_RETURN(std::vector<PostOp> post_ops, ReadPostOps(node));
    ASSIGN_OR_RETURN(Layouts layouts, ReadLayouts(node));
    ASSIGN_OR_RETURN(std::string precision, node.String(kPrecisionAttribute, "fp32"));
    ASSIGN_OR_RETURN(int64_t bf16_output, node.Int(kBf16OutputAttribute, 0));
    ASSIGN_OR_RETURN(std::optional<Int8Params> int8, ReadInt8Params(node));
    const int residual_input = HasAdd(post_ops) ? static_cast<int>(node.inputs.size()) - 1 : -1;
    return std::unique_ptr<Kernel>(std::make_unique<DnnlConv>(std::move(window), group, std::move(post_ops),
                                                              std::move(layouts), std::move(fallback), residual_input,
                                                              precision == "bf16", bf16_output == 1, std::move(int8)));
  });
  KernelFactory transpose_reference = FactoryBefore(*r, "ConvTranspose");
  r->Register("ConvTranspose", 1, [transpose_reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, transpose_reference(node, opset));
    ASSIGN_OR_RETURN(WindowAttributes window, ReadWindow(node));
    ASSIGN_OR_RETURN(int64_t group, node.Int("group", 1));
    ASSIGN_OR_RETURN(std::vector<int64_t> output_padding, node.Ints("output_padding"));
    ASSIGN_OR_RETURN(std::vector<int64_t> output_shape, node.Ints("output_shape"));
    return std::unique_ptr<Kernel>(std::make_unique<DnnlConvTranspose>(std::move(window), group, std::move(output_padding),
                                                                       std::move(output_shape), std::move(fallback)));
  });
}

}  // namespace inferd::runtime
