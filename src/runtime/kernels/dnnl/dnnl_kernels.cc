// oneDNN kernels for the heavy ops: Conv, MatMul, Gemm. Each keeps one primitive per input shape
// (oneDNN's lifecycle: memory desc -> primitive desc -> primitive -> execute) and falls back to the
// reference kernel for what oneDNN cannot run (other element types, shapes it rejects).
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/dnnl/dnnl_layout.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/post_ops.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/kernels/window.h"

namespace inferd::runtime {
namespace {

using namespace dnnl_kernels;
using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;
using tag = dnnl::memory::format_tag;

const Tensor* Input(Inputs in, size_t i) { return i < in.size() ? in[i] : nullptr; }


// ---- post-ops (fused Add and activations) ----

struct FusedPostOps {
  dnnl::primitive_attr attr;
  int residual_index = -1;  // position of the Add among the post-ops
  dnnl::memory::desc residual_desc;
  // The Add as oneDNN's "sum" post-op: the residual is copied into the destination first. The
  // fast convolutions take that in blocked layouts, where a binary post-op with a plain residual
  // would push them onto a slow path.
  bool add_as_sum = false;
};

// Expresses `ops` as oneDNN post-ops for an output of `out_shape`. False when one cannot be (a
// residual that does not broadcast onto the output): the reference path runs then.
// A blocked residual (layout propagation) has the output's shape.
bool BuildPostOps(const std::vector<PostOp>& ops, const Shape& out_shape, const Tensor* residual, FusedPostOps* fused,
                  bool prefer_sum = false, bool residual_blocked = false) {
  dnnl::post_ops post_ops;
  for (size_t i = 0; i < ops.size(); ++i) {
    const PostOp& op = ops[i];
    switch (op.kind) {
      case PostOp::Kind::kAdd: {
        if (residual == nullptr || residual->dtype != DataType::kFp32 || residual->shape.size() > out_shape.size()) return false;
        Shape padded = residual->shape;
        padded.insert(padded.begin(), out_shape.size() - padded.size(), 1);
        for (size_t d = 0; d < padded.size(); ++d) {
          if (padded[d] != out_shape[d] && padded[d] != 1) return false;
        }
        if (residual_blocked && padded != out_shape) return false;
        fused->residual_desc = LayoutDesc(padded, residual_blocked);
        fused->residual_index = post_ops.len();
        fused->add_as_sum = prefer_sum && i == 0 && residual->shape == out_shape;
        if (fused->add_as_sum) {
          post_ops.append_sum(1.0f);
        } else {
          post_ops.append_binary(dnnl::algorithm::binary_add, fused->residual_desc);
        }
        break;
      }
      case PostOp::Kind::kRelu: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0, 0); break;
      case PostOp::Kind::kLeakyRelu: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, op.alpha, 0); break;
      case PostOp::Kind::kClip: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, op.alpha, op.beta); break;
      case PostOp::Kind::kSigmoid: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0, 0); break;
      case PostOp::Kind::kTanh: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0, 0); break;
      case PostOp::Kind::kHardSwish: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0, 0); break;
      case PostOp::Kind::kElu: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_elu, op.alpha, 0); break;
      case PostOp::Kind::kSwish: post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0); break;
      case PostOp::Kind::kHardSigmoid:  // max(0, min(1, alpha * x + beta)): oneDNN 2.6 has no hardsigmoid
        post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, op.alpha, op.beta);
        post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 1.0f);
        break;
    }
  }
  fused->attr.set_post_ops(post_ops);
  return true;
}

void AddResidualArgument(const FusedPostOps& fused, const Tensor* residual, std::unordered_map<int, dnnl::memory>* args) {
  if (fused.residual_index < 0 || fused.add_as_sum) return;
  args->emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(fused.residual_index) | DNNL_ARG_SRC_1,
                Wrap(fused.residual_desc, residual->data.get()));
}

const Tensor* ResidualOf(const std::vector<PostOp>& ops, Inputs in) {
  return HasAdd(ops) && !in.empty() ? in.back() : nullptr;
}

Shape ShapeOrEmpty(const Tensor* t) { return t ? t->shape : Shape{}; }

// ---- Conv ----

// Each tensor has the layout the layout pass gave it (plain, or blocked when the pass keeps a chain
// of convolutions blocked); the primitive has the layout oneDNN picked. Reorders run only where the
// two differ, which after layout propagation is at the edges of a chain.
class DnnlConv final : public Kernel {
 public:
  DnnlConv(WindowAttributes window, int64_t group, std::vector<PostOp> post_ops, Layouts layouts,
           std::unique_ptr<Kernel> fallback)
      : window_(std::move(window)), group_(group), post_ops_(std::move(post_ops)), layouts_(std::move(layouts)),
        fallback_(std::move(fallback)) {}

  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const Tensor* x = Input(in, 0);
    const Tensor* w = Input(in, 1);
    if (x == nullptr || w == nullptr || x->dtype != DataType::kFp32 || w->dtype != DataType::kFp32 ||
        x->shape.size() < 3 || x->shape.size() > 5 || w->shape.size() != x->shape.size()) {
      return Fallback(in, out);
    }
    const Tensor* residual = ResidualOf(post_ops_, in);
    Plan* plan = nullptr;
    RETURN_IF_ERROR(FindPlan(*x, *w, Input(in, 2) != nullptr, residual, &plan));
    if (plan == nullptr) return Fallback(in, out);  // oneDNN rejected this shape
    last_ = plan->pd.impl_info_str();
    return Guarded("Conv", [&]() -> Status {
      RETURN_IF_ERROR(PrepareWeights(plan, *w));
      ASSIGN_OR_RETURN(float* dst, AllocateWithDesc(&out[0], plan->out_shape, plan->dst_desc));
      dnnl::stream& stream = ThreadStream();
      dnnl::memory src = Wrap(plan->src_desc, x->data.get());
      dnnl::memory tensor_dst = Wrap(plan->dst_desc, dst);
      if (plan->src_reorder) {
        plan->src_reorder.execute(stream, src, plan->primitive_src);
        src = plan->primitive_src;
      }
      dnnl::memory target = plan->dst_reorder ? plan->primitive_dst : tensor_dst;
      if (plan->post_ops.add_as_sum) {
        // The sum post-op adds onto what the destination holds: put the residual there.
        if (plan->residual_reorder) {
          dnnl::memory residual_memory = Wrap(plan->post_ops.residual_desc, residual->data.get());
          plan->residual_reorder.execute(stream, residual_memory, target);
        } else {
          std::memcpy(target.get_data_handle(), residual->data.get(), plan->pd.dst_desc().get_size());
        }
      }
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, plan->weights}, {DNNL_ARG_DST, target}};
      if (const Tensor* b = Input(in, 2)) args.emplace(DNNL_ARG_BIAS, Wrap(plan->bias_desc, b->data.get()));
      AddResidualArgument(plan->post_ops, residual, &args);
      plan->primitive.execute(stream, args);
      if (plan->dst_reorder) plan->dst_reorder.execute(stream, plan->primitive_dst, tensor_dst);
      stream.wait();
      return Status::Ok();
    });
  }

 private:
  struct Plan {
    bool usable = false;
    Shape out_shape;
    // The tensors' own layouts (plain or blocked, as the layout pass decided).
    dnnl::memory::desc src_desc, dst_desc, bias_desc, plain_weights_desc;
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::convolution_forward primitive;
    FusedPostOps post_ops;
    // Set where the primitive's layout differs from the tensor's: reorders and the plan's buffers.
    dnnl::reorder src_reorder, dst_reorder, residual_reorder;
    dnnl::memory primitive_src, primitive_dst;
    // Weights reordered into the primitive's layout, for the weights buffer they came from (held,
    // so its address cannot be reused by another tensor while we compare against it).
    std::shared_ptr<const uint8_t> weights_source;
    dnnl::memory weights;
  };

  Status Fallback(Inputs in, Outputs out) {
    return layouts_.any() ? RunViaPlain(*fallback_, layouts_, in, out) : fallback_->Run(in, out);
  }

  Status FindPlan(const Tensor& x, const Tensor& w, bool has_bias, const Tensor* residual, Plan** plan) {
    auto key = std::make_tuple(x.shape, w.shape, ShapeOrEmpty(residual));
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      Plan created;
      Status status = Guarded("Conv", [&] { return CreatePlan(x.shape, w.shape, has_bias, residual, &created); });
      if (!status.ok() && status.code() != StatusCode::kInternal) return status;
      it = plans_.emplace(key, std::move(created)).first;
    }
    *plan = it->second.usable ? &it->second : nullptr;
    return Status::Ok();
  }

  Status CreatePlan(const Shape& x_shape, const Shape& w_shape, bool has_bias, const Tensor* residual, Plan* plan) {
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
    plan->src_desc = LayoutDesc(x_shape, layouts_.input(0));
    plan->dst_desc = LayoutDesc(plan->out_shape, layouts_.output(0));
    dnnl::memory::dims weight_dims = ToDims(w_shape);
    if (group_ > 1) {
      weight_dims[0] = filters / group_;
      weight_dims.insert(weight_dims.begin(), group_);
    }
    plan->plain_weights_desc = PlainDesc(weight_dims);
    dnnl::memory::desc any_weights(weight_dims, dnnl::memory::data_type::f32, tag::any);
    plan->bias_desc = PlainDesc({filters});
    auto make_desc = [&](const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
      return has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                        dnnl::algorithm::convolution_direct, src, any_weights,
                                                        plan->bias_desc, dst, strides, dilations, pad_l, pad_r)
                      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                        dnnl::algorithm::convolution_direct, src, any_weights, dst,
                                                        strides, dilations, pad_l, pad_r);
    };
    const bool residual_blocked = residual != nullptr && layouts_.input(layouts_.inputs.size() - 1);
    if (!BuildPostOps(post_ops_, plan->out_shape, residual, &plan->post_ops, /*prefer_sum=*/true, residual_blocked)) {
      return Status::Ok();  // not usable
    }
    // Let oneDNN pick the activation layout; keep the tensors' layouts if its pick is a reference kernel.
    dnnl::memory::desc src_any(ToDims(x_shape), dnnl::memory::data_type::f32, tag::any);
    dnnl::memory::desc dst_any(ToDims(plan->out_shape), dnnl::memory::data_type::f32, tag::any);
    plan->pd = dnnl::convolution_forward::primitive_desc(make_desc(src_any, dst_any), plan->post_ops.attr, Engine());
    if (std::string(plan->pd.impl_info_str()).rfind("ref", 0) == 0) {
      plan->pd = dnnl::convolution_forward::primitive_desc(make_desc(plan->src_desc, plan->dst_desc),
                                                           plan->post_ops.attr, Engine());
    }
    if (plan->pd.src_desc() != plan->src_desc) {
      plan->primitive_src = dnnl::memory(plan->pd.src_desc(), Engine());
      plan->src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), plan->src_desc, Engine(), plan->pd.src_desc()));
    }
    if (plan->pd.dst_desc() != plan->dst_desc) {
      plan->primitive_dst = dnnl::memory(plan->pd.dst_desc(), Engine());
      plan->dst_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), plan->pd.dst_desc(), Engine(), plan->dst_desc));
    }
    if (plan->post_ops.add_as_sum && plan->post_ops.residual_desc != plan->pd.dst_desc()) {
      plan->residual_reorder = dnnl::reorder(
          dnnl::reorder::primitive_desc(Engine(), plan->post_ops.residual_desc, Engine(), plan->pd.dst_desc()));
    }
    plan->primitive = dnnl::convolution_forward(plan->pd);
    plan->usable = true;
    return Status::Ok();
  }

  Status PrepareWeights(Plan* plan, const Tensor& w) {
    if (SameBuffer(plan->weights_source, w.data)) return Status::Ok();
    dnnl::memory plain = Wrap(plan->plain_weights_desc, w.data.get());
    if (plan->pd.weights_desc() == plan->plain_weights_desc) {
      plan->weights = plain;
    } else {
      plan->weights = dnnl::memory(plan->pd.weights_desc(), Engine());
      dnnl::reorder(plain, plan->weights).execute(ThreadStream(), plain, plan->weights);
    }
    plan->weights_source = w.data;
    return Status::Ok();
  }

  WindowAttributes window_;
  int64_t group_;
  std::vector<PostOp> post_ops_;
  Layouts layouts_;
  std::unique_ptr<Kernel> fallback_;
  std::map<std::tuple<Shape, Shape, Shape>, Plan> plans_;
  std::string last_;  // empty: the fallback ran
};

// ---- MatMul and Gemm (both oneDNN matmul) ----

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
};

class DnnlMatMul final : public Kernel {
 public:
  DnnlMatMul(std::vector<PostOp> post_ops, std::unique_ptr<Kernel> fallback)
      : post_ops_(std::move(post_ops)), fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const Tensor* a = Input(in, 0);
    const Tensor* b = Input(in, 1);
    if (a == nullptr || b == nullptr || a->dtype != DataType::kFp32 || b->dtype != DataType::kFp32 ||
        a->shape.size() < 2 || b->shape.size() < 2) {
      return fallback_->Run(in, out);
    }
    const Tensor* residual = ResidualOf(post_ops_, in);
    auto key = std::make_tuple(a->shape, b->shape, ShapeOrEmpty(residual));
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      MatmulPlan plan;
      Status status = Guarded("MatMul", [&] { return CreatePlan(a->shape, b->shape, residual, &plan); });
      if (!status.ok() && status.code() != StatusCode::kInternal) return status;
      it = plans_.emplace(key, std::move(plan)).first;
    }
    MatmulPlan& plan = it->second;
    if (!plan.usable) return fallback_->Run(in, out);
    last_ = plan.implementation;
    return Guarded("MatMul", [&]() -> Status {
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, plan.out_shape));
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, Wrap(plan.a_desc, a->data.get())},
                                                 {DNNL_ARG_WEIGHTS, Wrap(plan.b_desc, b->data.get())},
                                                 {DNNL_ARG_DST, Wrap(plan.dst_desc, dst)}};
      AddResidualArgument(plan.post_ops, residual, &args);
      plan.primitive.execute(ThreadStream(), args);
      ThreadStream().wait();
      if (plan.post_ops_after) return ApplyPostOps(post_ops_, residual, &out[0]);
      return Status::Ok();
    });
  }

 private:
  Status CreatePlan(const Shape& a_shape, const Shape& b_shape, const Tensor* residual, MatmulPlan* plan) {
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
    plan->a_desc = PlainDesc(ToDims(a));
    plan->b_desc = PlainDesc(ToDims(b));
    plan->dst_desc = PlainDesc(ToDims(out));
    if (!BuildPostOps(post_ops_, plan->out_shape, residual, &plan->post_ops)) return Status::Ok();  // not usable
    dnnl::matmul::desc desc(plan->a_desc, plan->b_desc, plan->dst_desc);
    dnnl::matmul::primitive_desc pd(desc, plan->post_ops.attr, Engine());
    if (!post_ops_.empty() && std::string(pd.impl_info_str()).rfind("ref", 0) == 0) {
      plan->post_ops = FusedPostOps();
      plan->post_ops_after = true;
      pd = dnnl::matmul::primitive_desc(desc, Engine());
    }
    plan->implementation = pd.impl_info_str();
    plan->primitive = dnnl::matmul(pd);
    plan->usable = true;
    return Status::Ok();
  }

  std::vector<PostOp> post_ops_;
  std::unique_ptr<Kernel> fallback_;
  std::map<std::tuple<Shape, Shape, Shape>, MatmulPlan> plans_;
  std::string last_;
};

// Gemm: Y = alpha * A' * B' + beta * C. oneDNN runs it when beta is 0 or 1 (C as the bias).
class DnnlGemm final : public Kernel {
 public:
  DnnlGemm(float alpha, float beta, bool trans_a, bool trans_b, std::vector<PostOp> post_ops,
           std::unique_ptr<Kernel> fallback)
      : alpha_(alpha), beta_(beta), trans_a_(trans_a), trans_b_(trans_b), post_ops_(std::move(post_ops)),
        fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const Tensor* a = Input(in, 0);
    const Tensor* b = Input(in, 1);
    const Tensor* c = beta_ != 0 ? Input(in, 2) : nullptr;
    if (a == nullptr || b == nullptr || a->dtype != DataType::kFp32 || b->dtype != DataType::kFp32 ||
        a->shape.size() != 2 || b->shape.size() != 2 || (c != nullptr && (beta_ != 1 || c->dtype != DataType::kFp32))) {
      return fallback_->Run(in, out);
    }
    const Tensor* residual = ResidualOf(post_ops_, in);
    auto key = std::make_tuple(a->shape, b->shape, c != nullptr, ShapeOrEmpty(c), ShapeOrEmpty(residual));
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      MatmulPlan plan;
      Status status = Guarded("Gemm", [&] { return CreatePlan(a->shape, b->shape, c, residual, &plan); });
      if (!status.ok() && status.code() != StatusCode::kInternal) return status;
      it = plans_.emplace(key, std::move(plan)).first;
    }
    MatmulPlan& plan = it->second;
    if (!plan.usable) return fallback_->Run(in, out);
    last_ = plan.implementation;
    return Guarded("Gemm", [&]() -> Status {
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, plan.out_shape));
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, Wrap(plan.a_desc, a->data.get())},
                                                 {DNNL_ARG_WEIGHTS, Wrap(plan.b_desc, b->data.get())},
                                                 {DNNL_ARG_DST, Wrap(plan.dst_desc, dst)}};
      if (c != nullptr) args.emplace(DNNL_ARG_BIAS, Wrap(plan.bias_desc, c->data.get()));
      AddResidualArgument(plan.post_ops, residual, &args);
      plan.primitive.execute(ThreadStream(), args);
      ThreadStream().wait();
      return Status::Ok();
    });
  }

 private:
  Status CreatePlan(const Shape& a_shape, const Shape& b_shape, const Tensor* c, const Tensor* residual,
                    MatmulPlan* plan) {
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
    dnnl::primitive_attr& attr = plan->post_ops.attr;
    if (alpha_ != 1) attr.set_output_scales(0, {alpha_});
    if (c != nullptr) {
      // C broadcasts onto (M, N) from its trailing dims: [], [N], [1, N], [M, 1], [M, N]...
      Shape padded = c->shape;
      if (padded.size() > 2) return Status::InvalidArgument("Gemm: C has rank above 2");
      padded.insert(padded.begin(), 2 - padded.size(), 1);
      if ((padded[0] != 1 && padded[0] != m) || (padded[1] != 1 && padded[1] != n)) {
        return Status::InvalidArgument("Gemm: C does not broadcast to (M, N)");
      }
      plan->bias_desc = PlainDesc(ToDims(padded));
      // oneDNN adds the bias after the output scale; alpha must then be 1 for Y = alpha*AB + C.
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
    return Status::Ok();
  }

  float alpha_, beta_;
  bool trans_a_, trans_b_;
  std::vector<PostOp> post_ops_;
  std::unique_ptr<Kernel> fallback_;
  std::map<std::tuple<Shape, Shape, bool, Shape, Shape>, MatmulPlan> plans_;
  std::string last_;
};


}  // namespace

void RegisterDnnlKernels(KernelRegistry* r) {
  KernelFactory conv_reference = FactoryBefore(*r, "Conv");
  r->Register("Conv", 1, [conv_reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, conv_reference(node, opset));
    ASSIGN_OR_RETURN(WindowAttributes window, ReadWindow(node));
    ASSIGN_OR_RETURN(int64_t group, node.Int("group", 1));
    ASSIGN_OR_RETURN(std::vector<PostOp> post_ops, ReadPostOps(node));
    ASSIGN_OR_RETURN(Layouts layouts, ReadLayouts(node));
    return std::unique_ptr<Kernel>(std::make_unique<DnnlConv>(std::move(window), group, std::move(post_ops),
                                                              std::move(layouts), std::move(fallback)));
  });
  KernelFactory matmul_reference = FactoryBefore(*r, "MatMul");
  r->Register("MatMul", 1, [matmul_reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, matmul_reference(node, opset));
    ASSIGN_OR_RETURN(std::vector<PostOp> post_ops, ReadPostOps(node));
    return std::unique_ptr<Kernel>(std::make_unique<DnnlMatMul>(std::move(post_ops), std::move(fallback)));
  });
  KernelFactory gemm_reference = FactoryBefore(*r, "Gemm");
  r->Register("Gemm", 6, [gemm_reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, gemm_reference(node, opset));
    ASSIGN_OR_RETURN(float alpha, node.Float("alpha", 1.0f));
    ASSIGN_OR_RETURN(float beta, node.Float("beta", 1.0f));
    ASSIGN_OR_RETURN(int64_t trans_a, node.Int("transA", 0));
    ASSIGN_OR_RETURN(int64_t trans_b, node.Int("transB", 0));
    ASSIGN_OR_RETURN(std::vector<PostOp> post_ops, ReadPostOps(node));
    return std::unique_ptr<Kernel>(std::make_unique<DnnlGemm>(alpha, beta, trans_a != 0, trans_b != 0,
                                                              std::move(post_ops), std::move(fallback)));
  });
}

}  // namespace inferd::runtime
