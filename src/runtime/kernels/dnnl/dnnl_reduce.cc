// Reductions on oneDNN's reduction primitive (FP32): ReduceSum, ReduceMean, ReduceMax, ReduceMin,
// ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare. The destination is the source with 1 on the
// reduced dims, which is the output's memory with or without keepdims. LogSum/LogSumExp, other
// types, empty tensors and noop_with_empty_axes take the reference kernel.
#include <map>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using namespace dnnl_kernels;
using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

struct ReduceOpInfo {
  const char* op;
  dnnl::algorithm algorithm;
  float p;  // for the norms
};

constexpr ReduceOpInfo kReductions[] = {
    {"ReduceSum", dnnl::algorithm::reduction_sum, 0},
    {"ReduceMean", dnnl::algorithm::reduction_mean, 0},
    {"ReduceMax", dnnl::algorithm::reduction_max, 0},
    {"ReduceMin", dnnl::algorithm::reduction_min, 0},
    {"ReduceProd", dnnl::algorithm::reduction_mul, 0},
    {"ReduceL1", dnnl::algorithm::reduction_norm_lp_sum, 1},
    {"ReduceL2", dnnl::algorithm::reduction_norm_lp_sum, 2},
    {"ReduceSumSquare", dnnl::algorithm::reduction_norm_lp_power_p_sum, 2},
};

class DnnlReduce final : public Kernel {
 public:
  DnnlReduce(ReduceOpInfo op, std::vector<int64_t> axes, bool keepdims, bool noop_with_empty_axes, bool axes_input,
             std::unique_ptr<Kernel> fallback)
      : op_(op), axes_(std::move(axes)), keepdims_(keepdims), noop_with_empty_axes_(noop_with_empty_axes),
        axes_input_(axes_input), fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { primitives_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const Tensor* x = InputAt(in, 0);
    if (x == nullptr || x->dtype != DataType::kFp32 || x->shape.empty() || x->shape.size() > 6 || ElementsOf(*x) == 0) {
      return fallback_->Run(in, out);
    }
    std::vector<int64_t> axes = axes_;
    if (axes_input_ && InputAt(in, 1) != nullptr) {
      auto read = ReadInts(*in[1], "axes");
      if (!read.ok()) return fallback_->Run(in, out);
      axes = *read;
    }
    if (axes.empty() && noop_with_empty_axes_) return fallback_->Run(in, out);
    const int64_t rank = static_cast<int64_t>(x->shape.size());
    Shape reduced_dims = x->shape, out_shape;
    std::vector<bool> reduced(x->shape.size(), axes.empty());
    for (int64_t axis : axes) {
      auto a = NormalizeAxis(axis, rank, "reduction");
      if (!a.ok()) return fallback_->Run(in, out);
      reduced[*a] = true;
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (reduced[d]) reduced_dims[d] = 1;
      if (!reduced[d] || keepdims_) out_shape.push_back(reduced[d] ? 1 : x->shape[d]);
    }
    if (reduced_dims == x->shape) return fallback_->Run(in, out);  // nothing to reduce: a copy
    return Guarded("reduction", [&]() -> Status {
      const dnnl::memory::desc src = PlainDesc(ToDims(x->shape));
      const dnnl::memory::desc dst = PlainDesc(ToDims(reduced_dims));
      auto key = std::make_pair(x->shape, reduced_dims);
      auto& primitive = FindOrCreate(primitives_, key, [&] {
        return dnnl::reduction::primitive_desc(dnnl::reduction::desc(op_.algorithm, src, dst, op_.p, 0.0f), OwnScratchpad(), Engine());
      });
      ASSIGN_OR_RETURN(float* result, AllocateOutputAs<float>(&out[0], DataType::kFp32, out_shape));
      RunPrimitive(primitive.first, {{DNNL_ARG_SRC, Wrap(src, x->data.get())}, {DNNL_ARG_DST, Wrap(dst, result)}});
      ThreadStream().wait();
      last_ = primitive.second;
      return Status::Ok();
    });
  }

 private:
  ReduceOpInfo op_;
  std::vector<int64_t> axes_;
  bool keepdims_, noop_with_empty_axes_, axes_input_;
  std::unique_ptr<Kernel> fallback_;
  PrimitiveMap<dnnl::reduction, std::pair<Shape, Shape>> primitives_;
  std::string last_;
};

}  // namespace

void RegisterDnnlReduceKernels(KernelRegistry* r) {
  for (const ReduceOpInfo& op : kReductions) {
    KernelFactory reference = FactoryBefore(*r, op.op);
    if (!reference) continue;
    r->Register(op.op, 1, [op, reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
      ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, reference(node, opset));
      ASSIGN_OR_RETURN(int64_t keepdims, node.Int("keepdims", 1));
      ASSIGN_OR_RETURN(std::vector<int64_t> axes, node.Ints("axes"));
      ASSIGN_OR_RETURN(int64_t noop, node.Int("noop_with_empty_axes", 0));
      // ReduceSum takes axes as an input from opset 13 (the others from 18, beyond our range).
      const bool axes_input = std::string_view(op.op) == "ReduceSum" && opset >= 13;
      return std::unique_ptr<Kernel>(
          std::make_unique<DnnlReduce>(op, std::move(axes), keepdims != 0, noop != 0, axes_input, std::move(fallback)));
    });
  }
}

}  // namespace inferd::runtime
