// oneDNN pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool on FP32, plain or blocked
// (layout propagation keeps a pooled value blocked between convolutions). What oneDNN cannot
// express runs on the reference kernel: MaxPool's Indices output, dilated windows, and ceil-mode
// windows that average over padding the model did not ask for.
//
// Global pools of 4-D tensors have a second candidate, our own SIMD kernel (simd/global_pool.h);
// the first run of a shape times both (tuning.h) and keeps the faster.
#include <map>
#include <optional>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/dnnl/dnnl_layout.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/simd/global_pool.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/kernels/window.h"
#include "runtime/tuning.h"

namespace inferd::runtime {
namespace {

using namespace dnnl_kernels;
using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

enum class PoolKind { kMax, kAverage, kGlobalMax, kGlobalAverage };

class DnnlPool final : public Kernel {
 public:
  DnnlPool(PoolKind kind, WindowAttributes window, bool count_include_pad, Layouts layouts,
           std::unique_ptr<Kernel> fallback)
      : kind_(kind), window_(std::move(window)), count_include_pad_(count_include_pad), layouts_(std::move(layouts)),
        fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { plans_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    if (in.empty() || in[0] == nullptr || in[0]->dtype != DataType::kFp32 || out.size() != 1 ||
        in[0]->shape.size() < 3 || in[0]->shape.size() > 5 || ElementsOf(*in[0]) == 0) {
      return Fallback(in, out);
    }
    const Tensor& x = *in[0];
    ASSIGN_OR_RETURN(Plan* found, FindOrCreatePlan(plans_, x.shape, "pooling", [&](Plan* created) {
      return CreatePlan(x.shape, created);
    }));
    Plan& plan = *found;
    if (!plan.usable) return Fallback(in, out);
    return Guarded("pooling", [&]() -> Status {
      ASSIGN_OR_RETURN(float* dst, AllocateWithDesc(&out[0], plan.out_shape, plan.dst_desc));
      if (!plan.chosen) {
        plan.chosen = plan.own ? ChooseFastest(plan.tuning_key, 2, kOneDnn, [&](int candidate) {
          Execute(plan, candidate, ValuesOf<float>(x), dst);
          return Status::Ok();
        }) : kOneDnn;
        if (*plan.chosen == kOwn) plan.primitive = {};
      }
      Execute(plan, *plan.chosen, ValuesOf<float>(x), dst);
      last_ = *plan.chosen == kOwn ? "simd:global_pool:" + simd::DispatchedTargetName() : "onednn:" + plan.implementation;
      return Status::Ok();
    });
  }

 private:
  // The candidates: oneDNN's primitive, or (a global pool of a 4-D tensor) ours.
  static constexpr int kOwn = 0, kOneDnn = 1;
  struct Plan {
    bool usable = false;
    Shape out_shape;
    dnnl::memory::desc src_desc, dst_desc;
    dnnl::pooling_forward primitive;  // released once ours is chosen
    std::string implementation;
    std::optional<simd::GlobalPoolShape> own;  // our kernel applies
    std::string tuning_key;
    std::optional<int> chosen;  // kOwn or kOneDnn, after the first run
  };

  Status Fallback(Inputs in, Outputs out) { return RunFallback(*fallback_, layouts_, in, out); }

  void Execute(Plan& plan, int candidate, const float* x, float* dst) {
    if (candidate == kOwn) {
      const auto reduction = kind_ == PoolKind::kGlobalMax ? simd::PoolReduction::kMax : simd::PoolReduction::kMean;
      simd::GlobalPool(reduction, *plan.own, x, dst);
      return;
    }
    RunPrimitive(plan.primitive, {{DNNL_ARG_SRC, Wrap(plan.src_desc, x)},
                                  {DNNL_ARG_DST, Wrap(plan.dst_desc, dst)}});
    ThreadStream().wait();
  }

  Status CreatePlan(const Shape& x_shape, Plan* plan) {
    const bool global = kind_ == PoolKind::kGlobalMax || kind_ == PoolKind::kGlobalAverage;
    const Shape in_spatial(x_shape.begin() + 2, x_shape.end());
    WindowAttributes w = window_;
    if (global) w.kernel = in_spatial;
    std::vector<int64_t> out_spatial;
    RETURN_IF_ERROR(ResolveWindow(&w, in_spatial, &out_spatial));
    dnnl::memory::dims strides(w.strides.begin(), w.strides.end()), kernel(w.kernel.begin(), w.kernel.end());
    dnnl::memory::dims pad_l, pad_r;
    for (size_t d = 0; d < in_spatial.size(); ++d) {
      if (w.dilations[d] != 1) return Status::Ok();  // not usable
      pad_l.push_back(w.pads[d]);
      // Ceil mode can need more right padding than the model gave; oneDNN pads implicitly.
      const int64_t right = (out_spatial[d] - 1) * w.strides[d] + w.kernel[d] - in_spatial[d] - w.pads[d];
      // Averages that count padding would count that implicit padding too, unlike ONNX.
      if (count_include_pad_ && right > w.pads[d + in_spatial.size()]) return Status::Ok();
      pad_r.push_back(right);
    }
    plan->out_shape = {x_shape[0], x_shape[1]};
    plan->out_shape.insert(plan->out_shape.end(), out_spatial.begin(), out_spatial.end());
    const bool blocked = layouts_.input(0);
    if (blocked != layouts_.output(0) || (blocked && x_shape.size() != 4)) return Status::Ok();
    plan->src_desc = layouts_.Desc(x_shape, blocked);
    plan->dst_desc = layouts_.Desc(plan->out_shape, blocked);
    dnnl::algorithm algorithm = dnnl::algorithm::pooling_max;
    if (kind_ == PoolKind::kAverage || kind_ == PoolKind::kGlobalAverage) {
      algorithm = count_include_pad_ ? dnnl::algorithm::pooling_avg_include_padding
                                     : dnnl::algorithm::pooling_avg_exclude_padding;
    }
    dnnl::pooling_forward::primitive_desc pd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, algorithm, plan->src_desc, plan->dst_desc,
                                    strides, kernel, pad_l, pad_r),
        OwnScratchpad(), Engine());
    plan->implementation = pd.impl_info_str();
    plan->primitive = dnnl::pooling_forward(pd);
    if (global && x_shape.size() == 4 && !layouts_.channels_last) {  // our loop reads nChw{block}c or plain
      plan->own = simd::GlobalPoolShape{.batch = x_shape[0], .channels = x_shape[1],
                                        .pixels = x_shape[2] * x_shape[3], .block = blocked ? ChannelBlock() : 1};
      plan->tuning_key = std::string(kind_ == PoolKind::kGlobalMax ? "GlobalMaxPool" : "GlobalAveragePool") +
                         " x=" + ShapeToString(x_shape) +
                         (blocked ? " blocked" + std::to_string(ChannelBlock()) : std::string(" plain")) + " +simd";
    }
    plan->usable = true;
    return Status::Ok();
  }

  PoolKind kind_;
  WindowAttributes window_;
  bool count_include_pad_;
  Layouts layouts_;
  std::unique_ptr<Kernel> fallback_;
  ShapePlans<Shape, Plan> plans_;
  std::string last_;
};

void RegisterPool(KernelRegistry* r, const char* op, PoolKind kind) {
  KernelFactory reference = FactoryBefore(*r, op);
  r->Register(op, 1, [kind, reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, reference(node, opset));
    WindowAttributes window;
    int64_t count_include_pad = 0;
    if (kind == PoolKind::kMax || kind == PoolKind::kAverage) {
      ASSIGN_OR_RETURN(window, ReadWindow(node));
      ASSIGN_OR_RETURN(count_include_pad, node.Int("count_include_pad", 0));
    }
    ASSIGN_OR_RETURN(Layouts layouts, ReadLayouts(node));
    return std::unique_ptr<Kernel>(std::make_unique<DnnlPool>(kind, std::move(window), count_include_pad != 0,
                                                              std::move(layouts), std::move(fallback)));
  });
}

}  // namespace

void RegisterDnnlPoolKernels(KernelRegistry* r) {
  RegisterPool(r, "MaxPool", PoolKind::kMax);
  RegisterPool(r, "AveragePool", PoolKind::kAverage);
  RegisterPool(r, "GlobalMaxPool", PoolKind::kGlobalMax);
  RegisterPool(r, "GlobalAveragePool", PoolKind::kGlobalAverage);
}

}  // namespace inferd::runtime
