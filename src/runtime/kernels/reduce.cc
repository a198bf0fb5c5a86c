// Reductions (ReduceSum, ReduceMean, ... and ArgMax/ArgMin). Accumulate in double; reference
// implementations, also used where oneDNN has no primitive.
#include <cmath>
#include <limits>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

struct Reduction {
  Shape out_shape;                  // with keepdims applied
  std::vector<int64_t> out_strides; // per input dim, 0 on reduced dims
  int64_t reduced_count = 1;
};

StatusOr<Reduction> PlanReduction(const Shape& shape, std::vector<int64_t> axes, bool keepdims, bool reduce_all) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(shape.size(), reduce_all);
  for (int64_t axis : axes) {
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axis, rank, "reduction"));
    reduced[a] = true;
  }
  Reduction plan;
  Shape kept_shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      plan.reduced_count *= shape[d];
      if (keepdims) plan.out_shape.push_back(1);
    } else {
      plan.out_shape.push_back(shape[d]);
      kept_shape.push_back(shape[d]);
    }
  }
  std::vector<int64_t> kept_strides = ContiguousStrides(kept_shape);
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) plan.out_strides.push_back(reduced[d] ? 0 : kept_strides[next++]);
  return plan;
}

double Initial(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return -std::numeric_limits<double>::infinity();
    case ReduceOp::kMin: return std::numeric_limits<double>::infinity();
    case ReduceOp::kProd: return 1;
    default: return 0;
  }
}

double Accumulate(ReduceOp op, double acc, double x) {
  switch (op) {
    case ReduceOp::kMax: return std::isnan(x) || x > acc ? x : acc;
    case ReduceOp::kMin: return std::isnan(x) || x < acc ? x : acc;
    case ReduceOp::kProd: return acc * x;
    case ReduceOp::kL1: return acc + std::abs(x);
    case ReduceOp::kL2:
    case ReduceOp::kSumSquare: return acc + x * x;
    case ReduceOp::kLogSumExp: return acc + std::exp(x);
    default: return acc + x;
  }
}

double Finish(ReduceOp op, double acc, int64_t count) {
  switch (op) {
    case ReduceOp::kMean: return acc / static_cast<double>(count);
    case ReduceOp::kL2: return std::sqrt(acc);
    case ReduceOp::kLogSum:
    case ReduceOp::kLogSumExp: return std::log(acc);
    default: return acc;
  }
}

StatusOr<std::unique_ptr<Kernel>> MakeReduce(const Node& node, int opset, ReduceOp op) {
  ASSIGN_OR_RETURN(int64_t keepdims, node.Int("keepdims", 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> attribute_axes, node.Ints("axes"));
  ASSIGN_OR_RETURN(int64_t noop_with_empty_axes, node.Int("noop_with_empty_axes", 0));
  // ReduceSum takes axes as an input from opset 13 (the others from 18, beyond our range).
  const bool axes_input = op == ReduceOp::kSum && opset >= 13;
  return MakeKernel([=](Inputs in, Outputs out) -> Status {
    if (in.empty() || in[0] == nullptr) return Status::InvalidArgument("reduction needs an input");
    const Tensor& x = *in[0];
    std::vector<int64_t> axes = attribute_axes;
    if (axes_input && in.size() > 1 && in[1] != nullptr) {
      ASSIGN_OR_RETURN(axes, ReadInts(*in[1], "axes"));
    }
    if (axes.empty() && noop_with_empty_axes) {
      out[0] = x;
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(Reduction plan, PlanReduction(x.shape, axes, keepdims != 0, axes.empty()));
    return DispatchNumeric(x.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], x.dtype, plan.out_shape));
      std::vector<double> acc(static_cast<size_t>(ElementsOf(out[0])), Initial(op));
      const T* src = ValuesOf<T>(x);
      int64_t i = 0;
      ForEachIndex<1>(x.shape, std::array<std::vector<int64_t>, 1>{plan.out_strides},
                      [&](const std::array<int64_t, 1>& at) {
                        acc[at[0]] = Accumulate(op, acc[at[0]], static_cast<double>(src[i++]));
                      });
      for (size_t k = 0; k < acc.size(); ++k) {
        double value = Finish(op, acc[k], plan.reduced_count);
        if constexpr (std::is_integral_v<T>) {
          if (std::isinf(value)) value = value > 0 ? static_cast<double>(std::numeric_limits<T>::max())
                                                   : static_cast<double>(std::numeric_limits<T>::lowest());
        }
        dst[k] = static_cast<T>(value);
      }
      return Status::Ok();
    });
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeArgExtreme(const Node& node, bool is_max) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", 0));
  ASSIGN_OR_RETURN(int64_t keepdims, node.Int("keepdims", 1));
  ASSIGN_OR_RETURN(int64_t select_last, node.Int("select_last_index", 0));
  return MakeKernel([=](Inputs in, Outputs out) -> Status {
    if (in.empty() || in[0] == nullptr) return Status::InvalidArgument("ArgMax/ArgMin needs an input");
    const Tensor& x = *in[0];
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "ArgMax/ArgMin"));
    Shape shape;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (d < axis) outer *= x.shape[d];
      if (d > axis) inner *= x.shape[d];
      if (d != axis) shape.push_back(x.shape[d]);
      else if (keepdims) shape.push_back(1);
    }
    const int64_t dim = x.shape[axis];
    ASSIGN_OR_RETURN(int64_t * dst, AllocateOutputAs<int64_t>(&out[0], DataType::kInt64, shape));
    return DispatchNumeric(x.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* src = ValuesOf<T>(x);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          int64_t best = 0;
          T best_value = src[o * dim * inner + i];
          for (int64_t k = 1; k < dim; ++k) {
            T v = src[(o * dim + k) * inner + i];
            bool better = is_max ? (v > best_value || (select_last && v == best_value))
                                 : (v < best_value || (select_last && v == best_value));
            if (better) {
              best = k;
              best_value = v;
            }
          }
          dst[o * inner + i] = best;
        }
      }
      return Status::Ok();
    });
  });
}

KernelFactory Reduce(ReduceOp op) {
  return [op](const Node& node, int opset) { return MakeReduce(node, opset, op); };
}

}  // namespace

void RegisterReduceKernels(KernelRegistry* r) {
  r->Register("ReduceSum", 1, Reduce(ReduceOp::kSum));
  r->Register("ReduceMean", 1, Reduce(ReduceOp::kMean));
  r->Register("ReduceMax", 1, Reduce(ReduceOp::kMax));
  r->Register("ReduceMin", 1, Reduce(ReduceOp::kMin));
  r->Register("ReduceProd", 1, Reduce(ReduceOp::kProd));
  r->Register("ReduceL1", 1, Reduce(ReduceOp::kL1));
  r->Register("ReduceL2", 1, Reduce(ReduceOp::kL2));
  r->Register("ReduceLogSum", 1, Reduce(ReduceOp::kLogSum));
  r->Register("ReduceLogSumExp", 1, Reduce(ReduceOp::kLogSumExp));
  r->Register("ReduceSumSquare", 1, Reduce(ReduceOp::kSumSquare));
  r->Register("ArgMax", 1, [](const Node& n, int) { return MakeArgExtreme(n, true); });
  r->Register("ArgMin", 1, [](const Node& n, int) { return MakeArgExtreme(n, false); });
}

}  // namespace inferd::runtime
