// Losses (reference kernels): NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, as ONNX's
// reference defines them: per element -input[n, target, d...] times the target's weight, then
// none / sum / mean, where mean divides by the summed weights of the elements not ignored.
#include <cmath>
#include <limits>
#include <optional>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

enum class Reduction { kNone, kSum, kMean };

struct LossAttributes {
  Reduction reduction = Reduction::kMean;
  std::optional<int64_t> ignore_index;
};

StatusOr<LossAttributes> ReadLossAttributes(const Node& node) {
  LossAttributes a;
  ASSIGN_OR_RETURN(std::string reduction, node.String("reduction", "mean"));
  if (reduction == "none") {
    a.reduction = Reduction::kNone;
  } else if (reduction == "sum") {
    a.reduction = Reduction::kSum;
  } else if (reduction != "mean") {
    return Status::InvalidArgument(node.Describe() + ": unknown reduction '" + reduction + "'");
  }
  if (node.Has("ignore_index")) {
    ASSIGN_OR_RETURN(int64_t ignore, node.Int("ignore_index", 0));
    a.ignore_index = ignore;
  }
  return a;
}

// The loss of log-probabilities `log_p` ([N, C, d...]) against `target` ([N, d...]).
template <typename T>
Status NegativeLogLikelihood(const T* log_p, const Shape& shape, const Tensor& target_tensor, const Tensor* weight_tensor,
                             const LossAttributes& a, DataType dtype, Tensor* out) {
  if (shape.size() < 2) return Status::InvalidArgument("loss: input needs N and C dims");
  const int64_t batch = shape[0], classes = shape[1];
  int64_t spatial = 1;
  for (size_t d = 2; d < shape.size(); ++d) spatial *= shape[d];
  Shape target_shape{batch};
  target_shape.insert(target_shape.end(), shape.begin() + 2, shape.end());
  if (target_tensor.shape != target_shape) {
    return Status::InvalidArgument("loss: target has shape " + ShapeToString(target_tensor.shape) + ", expected " +
                                   ShapeToString(target_shape));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> target, ReadInts(target_tensor, "loss target"));
  const T* weight = nullptr;
  if (weight_tensor != nullptr) {
    if (weight_tensor->dtype != dtype || ElementsOf(*weight_tensor) != classes) {
      return Status::InvalidArgument("loss: weight must hold one value per class, of the input's type");
    }
    weight = ValuesOf<T>(*weight_tensor);
  }
  std::vector<T> loss(target.size());
  double weight_sum = 0;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t s = 0; s < spatial; ++s) {
      const size_t at = static_cast<size_t>(n * spatial + s);
      const int64_t t = target[at];
      if (a.ignore_index && t == *a.ignore_index) {
        loss[at] = 0;
        continue;
      }
      if (t < 0 || t >= classes) return Status::InvalidArgument("loss: target " + std::to_string(t) + " is not a class");
      const T w = weight != nullptr ? weight[t] : T{1};
      loss[at] = -log_p[(n * classes + t) * spatial + s] * w;
      weight_sum += w;
    }
  }
  if (a.reduction == Reduction::kNone) {
    ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(out, dtype, target_shape));
    std::copy(loss.begin(), loss.end(), dst);
    return Status::Ok();
  }
  double total = 0;
  for (T v : loss) total += v;
  // Mean over the weights taken; 0 / 0 (everything ignored) is NaN, as in ONNX's reference.
  if (a.reduction == Reduction::kMean) total = weight_sum == 0 ? std::numeric_limits<double>::quiet_NaN() : total / weight_sum;
  ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(out, dtype, {}));
  *dst = static_cast<T>(total);
  return Status::Ok();
}

StatusOr<std::unique_ptr<Kernel>> MakeNegativeLogLikelihoodLoss(const Node& node, int) {
  ASSIGN_OR_RETURN(LossAttributes a, ReadLossAttributes(node));
  return MakeKernel([a](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "NegativeLogLikelihoodLoss"));
    return DispatchFloat(in[0]->dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      return NegativeLogLikelihood<T>(ValuesOf<T>(*in[0]), in[0]->shape, *in[1], InputAt(in, 2), a, in[0]->dtype, &out[0]);
    });
  });
}

// Log-softmax over dim 1 (classes), then the NLL loss; the log-probabilities are the optional
// second output.
StatusOr<std::unique_ptr<Kernel>> MakeSoftmaxCrossEntropyLoss(const Node& node, int) {
  ASSIGN_OR_RETURN(LossAttributes a, ReadLossAttributes(node));
  return MakeKernel([a](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "SoftmaxCrossEntropyLoss"));
    const Tensor& scores = *in[0];
    if (scores.shape.size() < 2) return Status::InvalidArgument("SoftmaxCrossEntropyLoss: scores need N and C dims");
    return DispatchFloat(scores.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const int64_t batch = scores.shape[0], classes = scores.shape[1];
      const int64_t spatial = ElementsOf(scores) / std::max<int64_t>(1, batch * classes);
      std::vector<T> log_p(static_cast<size_t>(ElementsOf(scores)));
      const T* x = ValuesOf<T>(scores);
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t s = 0; s < spatial; ++s) {
          auto at = [&](int64_t c) { return static_cast<size_t>((n * classes + c) * spatial + s); };
          double max = -std::numeric_limits<double>::infinity();
          for (int64_t c = 0; c < classes; ++c) max = std::max<double>(max, x[at(c)]);
          double sum = 0;
          for (int64_t c = 0; c < classes; ++c) sum += std::exp(x[at(c)] - max);
          const double log_sum = std::log(sum) + max;
          for (int64_t c = 0; c < classes; ++c) log_p[at(c)] = static_cast<T>(x[at(c)] - log_sum);
        }
      }
      RETURN_IF_ERROR(NegativeLogLikelihood<T>(log_p.data(), scores.shape, *in[1], InputAt(in, 2), a, scores.dtype, &out[0]));
      if (out.size() > 1) {
        ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[1], scores.dtype, scores.shape));
        std::copy(log_p.begin(), log_p.end(), dst);
      }
      return Status::Ok();
    });
  });
}

}  // namespace

void RegisterLossKernels(KernelRegistry* r) {
  r->Register("NegativeLogLikelihoodLoss", 12, MakeNegativeLogLikelihoodLoss);
  r->Register("SoftmaxCrossEntropyLoss", 12, MakeSoftmaxCrossEntropyLoss);
}

}  // namespace inferd::runtime
