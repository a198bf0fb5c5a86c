// oneDNN kernels for element-wise activations and softmax: JIT-vectorized where the reference
// kernels compute one scalar at a time. FP32 only; other types use the reference kernels.
#include <map>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/dnnl/dnnl_layout.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using namespace dnnl_kernels;
using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;


class DnnlUnary final : public Kernel {
 public:
  DnnlUnary(dnnl::algorithm algorithm, float alpha, float beta, Layouts layouts, std::unique_ptr<Kernel> fallback)
      : algorithm_(algorithm), alpha_(alpha), beta_(beta), layouts_(std::move(layouts)), fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { primitives_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const bool blocked = layouts_.input(0);
    if (in.empty() || in[0] == nullptr || in[0]->dtype != DataType::kFp32 || blocked != layouts_.output(0) ||
        (blocked && in[0]->shape.size() != 4)) {
      return RunFallback(*fallback_, layouts_, in, out);
    }
    const Tensor& x = *in[0];
    // Element-wise ops ignore the shape: one flat primitive per element count. A blocked tensor is
    // computed whole, padding included (oneDNN has no fast path for padded blocked eltwise), and
    // its padding zeroed again after.
    const int64_t n = blocked ? static_cast<int64_t>(x.byte_size / sizeof(float)) : ElementsOf(x);
    if (n == 0) return fallback_->Run(in, out);
    return Guarded("eltwise", [&]() -> Status {
      auto& primitive = FindOrCreate(primitives_, n, [&] {
        return dnnl::eltwise_forward::primitive_desc(
            dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, algorithm_, PlainDesc({n}), alpha_, beta_),
            OwnScratchpad(), Engine());
      });
      float* dst = nullptr;
      if (blocked) {
        ASSIGN_OR_RETURN(dst, AllocateWithDesc(&out[0], x.shape, BlockedDesc(x.shape, layouts_.channels_last)));
      } else {
        ASSIGN_OR_RETURN(dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x.shape));
      }
      dnnl::memory::desc desc = PlainDesc({n});
      RunPrimitive(primitive.first, {{DNNL_ARG_SRC, Wrap(desc, x.data.get())}, {DNNL_ARG_DST, Wrap(desc, dst)}});
      ThreadStream().wait();
      if (blocked) ZeroChannelPadding(dst, x.shape, layouts_.channels_last);
      last_ = primitive.second;
      return Status::Ok();
    });
  }

 private:
  dnnl::algorithm algorithm_;
  float alpha_, beta_;
  Layouts layouts_;
  std::unique_ptr<Kernel> fallback_;
  PrimitiveMap<dnnl::eltwise_forward, int64_t> primitives_;
  std::string last_;
};

// Softmax / LogSoftmax. Before opset 13 the input is coerced to 2-D at `axis`; from 13 it is one axis.
class DnnlSoftmax final : public Kernel {
 public:
  DnnlSoftmax(bool log, bool coerce, int64_t axis, std::unique_ptr<Kernel> fallback)
      : log_(log), coerce_(coerce), axis_(axis), fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { primitives_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    if (in.empty() || in[0] == nullptr || in[0]->dtype != DataType::kFp32 || in[0]->shape.empty() ||
        ElementsOf(*in[0]) == 0) {
      return fallback_->Run(in, out);
    }
    const Tensor& x = *in[0];
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, rank, "Softmax"));
    Shape view = x.shape;
    int view_axis = static_cast<int>(axis);
    if (coerce_) {
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x.shape[d];
      view = {outer, inner};
      view_axis = 1;
    }
    return Guarded("Softmax", [&]() -> Status {
      auto key = std::make_pair(view, view_axis);
      auto* entry = primitives_.Find(key);
      if (entry == nullptr) {
        dnnl::memory::desc desc = PlainDesc(ToDims(view));
        dnnl::primitive primitive;
        std::string name;
        if (log_) {
          dnnl::logsoftmax_forward::primitive_desc pd(
              dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_inference, desc, view_axis), OwnScratchpad(), Engine());
          primitive = dnnl::logsoftmax_forward(pd);
          name = pd.impl_info_str();
        } else {
          dnnl::softmax_forward::primitive_desc pd(
              dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, desc, view_axis), OwnScratchpad(), Engine());
          primitive = dnnl::softmax_forward(pd);
          name = pd.impl_info_str();
        }
        entry = &primitives_.Add(key, std::make_pair(primitive, name));
      }
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x.shape));
      dnnl::memory::desc desc = PlainDesc(ToDims(view));
      RunPrimitive(entry->first, {{DNNL_ARG_SRC, Wrap(desc, x.data.get())}, {DNNL_ARG_DST, Wrap(desc, dst)}});
      ThreadStream().wait();
      last_ = entry->second;
      return Status::Ok();
    });
  }

 private:
  bool log_, coerce_;
  int64_t axis_;
  std::unique_ptr<Kernel> fallback_;
  PrimitiveMap<dnnl::primitive, std::pair<Shape, int>> primitives_;
  std::string last_;
};

struct UnaryOp {
  const char* op;
  dnnl::algorithm algorithm;
  const char* alpha_attribute;  // nullptr: alpha is `alpha`
  float alpha, beta;
};

const UnaryOp kUnaryOps[] = {
    {"Relu", dnnl::algorithm::eltwise_relu, nullptr, 0, 0},
    {"LeakyRelu", dnnl::algorithm::eltwise_relu, "alpha", 0.01f, 0},
    {"Sigmoid", dnnl::algorithm::eltwise_logistic, nullptr, 0, 0},
    {"Tanh", dnnl::algorithm::eltwise_tanh, nullptr, 0, 0},
    {"Exp", dnnl::algorithm::eltwise_exp, nullptr, 0, 0},
    {"Log", dnnl::algorithm::eltwise_log, nullptr, 0, 0},
    {"Sqrt", dnnl::algorithm::eltwise_sqrt, nullptr, 0, 0},
    {"Abs", dnnl::algorithm::eltwise_abs, nullptr, 0, 0},
    {"Elu", dnnl::algorithm::eltwise_elu, "alpha", 1.0f, 0},
    {"HardSwish", dnnl::algorithm::eltwise_hardswish, nullptr, 0, 0},
    {"Softplus", dnnl::algorithm::eltwise_soft_relu, nullptr, 0, 0},
    {"Neg", dnnl::algorithm::eltwise_linear, nullptr, -1.0f, 0},
    {"Reciprocal", dnnl::algorithm::eltwise_pow, nullptr, 1.0f, -1.0f},
    {"inferd.Swish", dnnl::algorithm::eltwise_swish, nullptr, 1.0f, 0},
    {"inferd.Gelu", dnnl::algorithm::eltwise_gelu_erf, nullptr, 0, 0},
};


}  // namespace

void RegisterDnnlEltwiseKernels(KernelRegistry* r) {
  for (const UnaryOp& unary : kUnaryOps) {
    KernelFactory reference = FactoryBefore(*r, unary.op);
    if (!reference) continue;
    int since = 1;
    if (std::string_view(unary.op) == "HardSwish") since = 14;
    r->Register(unary.op, since, [unary, reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
      ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, reference(node, opset));
      float alpha = unary.alpha;
      if (unary.alpha_attribute != nullptr) {
        ASSIGN_OR_RETURN(alpha, node.Float(unary.alpha_attribute, unary.alpha));
      }
      ASSIGN_OR_RETURN(Layouts layouts, ReadLayouts(node));
      return std::unique_ptr<Kernel>(
          std::make_unique<DnnlUnary>(unary.algorithm, alpha, unary.beta, std::move(layouts), std::move(fallback)));
    });
  }
  for (bool log : {false, true}) {
    const char* op = log ? "LogSoftmax" : "Softmax";
    KernelFactory reference = FactoryBefore(*r, op);
    r->Register(op, 1, [log, reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
      ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, reference(node, opset));
      const bool coerce = opset < 13;
      ASSIGN_OR_RETURN(int64_t axis, node.Int("axis", coerce ? 1 : -1));
      return std::unique_ptr<Kernel>(std::make_unique<DnnlSoftmax>(log, coerce, axis, std::move(fallback)));
    });
  }
}

}  // namespace inferd::runtime
