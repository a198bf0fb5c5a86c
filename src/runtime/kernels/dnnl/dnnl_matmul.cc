// oneDNN MatMul and Gemm: one oneDNN matmul primitive per input shape, falling back to the
// reference kernel for what oneDNN cannot run.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/precision.h"
#include "runtime/kernels/dnnl/dnnl_layout.h"
#include "runtime/kernels/dnnl/dnnl_post_ops.h"
#include "runtime/kernels/int8_attributes.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/post_ops.h"
#include "runtime/kernels/quantize_rules.h"
#include "runtime/kernels/simd/dynamic_quantize.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/threading.h"
#include "runtime/tuning.h"

namespace inferd::runtime {
namespace {

using namespace dnnl_kernels;
using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;
using tag = dnnl::memory::format_tag;

const Tensor* Input(Inputs in, size_t i) { return InputOrNull(in, i); }

// ---- MatMul and Gemm (both oneDNN matmul) ----

// The same [rows, K] x [K, N] product as a 1x1 convolution over the rows (A read as NHWC
// [1, K, rows, 1]), with the weights reordered once into oneDNN's blocked layout, where oneDNN's
// GEMM packs B again on every call. For few rows (a transformer's tokens at batch 1) that measured
// 1.6-2.9x faster here, for many rows slower: tuning picks (runtime/tuning.h).
// In int8 it reads the quantised A and the gap is wider where the CPU lacks VNNI: oneDNN 2.6's
// GEMM took 1.09 ms for an int8 A (8x960 by 960x1280, AVX2, 2 threads) against 0.11 ms for the
// convolution, 0.18 against 0.09 ms for a uint8 A.
struct ConvAlternative {
  dnnl::convolution_forward primitive;
  std::string implementation;
  dnnl::memory::desc src_desc, dst_desc, plain_weights_desc, weights_desc, bias_desc;
  FusedPostOps post_ops;
  PackedWeights weights;
  float weights_scale = 1;  // int8: kSevenBitWeights where the convolution needs them halved
  ScaledBias scaled_bias;   // int8: the bias with it
};

// How a MatMul/Gemm with constant weights runs below fp32: bf16 (`_precision`, runtime/precision.h)
// or int8 (a fused QDQ node, int8_attributes.h). Every run converts A (bf16) or quantises it (int8)
// into scratch with one reorder; B is packed once into the primitive's layout, in its type; the
// output stays fp32, the int8 sums scaled back by x_scale * w_scale[n].
struct LowPrecision {
  dnnl::memory::data_type a_type, b_type;
  float a_scale = 1;                 // multiplies A in its conversion (int8: 1 / x_scale)
  int32_t a_zero_point = 0;          // int8: added to A in its conversion, subtracted by the product
  std::vector<float> output_scales;  // int8 only (dynamic: the weights' scales; the run's x_scale is a post-op)
  bool dynamic = false;              // int8: A's scale and zero point come from each run's range
  bool int8() const { return !output_scales.empty(); }
};

StatusOr<std::optional<LowPrecision>> ReadLowPrecision(const Node& node) {
  using dt = dnnl::memory::data_type;
  if (node.Has(kInt8Dynamic)) {
    ASSIGN_OR_RETURN(std::vector<float> w_scales, node.Floats(kInt8WeightScales));
    if (w_scales.empty()) return Status::InvalidArgument(node.Describe() + ": dynamic int8 needs the weights' scales");
    return std::optional(LowPrecision{dt::u8, dt::s8, 1.f, 0, std::move(w_scales), /*dynamic=*/true});
  }
  ASSIGN_OR_RETURN(std::optional<Int8Params> int8, ReadInt8Params(node));
  if (int8) {
    return std::optional(LowPrecision{int8->x_signed ? dt::s8 : dt::u8, dt::s8, 1.f / int8->x_scale, int8->x_zero_point,
                                      int8->OutputScales()});
  }
  ASSIGN_OR_RETURN(std::string precision, node.String(kPrecisionAttribute, "fp32"));
  if (precision == "bf16") return std::optional(LowPrecision{dt::bf16, dt::bf16, 1.f, {}});
  return std::optional<LowPrecision>();
}

struct MatmulPlan {
  bool usable = false;
  std::string implementation;
  FusedPostOps post_ops;
  // oneDNN would run the fused post-ops only on its reference path (a residual broadcast along the
  // batch dims): the matmul runs without them and ApplyPostOps adds them after.
  bool post_ops_after = false;
  Shape out_shape;
  dnnl::memory::desc a_desc, b_desc, bias_desc, dst_desc;
  dnnl::matmul primitive;
  std::optional<ConvAlternative> conv;
  std::string tuning_key;  // op and shapes: layers of the same shape share one timing
  bool chosen = false;     // tuning done
  bool use_conv = false;
  // Below fp32 (LowPrecision): A's conversion into scratch, B as stored and as packed.
  bool low_precision = false;
  dnnl::reorder a_convert;
  dnnl::memory a_converted;
  dnnl::memory::desc b_stored_desc, b_packed_desc;
  PackedWeights b_packed;
  float b_scale = 1;  // kSevenBitWeights where int8 pairs saturate (Int8PairsSaturate)
  ScaledBias scaled_bias;  // the bias with it
  // Dynamic int8 (AppendDynamicScaling): A is quantised by QuantizeDynamically; each run's scale
  // and zero-point correction are the data of the first two post-ops.
  bool dynamic = false;
  std::vector<float> weight_scales;
  std::vector<int32_t> weight_column_sums;  // sum over k of B[k][n], from B at `column_sums_of`
  const uint8_t* column_sums_of = nullptr;
  float run_scale = 0;
  std::vector<float> run_correction;
  dnnl::memory::desc run_scale_desc, run_correction_desc;
};

// Dynamic int8 without run-time output scales or zero point, which keep oneDNN 2.6 off its brgemm
// kernels (its gemm:jit ran bert_encoder's products 1.3x slower here): the int8 sums are scaled
// by the weights' constant scales, then multiplied by the run's x_scale (a binary Mul by one value)
// and corrected for the run's zero point, -x_scale * w_scale[n] * zero_point * sum_k B[k][n] (a
// binary Add of one row), ahead of the node's own post-ops. Sums of u8 x s8 products stay exact in
// FP32 below 2^24, far above what the correction subtracts for K in the thousands.
constexpr int kRunScalePostOp = 0, kRunCorrectionPostOp = 1;
void AppendDynamicScaling(const Shape& out, MatmulPlan* plan) {
  dnnl::memory::dims ones(out.size(), 1), row = ones;
  row.back() = out.back();
  plan->run_scale_desc = PlainDesc(ones);
  plan->run_correction_desc = PlainDesc(row);
  plan->run_correction.assign(static_cast<size_t>(out.back()), 0.0f);
  dnnl::post_ops ops;
  ops.append_binary(dnnl::algorithm::binary_mul, plan->run_scale_desc);
  ops.append_binary(dnnl::algorithm::binary_add, plan->run_correction_desc);
  plan->post_ops.attr.set_post_ops(ops);
}

// Makes `plan` (its A, dst and post-ops already set) run below fp32, with B stored as `b_stored`.
void PlanLowPrecision(const LowPrecision& lp, const Tensor& b, const dnnl::memory::desc& b_stored,
                      const std::optional<dnnl::memory::desc>& bias, MatmulPlan* plan) {
  const dnnl::memory::dims a_dims = plan->a_desc.dims();
  const dnnl::memory::desc a_converted = PlainDesc(a_dims, lp.a_type);
  dnnl::primitive_attr attr = plan->post_ops.attr;
  const int scales_mask = lp.output_scales.size() > 1 ? 1 << 1 : 0;  // per column
  std::vector<float> output_scales = lp.output_scales;
  if (lp.int8() && NeedsSevenBitWeights(b)) {  // oneDNN's int8 GEMM never halves B itself
    plan->b_scale = kSevenBitWeights;
    for (float& scale : output_scales) scale /= kSevenBitWeights;
  }
  if (lp.int8()) attr.set_output_scales(scales_mask, output_scales);
  if (lp.a_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {lp.a_zero_point});
  const dnnl::memory::desc b_any(b_stored.dims(), lp.b_type, dnnl::memory::format_tag::any);
  const auto desc = bias ? dnnl::matmul::desc(a_converted, b_any, *bias, plan->dst_desc)
                         : dnnl::matmul::desc(a_converted, b_any, plan->dst_desc);
  dnnl::matmul::primitive_desc pd(desc, attr, Engine());
  plan->implementation = std::string(pd.impl_info_str()) + (lp.int8() ? " (int8)" : " (bf16)");
  plan->primitive = dnnl::matmul(pd);
  plan->dynamic = lp.dynamic;
  if (lp.dynamic) {
    plan->weight_scales = output_scales;
  } else {
    plan->a_convert = lp.int8() ? MakeScaledReorder(plan->a_desc, a_converted, lp.a_scale, lp.a_zero_point)
                                : MakeReorder(plan->a_desc, a_converted);
  }
  plan->a_converted = ScratchMemory(a_converted);
  plan->b_stored_desc = b_stored;
  plan->b_packed_desc = pd.weights_desc();
  plan->low_precision = true;
  plan->chosen = true;  // AddInt8ConvAlternative may offer one more candidate
}

// Where a [rows, K] x [K, N] product's operands are, as element strides of their two dims.
struct GemmView {
  int64_t rows, k, n;
  dnnl::memory::dims a_strides;  // (row, k)
  dnnl::memory::dims b_strides;  // (k, n)
};

// `int8` (not dynamic): the convolution reads A as PlanLowPrecision quantised it (`g` must then
// describe that dense copy) and `b` as stored, in int8.
std::optional<ConvAlternative> MakeConvAlternative(const GemmView& g, bool has_bias, float alpha,
                                                   const std::vector<PostOp>& post_ops, const Tensor* residual,
                                                   const LowPrecision* int8 = nullptr, const Tensor* b = nullptr) {
  using dims = dnnl::memory::dims;
  const auto f32 = dnnl::memory::data_type::f32;
  const auto src_type = int8 ? int8->a_type : f32, weights_type = int8 ? int8->b_type : f32;
  ConvAlternative conv;
  // Strides of the size-1 dims as a dense layout would have them, so that oneDNN recognises NHWC.
  conv.src_desc = dnnl::memory::desc({1, g.k, g.rows, 1}, src_type,
                                     dims{g.rows * g.k, g.a_strides[1], g.a_strides[0], g.a_strides[0]});
  conv.dst_desc = dnnl::memory::desc({1, g.n, g.rows, 1}, f32, dims{g.rows * g.n, 1, g.n, g.n});
  conv.plain_weights_desc =
      dnnl::memory::desc({g.n, g.k, 1, 1}, weights_type, dims{g.b_strides[1], g.b_strides[0], 1, 1});
  conv.bias_desc = PlainDesc({g.n});
  // The residual (flat: [rows, N] or [1, N]) in the convolution's dims.
  std::optional<Tensor> residual_4d;
  std::optional<dnnl::memory::desc> residual_desc;
  if (residual != nullptr) {
    residual_4d = *residual;
    if (residual->shape == Shape{g.rows, g.n}) {
      residual_4d->shape = {1, g.n, g.rows, 1};
      residual_desc = conv.dst_desc;
    } else if (!residual->shape.empty() && residual->shape.back() == g.n && ElementsOf(*residual) == g.n) {
      residual_4d->shape = {1, g.n, 1, 1};  // one value per column: [N], [1, N]
      residual_desc = PlainDesc({1, g.n, 1, 1});
    } else {
      return std::nullopt;
    }
  }
  if (!BuildPostOps(post_ops, {1, g.n, g.rows, 1}, residual_4d ? &*residual_4d : nullptr, &conv.post_ops, false, false,
                    residual_desc)) {
    return std::nullopt;
  }
  if (alpha != 1) conv.post_ops.attr.set_output_scales(0, {alpha});
  if (int8 != nullptr) {
    std::vector<float> scales = int8->output_scales;
    // As the GEMM's B (PlanLowPrecision), but oneDNN's convolution halves a signed input's
    // weights itself: the two candidates then compute the same products.
    if (int8->a_type == dnnl::memory::data_type::u8 && NeedsSevenBitWeights(*b)) {
      conv.weights_scale = kSevenBitWeights;
      for (float& scale : scales) scale /= kSevenBitWeights;
    }
    conv.post_ops.attr.set_output_scales(scales.size() > 1 ? 1 << 1 : 0, scales);  // per output channel
    if (int8->a_zero_point != 0) conv.post_ops.attr.set_zero_points(DNNL_ARG_SRC, 0, {int8->a_zero_point});
  }
  const dnnl::memory::desc any_weights({g.n, g.k, 1, 1}, weights_type, dnnl::memory::format_tag::any);
  auto desc = has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                         dnnl::algorithm::convolution_direct, conv.src_desc, any_weights,
                                                         conv.bias_desc, conv.dst_desc, {1, 1}, {0, 0}, {0, 0})
                       : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                         dnnl::algorithm::convolution_direct, conv.src_desc, any_weights,
                                                         conv.dst_desc, {1, 1}, {0, 0}, {0, 0});
  dnnl::convolution_forward::primitive_desc pd(desc, conv.post_ops.attr, Engine(), /*allow_empty=*/true);
  if (!pd || std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return std::nullopt;
  conv.implementation = std::string(pd.impl_info_str()) + (int8 ? " as 1x1 conv (int8)" : " (as 1x1 conv)");
  conv.weights_desc = pd.weights_desc();
  conv.primitive = dnnl::convolution_forward(pd);
  return conv;
}

std::string TuningKey(const char* op, const GemmView& g, bool has_bias, const Tensor* residual,
                      const std::vector<PostOp>& post_ops, const LowPrecision* int8 = nullptr) {
  std::string key = std::string(op) + " rows=" + std::to_string(g.rows) + " k=" + std::to_string(g.k) +
                    " n=" + std::to_string(g.n) + " a=" + std::to_string(g.a_strides[0]) + "," +
                    std::to_string(g.a_strides[1]) + " b=" + std::to_string(g.b_strides[0]) + "," +
                    std::to_string(g.b_strides[1]) + (has_bias ? " bias" : "") + " post=";
  for (const PostOp& op_ : post_ops) key += PostOpName(op_.kind) + ",";
  if (residual != nullptr) key += " residual=" + ShapeToString(residual->shape);
  if (int8 != nullptr) {
    key += int8->a_type == dnnl::memory::data_type::s8 ? " int8=s8" : " int8=u8";
    if (int8->a_zero_point != 0) key += " x_zero=" + std::to_string(int8->a_zero_point);
  }
  return key;
}

// Offers the 1x1 convolution as a candidate: built only when it may be used (its choice is not
// known yet, or known to be it). Without timing, it is the choice for few rows, where it measured
// faster.
void AddConvAlternative(const GemmView& view, bool has_bias, float alpha, const std::vector<PostOp>& post_ops,
                        const Tensor* residual, MatmulPlan* plan, const LowPrecision* int8 = nullptr,
                        const Tensor* b = nullptr) {
  const std::optional<int> known = KnownChoice(plan->tuning_key, view.rows <= 256 ? 1 : 0);
  if (known == 0) {
    plan->chosen = true;
    return;
  }
  plan->conv = MakeConvAlternative(view, has_bias, alpha, post_ops, residual, int8, b);
  if (known == 1 && plan->conv) {
    plan->chosen = true;
    plan->use_conv = true;
    plan->implementation = plan->conv->implementation;
  }
}

// A static int8 product (PlanLowPrecision made it) also offers the 1x1 convolution over the
// quantised A, a dense [rows, K], timed against oneDNN's GEMM. B is as stored: `b_strides` (k, n).
void AddInt8ConvAlternative(const char* op, const LowPrecision& lp, const Tensor& b, int64_t rows, int64_t k,
                            int64_t n, const dnnl::memory::dims& b_strides, bool has_bias,
                            const std::vector<PostOp>& post_ops, const Tensor* residual, MatmulPlan* plan) {
  if (!lp.int8() || lp.dynamic) return;
  const GemmView view{rows, k, n, {k, 1}, b_strides};
  plan->tuning_key = TuningKey(op, view, has_bias, residual, post_ops, &lp);
  plan->chosen = false;
  AddConvAlternative(view, has_bias, 1.0f, post_ops, residual, plan, &lp, &b);
}

// DynamicQuantizeLinear of `a` (fp32) into `q`, on the intra-op threads: the range, then the
// values, by the reference kernel's rules (quantize_rules.h), so the product sees the same bytes.
DynamicQuantization QuantizeDynamically(const Tensor& a, uint8_t* q) {
  const float* x = reinterpret_cast<const float*>(a.data.get());
  const int64_t count = ElementsOf(a);
  // Large enough that a chunk's SIMD pass outweighs handing it to another thread.
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  std::vector<simd::ValueRange> ranges(static_cast<size_t>(chunks));
  ParallelFor(chunks, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      ranges[static_cast<size_t>(c)] = simd::RangeWithZero(x + c * kChunk, std::min(kChunk, count - c * kChunk));
    }
  });
  simd::ValueRange range;
  for (const simd::ValueRange& r : ranges) range = {std::min(range.low, r.low), std::max(range.high, r.high)};
  const DynamicQuantization quantization = DynamicQuantizationOf(range.low, range.high);
  if (quantization.scale == 0) {
    std::fill(q, q + count, uint8_t{0});
    return quantization;
  }
  ParallelFor(chunks, [&](int64_t begin, int64_t end) {
    const int64_t first = begin * kChunk;
    simd::QuantizeToUint8(x + first, std::min(count, end * kChunk) - first, quantization.scale,
                          quantization.zero_point, q + first);
  });
  return quantization;
}

// The run's x_scale and zero-point correction (AppendDynamicScaling), with B's column sums taken
// once per weights buffer.
void SetRunScaling(const DynamicQuantization& q, const Tensor& b, MatmulPlan* plan) {
  const auto* weights = reinterpret_cast<const int8_t*>(b.data.get());
  const auto& strides = plan->b_stored_desc.data.format_desc.blocking.strides;  // plain 2-D (k, n)
  const int64_t k = plan->b_stored_desc.dims()[0], n = plan->b_stored_desc.dims()[1];
  if (plan->column_sums_of != b.data.get()) {
    plan->weight_column_sums.assign(static_cast<size_t>(n), 0);
    for (int64_t row = 0; row < k; ++row) {
      for (int64_t column = 0; column < n; ++column) {
        const int8_t w = weights[row * strides[0] + column * strides[1]];
        // As B was packed: halved where int8 pairs saturate, by the reorder's rounding (to nearest even).
        plan->weight_column_sums[static_cast<size_t>(column)] +=
            plan->b_scale == 1 ? w : static_cast<int32_t>(std::nearbyint(static_cast<float>(w) * plan->b_scale));
      }
    }
    plan->column_sums_of = b.data.get();
  }
  plan->run_scale = q.scale;
  const bool per_column = plan->weight_scales.size() > 1;
  for (int64_t column = 0; column < n; ++column) {
    const auto c = static_cast<size_t>(column);
    plan->run_correction[c] = -q.scale * plan->weight_scales[per_column ? c : 0] * static_cast<float>(q.zero_point) *
                              static_cast<float>(plan->weight_column_sums[c]);
  }
}

// Runs the plan's matmul, or its 1x1-convolution alternative (timing both the first time).
Status ExecuteMatmul(MatmulPlan& plan, const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor* residual,
                     float* dst) {
  // Below fp32, A is converted (bf16) or quantised (int8) into scratch first: both candidates read it.
  const void* a_data = a.data.get();
  std::optional<DynamicQuantization> run_quantization;
  if (plan.low_precision) {
    BindScratch({&plan.a_converted});
    if (plan.dynamic) {
      run_quantization = QuantizeDynamically(a, static_cast<uint8_t*>(plan.a_converted.get_data_handle()));
    } else {
      RunPrimitive(plan.a_convert, {{DNNL_ARG_FROM, Wrap(plan.a_desc, a.data.get())}, {DNNL_ARG_TO, plan.a_converted}});
    }
    a_data = plan.a_converted.get_data_handle();
  }
  auto run_matmul = [&]() -> Status {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DST, Wrap(plan.dst_desc, dst)}};
    if (plan.low_precision) {
      plan.b_packed.Update(b.data, plan.b_stored_desc, plan.b_packed_desc, /*private_copy=*/false, plan.b_scale);
      args.emplace(DNNL_ARG_SRC, plan.a_converted);
      args.emplace(DNNL_ARG_WEIGHTS, plan.b_packed.memory);
      if (run_quantization) {
        SetRunScaling(*run_quantization, b, &plan);
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(kRunScalePostOp) | DNNL_ARG_SRC_1,
                     Wrap(plan.run_scale_desc, &plan.run_scale));
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(kRunCorrectionPostOp) | DNNL_ARG_SRC_1,
                     Wrap(plan.run_correction_desc, plan.run_correction.data()));
      }
      if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, Wrap(plan.bias_desc, plan.scaled_bias.For(*bias, plan.b_scale)));
    } else {
      args.emplace(DNNL_ARG_SRC, Wrap(plan.a_desc, a.data.get()));
      args.emplace(DNNL_ARG_WEIGHTS, Wrap(plan.b_desc, b.data.get()));
      if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, Wrap(plan.bias_desc, bias->data.get()));
    }
    AddResidualArgument(plan.post_ops, residual, &args);
    RunPrimitive(plan.primitive, std::move(args));
    ThreadStream().wait();
    return Status::Ok();
  };
  auto run_conv = [&]() -> Status {
    ConvAlternative& conv = *plan.conv;
    conv.weights.Update(b.data, conv.plain_weights_desc, conv.weights_desc, /*private_copy=*/false, conv.weights_scale);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, Wrap(conv.src_desc, a_data)},
                                               {DNNL_ARG_WEIGHTS, conv.weights.memory},
                                               {DNNL_ARG_DST, Wrap(conv.dst_desc, dst)}};
    if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, Wrap(conv.bias_desc, conv.scaled_bias.For(*bias, conv.weights_scale)));
    AddResidualArgument(conv.post_ops, residual, &args);
    RunPrimitive(conv.primitive, std::move(args));
    ThreadStream().wait();
    return Status::Ok();
  };
  if (!plan.chosen) {
    plan.chosen = true;
    if (plan.conv) {
      const int choice = ChooseFastest(plan.tuning_key, 2, 0, [&](int candidate) {
        return Guarded("MatMul", [&] { return candidate == 1 ? run_conv() : run_matmul(); });
      });
      plan.use_conv = choice == 1;
      if (plan.use_conv) plan.implementation = plan.conv->implementation;
    }
    // The loser's packed weights go.
    if (plan.use_conv) {
      plan.b_packed = PackedWeights();
    } else {
      plan.conv.reset();
    }
  }
  return plan.use_conv ? run_conv() : run_matmul();
}

class DnnlMatMul final : public Kernel {
 public:
  DnnlMatMul(std::vector<PostOp> post_ops, std::unique_ptr<Kernel> fallback, std::optional<LowPrecision> low_precision)
      : post_ops_(std::move(post_ops)), fallback_(std::move(fallback)), low_precision_(std::move(low_precision)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { plans_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const Tensor* a = Input(in, 0);
    const Tensor* b = Input(in, 1);
    const bool int8 = low_precision_ && low_precision_->int8();
    if (a == nullptr || b == nullptr || a->dtype != DataType::kFp32 || b->dtype != (int8 ? DataType::kInt8 : DataType::kFp32) ||
        a->shape.size() < 2 || b->shape.size() < 2) {
      if (int8) return Status::InvalidArgument("int8 MatMul: needs an FP32 A and INT8 B");
      return fallback_->Run(in, out);
    }
    const Tensor* residual = ResidualOf(post_ops_, in);
    auto key = std::make_tuple(a->shape, b->shape, ShapeOrEmpty(residual));
    ASSIGN_OR_RETURN(MatmulPlan* found, FindOrCreatePlan(plans_, key, "MatMul", [&](MatmulPlan* created) {
      return CreatePlan(a->shape, *b, residual, created);
    }));
    MatmulPlan& plan = *found;
    if (!plan.usable && int8) return Status::InvalidArgument("int8 MatMul: oneDNN cannot run this shape");
    if (!plan.usable) return fallback_->Run(in, out);
    last_ = plan.implementation;
    return Guarded("MatMul", [&]() -> Status {
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, plan.out_shape));
      RETURN_IF_ERROR(ExecuteMatmul(plan, *a, *b, nullptr, residual, dst));
      last_ = plan.implementation;
      if (plan.post_ops_after) return ApplyPostOps(post_ops_, residual, &out[0]);
      return Status::Ok();
    });
  }

 private:
  Status CreatePlan(const Shape& a_shape, const Tensor& b_tensor, const Tensor* residual, MatmulPlan* plan) {
    const Shape& b_shape = b_tensor.shape;
    const size_t rank = std::max(a_shape.size(), b_shape.size());
    Shape a = a_shape, b = b_shape;
    a.insert(a.begin(), rank - a.size(), 1);  // oneDNN wants equal ranks; ones broadcast
    b.insert(b.begin(), rank - b.size(), 1);
    if (a[rank - 1] != b[rank - 2]) return Status::InvalidArgument("MatMul: inner dims differ");
    Shape out(rank);
    for (size_t d = 0; d + 2 < rank; ++d) {
      if (a[d] != b[d] && a[d] != 1 && b[d] != 1) return Status::InvalidArgument("MatMul: batch dims differ");
      out[d] = std::max(a[d], b[d]);
    }
    out[rank - 2] = a[rank - 2];
    out[rank - 1] = b[rank - 1];
    plan->out_shape = Shape(out.end() - static_cast<int64_t>(std::max(a_shape.size(), b_shape.size())), out.end());
    std::optional<Tensor> flat_residual;
    const bool flat = rank == 2 || FlattensToOneGemm(a, b, out, residual, &flat_residual);
    if (flat && rank > 2) {
      const int64_t rows = ElementsOf(Tensor{.shape = out}) / out[rank - 1];
      a = {rows, a[rank - 1]};
      b = {b[rank - 2], b[rank - 1]};
      out = {rows, out[rank - 1]};
      if (flat_residual) residual = &*flat_residual;
    }
    plan->a_desc = PlainDesc(ToDims(a));
    plan->b_desc = PlainDesc(ToDims(b));
    plan->dst_desc = PlainDesc(ToDims(out));
    if (low_precision_ && low_precision_->dynamic) AppendDynamicScaling(out, plan);
    if (!BuildPostOps(post_ops_, out, residual, &plan->post_ops)) return Status::Ok();  // not usable
    dnnl::matmul::desc desc(plan->a_desc, plan->b_desc, plan->dst_desc);
    dnnl::matmul::primitive_desc pd(desc, plan->post_ops.attr, Engine());
    if (!post_ops_.empty() && std::string(pd.impl_info_str()).rfind("ref", 0) == 0) {
      plan->post_ops = FusedPostOps();
      plan->post_ops_after = true;
      pd = dnnl::matmul::primitive_desc(desc, OwnScratchpad(), Engine());
    }
    plan->implementation = pd.impl_info_str();
    plan->primitive = dnnl::matmul(pd);
    plan->usable = true;
    if (low_precision_ && flat && b_shape.size() == 2 && !plan->post_ops_after) {
      const auto stored = low_precision_->int8() ? dnnl::memory::data_type::s8 : dnnl::memory::data_type::f32;
      PlanLowPrecision(*low_precision_, b_tensor, PlainDesc(ToDims(b), stored), std::nullopt, plan);
      AddInt8ConvAlternative("MatMul", *low_precision_, b_tensor, out[0], a[1], out[1], {out[1], 1}, false, post_ops_,
                             residual, plan);
      return Status::Ok();
    }
    if (low_precision_ && low_precision_->int8()) return Status::Internal("int8 MatMul: B must be 2-D and the product flat");
    // Weights of a Linear layer (B without batch dims): the convolution is a candidate.
    if (flat && b_shape.size() == 2 && !plan->post_ops_after) {
      const GemmView view{out[0], a[1], out[1], {a[1], 1}, {out[1], 1}};
      plan->tuning_key = TuningKey("MatMul", view, false, residual, post_ops_);
      AddConvAlternative(view, false, 1.0f, post_ops_, residual, plan);
    }
    return Status::Ok();
  }

  // [..., M, K] x [K, N] (B without batch dims, as in every Linear layer) is one [rows, K] x [K, N]
  // product: oneDNN's batched path would run one small GEMM per batch entry (per token, for a
  // sequence-first transformer) on one thread. A residual must fit the flat view too.
  static bool FlattensToOneGemm(const Shape& a, const Shape& b, const Shape& out, const Tensor* residual,
                                std::optional<Tensor>* flat_residual) {
    const size_t rank = out.size();
    if (rank < 3) return false;
    for (size_t d = 0; d + 2 < rank; ++d) {
      if (b[d] != 1) return false;
    }
    (void)a;
    if (residual == nullptr) return true;
    Shape padded = residual->shape;
    padded.insert(padded.begin(), rank - std::min(rank, padded.size()), 1);
    Tensor view;
    view.dtype = residual->dtype;
    view.data = residual->data;
    view.byte_size = residual->byte_size;
    if (padded == out) {
      view.shape = {ElementsOf(Tensor{.shape = out}) / out[rank - 1], out[rank - 1]};
    } else if (std::all_of(padded.begin(), padded.end() - 1, [](int64_t d) { return d == 1; })) {
      view.shape = {1, padded[rank - 1]};
    } else {
      return false;
    }
    *flat_residual = std::move(view);
    return true;
  }

  std::vector<PostOp> post_ops_;
  std::unique_ptr<Kernel> fallback_;
  std::optional<LowPrecision> low_precision_;
  ShapePlans<std::tuple<Shape, Shape, Shape>, MatmulPlan> plans_;
  std::string last_;
};

// Gemm: Y = alpha * A' * B' + beta * C. oneDNN runs it when beta is 0 or 1 (C as the bias).
class DnnlGemm final : public Kernel {
 public:
  DnnlGemm(float alpha, float beta, bool trans_a, bool trans_b, std::vector<PostOp> post_ops,
           std::unique_ptr<Kernel> fallback, std::optional<LowPrecision> low_precision)
      : alpha_(alpha), beta_(beta), trans_a_(trans_a), trans_b_(trans_b), post_ops_(std::move(post_ops)),
        fallback_(std::move(fallback)), low_precision_(alpha == 1 ? std::move(low_precision) : std::nullopt) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { plans_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const Tensor* a = Input(in, 0);
    const Tensor* b = Input(in, 1);
    const Tensor* c = beta_ != 0 ? Input(in, 2) : nullptr;
    const bool int8 = low_precision_ && low_precision_->int8();
    if (a == nullptr || b == nullptr || a->dtype != DataType::kFp32 || b->dtype != (int8 ? DataType::kInt8 : DataType::kFp32) ||
        a->shape.size() != 2 || b->shape.size() != 2 || (c != nullptr && (beta_ != 1 || c->dtype != DataType::kFp32))) {
      if (int8) return Status::InvalidArgument("int8 Gemm: needs an FP32 A, INT8 B and beta 1");
      return fallback_->Run(in, out);
    }
    const Tensor* residual = ResidualOf(post_ops_, in);
    auto key = std::make_tuple(a->shape, b->shape, c != nullptr, ShapeOrEmpty(c), ShapeOrEmpty(residual));
    ASSIGN_OR_RETURN(MatmulPlan* found, FindOrCreatePlan(plans_, key, "Gemm", [&](MatmulPlan* created) {
      return CreatePlan(a->shape, *b, c, residual, created);
    }));
    MatmulPlan& plan = *found;
    if (!plan.usable && int8) return Status::InvalidArgument("int8 Gemm: oneDNN cannot run this shape");
    if (!plan.usable) return fallback_->Run(in, out);
    last_ = plan.implementation;
    return Guarded("Gemm", [&]() -> Status {
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, plan.out_shape));
      RETURN_IF_ERROR(ExecuteMatmul(plan, *a, *b, c, residual, dst));
      last_ = plan.implementation;
      return Status::Ok();
    });
  }

 private:
  Status CreatePlan(const Shape& a_shape, const Tensor& b_tensor, const Tensor* c, const Tensor* residual,
                    MatmulPlan* plan) {
    const Shape& b_shape = b_tensor.shape;
    const int64_t m = trans_a_ ? a_shape[1] : a_shape[0], k = trans_a_ ? a_shape[0] : a_shape[1];
    const int64_t n = trans_b_ ? b_shape[0] : b_shape[1];
    if ((trans_b_ ? b_shape[1] : b_shape[0]) != k) return Status::InvalidArgument("Gemm: inner dims differ");
    // A transposed is A's buffer read with swapped strides; no copy.
    plan->a_desc = dnnl::memory::desc({m, k}, dnnl::memory::data_type::f32,
                                      trans_a_ ? dnnl::memory::dims{1, m} : dnnl::memory::dims{k, 1});
    plan->b_desc = dnnl::memory::desc({k, n}, dnnl::memory::data_type::f32,
                                      trans_b_ ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n, 1});
    plan->dst_desc = PlainDesc({m, n});
    plan->out_shape = {m, n};
    if (!BuildPostOps(post_ops_, plan->out_shape, residual, &plan->post_ops)) return Status::Ok();  // not usable
    if (c != nullptr) {
      // C broadcasts onto (M, N) from its trailing dims: [], [N], [1, N], [M, 1], [M, N]...
      Shape padded = c->shape;
      if (padded.size() > 2) return Status::InvalidArgument("Gemm: C has rank above 2");
      padded.insert(padded.begin(), 2 - padded.size(), 1);
      if ((padded[0] != 1 && padded[0] != m) || (padded[1] != 1 && padded[1] != n)) {
        return Status::InvalidArgument("Gemm: C does not broadcast to (M, N)");
      }
      plan->bias_desc = PlainDesc(ToDims(padded));
    }
    if (low_precision_) {
      if (low_precision_->dynamic) return Status::Internal("Gemm: dynamic int8 runs as MatMul only");
      const auto stored = low_precision_->int8() ? dnnl::memory::data_type::s8 : dnnl::memory::data_type::f32;
      const dnnl::memory::desc b_stored({k, n}, stored, trans_b_ ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n, 1});
      PlanLowPrecision(*low_precision_, b_tensor, b_stored, c ? std::optional(plan->bias_desc) : std::nullopt, plan);
      plan->usable = true;
      // The fused int8 Gemm's C is its bias, one value per column (qdq_fusion.cc).
      if (c == nullptr || ElementsOf(*c) == n) {
        AddInt8ConvAlternative("Gemm", *low_precision_, b_tensor, m, k, n,
                               trans_b_ ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n, 1}, c != nullptr, post_ops_,
                               residual, plan);
      }
      return Status::Ok();
    }
    dnnl::primitive_attr& attr = plan->post_ops.attr;
    if (alpha_ != 1) attr.set_output_scales(0, {alpha_});
    if (c != nullptr) {
      // oneDNN adds an fp32 bias after the output scale; alpha must then be 1 for Y = alpha*AB + C.
      if (alpha_ != 1) return Status::Internal("Gemm: alpha != 1 with C runs on the reference kernel");
      dnnl::matmul::primitive_desc pd(
          dnnl::matmul::desc(plan->a_desc, plan->b_desc, plan->bias_desc, plan->dst_desc), attr, Engine());
      plan->implementation = pd.impl_info_str();
      plan->primitive = dnnl::matmul(pd);
    } else {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(plan->a_desc, plan->b_desc, plan->dst_desc), attr, Engine());
      plan->implementation = pd.impl_info_str();
      plan->primitive = dnnl::matmul(pd);
    }
    plan->usable = true;
    // C as the convolution's bias when it is one value per output column.
    const bool c_is_bias = c != nullptr && ElementsOf(*c) == n && (c->shape.size() == 1 || c->shape[0] == 1);
    if (c == nullptr || c_is_bias) {
      const GemmView view{m, k, n, trans_a_ ? dnnl::memory::dims{1, m} : dnnl::memory::dims{k, 1},
                          trans_b_ ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n, 1}};
      plan->tuning_key = TuningKey("Gemm", view, c_is_bias, residual, post_ops_);
      AddConvAlternative(view, c_is_bias, alpha_, post_ops_, residual, plan);
    }
    return Status::Ok();
  }

  float alpha_, beta_;
  bool trans_a_, trans_b_;
  std::vector<PostOp> post_ops_;
  std::unique_ptr<Kernel> fallback_;
  std::optional<LowPrecision> low_precision_;
  ShapePlans<std::tuple<Shape, Shape, bool, Shape, Shape>, MatmulPlan> plans_;
  std::string last_;
};


}  // namespace

void RegisterDnnlMatmulKernels(KernelRegistry* r) {
  KernelFactory matmul_reference = FactoryBefore(*r, "MatMul");
  r->Register("MatMul", 1, [matmul_reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, matmul_reference(node, opset));
    ASSIGN_OR_RETURN(std::vector<PostOp> post_ops, ReadPostOps(node));
    ASSIGN_OR_RETURN(std::optional<LowPrecision> low_precision, ReadLowPrecision(node));
    return std::unique_ptr<Kernel>(
        std::make_unique<DnnlMatMul>(std::move(post_ops), std::move(fallback), std::move(low_precision)));
  });
  KernelFactory gemm_reference = FactoryBefore(*r, "Gemm");
  r->Register("Gemm", 6, [gemm_reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, gemm_reference(node, opset));
    ASSIGN_OR_RETURN(float alpha, node.Float("alpha", 1.0f));
    ASSIGN_OR_RETURN(float beta, node.Float("beta", 1.0f));
    ASSIGN_OR_RETURN(int64_t trans_a, node.Int("transA", 0));
    ASSIGN_OR_RETURN(int64_t trans_b, node.Int("transB", 0));
    ASSIGN_OR_RETURN(std::vector<PostOp> post_ops, ReadPostOps(node));
    ASSIGN_OR_RETURN(std::optional<LowPrecision> low_precision, ReadLowPrecision(node));
    return std::unique_ptr<Kernel>(std::make_unique<DnnlGemm>(alpha, beta, trans_a != 0, trans_b != 0, std::move(post_ops),
                                                              std::move(fallback), std::move(low_precision)));
  });
}
}  // namespace inferd::runtime
