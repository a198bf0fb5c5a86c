// Normalizations on oneDNN (FP32, inference: one output each):
// - LayerNormalization: the normalized dims are viewed as one, [rows, size] with size the product
//   of the dims from `axis` on, which is what oneDNN normalizes over. Scale and bias must then hold
//   `size` values; other broadcasts, the training outputs (Mean, InvStdDev) and other types take
//   the reference kernel.
// - BatchNormalization with the running statistics (what the optimizer could not fold into a Conv).
// - LRN across channels.
#include <algorithm>
#include <map>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using namespace dnnl_kernels;
using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

class DnnlLayerNorm final : public Kernel {
 public:
  DnnlLayerNorm(int64_t axis, float epsilon, std::unique_ptr<Kernel> fallback)
      : axis_(axis), epsilon_(epsilon), fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { primitives_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const Tensor* x = InputAt(in, 0);
    const Tensor* scale = InputAt(in, 1);
    const Tensor* bias = InputAt(in, 2);
    if (x == nullptr || scale == nullptr || out.size() != 1 || x->dtype != DataType::kFp32 ||
        scale->dtype != DataType::kFp32 || (bias != nullptr && bias->dtype != DataType::kFp32) || x->shape.empty()) {
      return fallback_->Run(in, out);
    }
    const int64_t rank = static_cast<int64_t>(x->shape.size());
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    if (axis < 0 || axis >= rank) return fallback_->Run(in, out);
    int64_t rows = 1, size = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? rows : size) *= x->shape[d];
    if (rows == 0 || size == 0 || ElementsOf(*scale) != size || (bias != nullptr && ElementsOf(*bias) != size)) {
      return fallback_->Run(in, out);
    }
    return Guarded("LayerNormalization", [&]() -> Status {
      const dnnl::memory::desc data = PlainDesc({rows, size});
      const dnnl::memory::desc channel = PlainDesc({size});
      const bool has_bias = bias != nullptr;
      auto key = std::make_tuple(rows, size, has_bias);
      auto& primitive = FindOrCreate(primitives_, key, [&] {
        dnnl::normalization_flags flags = dnnl::normalization_flags::use_scale;
        if (has_bias) flags |= dnnl::normalization_flags::use_shift;
        return dnnl::layer_normalization_forward::primitive_desc(
            dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, data, epsilon_, flags), OwnScratchpad(), Engine());
      });
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x->shape));
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, Wrap(data, x->data.get())},
                                                 {DNNL_ARG_DST, Wrap(data, dst)},
                                                 {DNNL_ARG_SCALE, Wrap(channel, scale->data.get())}};
      if (has_bias) args.emplace(DNNL_ARG_SHIFT, Wrap(channel, bias->data.get()));
      RunPrimitive(primitive.first, std::move(args));
      ThreadStream().wait();
      last_ = primitive.second;
      return Status::Ok();
    });
  }

 private:
  int64_t axis_;
  float epsilon_;
  std::unique_ptr<Kernel> fallback_;
  PrimitiveMap<dnnl::layer_normalization_forward, std::tuple<int64_t, int64_t, bool>> primitives_;
  std::string last_;
};

// BatchNormalization: y = scale * (x - mean) / sqrt(var + epsilon) + B, per channel (dim 1).
class DnnlBatchNorm final : public Kernel {
 public:
  DnnlBatchNorm(float epsilon, std::unique_ptr<Kernel> fallback) : epsilon_(epsilon), fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { primitives_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    if (in.size() < 5 || out.size() != 1 || std::any_of(in.begin(), in.begin() + 5, [](const Tensor* t) {
          return t == nullptr || t->dtype != DataType::kFp32;
        })) {
      return fallback_->Run(in, out);
    }
    const Tensor& x = *in[0];
    if (x.shape.size() < 2 || x.shape.size() > 5 || ElementsOf(x) == 0) return fallback_->Run(in, out);
    const int64_t channels = x.shape[1];
    for (size_t i = 1; i < 5; ++i) {
      if (ElementsOf(*in[i]) != channels) return fallback_->Run(in, out);
    }
    return Guarded("BatchNormalization", [&]() -> Status {
      const dnnl::memory::desc data = PlainDesc(ToDims(x.shape));
      const dnnl::memory::desc channel = PlainDesc({channels});
      auto& primitive = FindOrCreate(primitives_, x.shape, [&] {
        const auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                           dnnl::normalization_flags::use_shift;
        return dnnl::batch_normalization_forward::primitive_desc(
            dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, data, epsilon_, flags), OwnScratchpad(), Engine());
      });
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x.shape));
      RunPrimitive(primitive.first, {{DNNL_ARG_SRC, Wrap(data, x.data.get())},
                                                {DNNL_ARG_DST, Wrap(data, dst)},
                                                {DNNL_ARG_SCALE, Wrap(channel, in[1]->data.get())},
                                                {DNNL_ARG_SHIFT, Wrap(channel, in[2]->data.get())},
                                                {DNNL_ARG_MEAN, Wrap(channel, in[3]->data.get())},
                                                {DNNL_ARG_VARIANCE, Wrap(channel, in[4]->data.get())}});
      ThreadStream().wait();
      last_ = primitive.second;
      return Status::Ok();
    });
  }

 private:
  float epsilon_;
  std::unique_ptr<Kernel> fallback_;
  PrimitiveMap<dnnl::batch_normalization_forward, Shape> primitives_;
  std::string last_;
};

// LRN: y = x / (bias + alpha / size * sum of x^2 over `size` neighbouring channels)^beta.
class DnnlLrn final : public Kernel {
 public:
  DnnlLrn(int64_t size, float alpha, float beta, float bias, std::unique_ptr<Kernel> fallback)
      : size_(size), alpha_(alpha), beta_(beta), bias_(bias), fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { primitives_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const Tensor* x = InputAt(in, 0);
    if (x == nullptr || x->dtype != DataType::kFp32 || x->shape.size() < 3 || x->shape.size() > 5 ||
        ElementsOf(*x) == 0) {
      return fallback_->Run(in, out);
    }
    return Guarded("LRN", [&]() -> Status {
      const dnnl::memory::desc data = PlainDesc(ToDims(x->shape));
      auto& primitive = FindOrCreate(primitives_, x->shape, [&] {
        return dnnl::lrn_forward::primitive_desc(
            dnnl::lrn_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::lrn_across_channels, data,
                                    size_, alpha_, beta_, bias_),
            OwnScratchpad(), Engine());
      });
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x->shape));
      RunPrimitive(primitive.first, {{DNNL_ARG_SRC, Wrap(data, x->data.get())}, {DNNL_ARG_DST, Wrap(data, dst)}});
      ThreadStream().wait();
      last_ = primitive.second;
      return Status::Ok();
    });
  }

 private:
  int64_t size_;
  float alpha_, beta_, bias_;
  std::unique_ptr<Kernel> fallback_;
  PrimitiveMap<dnnl::lrn_forward, Shape> primitives_;
  std::string last_;
};

}  // namespace

void RegisterDnnlNormKernels(KernelRegistry* r) {
  if (KernelFactory reference = FactoryBefore(*r, "BatchNormalization")) {
    r->Register("BatchNormalization", 6, [reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
      ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, reference(node, opset));
      ASSIGN_OR_RETURN(float epsilon, node.Float("epsilon", 1e-5f));
      ASSIGN_OR_RETURN(int64_t training, node.Int("training_mode", 0));
      if (training != 0) return fallback;  // batch statistics and running-statistics outputs
      return std::unique_ptr<Kernel>(std::make_unique<DnnlBatchNorm>(epsilon, std::move(fallback)));
    });
  }
  if (KernelFactory reference = FactoryBefore(*r, "LRN")) {
    r->Register("LRN", 1, [reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
      ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, reference(node, opset));
      ASSIGN_OR_RETURN(float alpha, node.Float("alpha", 1e-4f));
      ASSIGN_OR_RETURN(float beta, node.Float("beta", 0.75f));
      ASSIGN_OR_RETURN(float bias, node.Float("bias", 1.0f));
      ASSIGN_OR_RETURN(int64_t size, node.Int("size", 0));
      return std::unique_ptr<Kernel>(std::make_unique<DnnlLrn>(size, alpha, beta, bias, std::move(fallback)));
    });
  }
  for (const char* op : {"LayerNormalization", "inferd.LayerNormalization"}) {
    KernelFactory reference = FactoryBefore(*r, op);
    if (!reference) continue;
    r->Register(op, std::string_view(op) == "LayerNormalization" ? 17 : 1,
                [reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
                  ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, reference(node, opset));
                  ASSIGN_OR_RETURN(int64_t axis, node.Int("axis", -1));
                  ASSIGN_OR_RETURN(float epsilon, node.Float("epsilon", 1e-5f));
                  ASSIGN_OR_RETURN(int64_t stash_type, node.Int("stash_type", 1));
                  if (stash_type != 1) return fallback;  // statistics in another type than FP32
                  return std::unique_ptr<Kernel>(std::make_unique<DnnlLayerNorm>(axis, epsilon, std::move(fallback)));
                });
  }
}

}  // namespace inferd::runtime
