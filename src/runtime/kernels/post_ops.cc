#include "runtime/kernels/post_ops.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

struct Named {
  const char* name;
  PostOp::Kind kind;
};
constexpr Named kNames[] = {{"Add", PostOp::Kind::kAdd},         {"Relu", PostOp::Kind::kRelu},
                            {"LeakyRelu", PostOp::Kind::kLeakyRelu}, {"Clip", PostOp::Kind::kClip},
                            {"Sigmoid", PostOp::Kind::kSigmoid}, {"Tanh", PostOp::Kind::kTanh},
                            {"HardSwish", PostOp::Kind::kHardSwish}, {"Elu", PostOp::Kind::kElu},
                            {"Swish", PostOp::Kind::kSwish},     {"HardSigmoid", PostOp::Kind::kHardSigmoid}, {"Gelu", PostOp::Kind::kGelu}};

float Activate(const PostOp& op, float x) {
  switch (op.kind) {
    case PostOp::Kind::kRelu: return x > 0 ? x : 0;
    case PostOp::Kind::kLeakyRelu: return x >= 0 ? x : op.alpha * x;
    case PostOp::Kind::kClip: return std::min(std::max(x, op.alpha), op.beta);
    case PostOp::Kind::kSigmoid: return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
    case PostOp::Kind::kTanh: return std::tanh(x);
    case PostOp::Kind::kHardSwish: return x * std::min(std::max(x / 6.0f + 0.5f, 0.0f), 1.0f);
    case PostOp::Kind::kElu: return x >= 0 ? x : static_cast<float>(op.alpha * (std::exp(static_cast<double>(x)) - 1));
    case PostOp::Kind::kSwish: return static_cast<float>(x / (1.0 + std::exp(-static_cast<double>(x))));
    case PostOp::Kind::kHardSigmoid: return std::min(std::max(op.alpha * x + op.beta, 0.0f), 1.0f);
    case PostOp::Kind::kGelu: return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
    case PostOp::Kind::kAdd: return x;
  }
  return x;
}

// out + residual with numpy broadcasting, into a fresh tensor.
Status AddResidual(const Tensor& residual, Tensor* out) {
  if (residual.dtype != DataType::kFp32) return Status::InvalidArgument("fused Add: the residual must be FP32");
  ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(out->shape, residual.shape));
  Tensor sum;
  ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&sum, DataType::kFp32, shape));
  const float* a = ValuesOf<float>(*out);
  const float* b = ValuesOf<float>(residual);
  int64_t i = 0;
  ForEachIndex<2>(shape, std::array<std::vector<int64_t>, 2>{BroadcastStrides(out->shape, shape), BroadcastStrides(residual.shape, shape)},
                  [&](const std::array<int64_t, 2>& at) { dst[i++] = a[at[0]] + b[at[1]]; });
  *out = std::move(sum);
  return Status::Ok();
}

}  // namespace

std::string PostOpName(PostOp::Kind kind) {
  for (const auto& named : kNames) {
    if (named.kind == kind) return named.name;
  }
  return "?";
}

bool HasAdd(const std::vector<PostOp>& ops) {
  return std::any_of(ops.begin(), ops.end(), [](const PostOp& op) { return op.kind == PostOp::Kind::kAdd; });
}

StatusOr<std::vector<PostOp>> ReadPostOps(const Node& node) {
  std::vector<PostOp> ops;
  const Attribute* names = node.Find("_post_ops");
  if (names == nullptr) return ops;
  ASSIGN_OR_RETURN(std::vector<float> alphas, node.Floats("_post_alpha"));
  ASSIGN_OR_RETURN(std::vector<float> betas, node.Floats("_post_beta"));
  if (alphas.size() != names->strings.size() || betas.size() != names->strings.size()) {
    return Status::InvalidArgument(node.Describe() + ": _post_ops, _post_alpha and _post_beta differ in length");
  }
  for (size_t i = 0; i < names->strings.size(); ++i) {
    auto it = std::find_if(std::begin(kNames), std::end(kNames), [&](const Named& n) { return names->strings[i] == n.name; });
    if (it == std::end(kNames)) return Status::InvalidArgument(node.Describe() + ": unknown post-op " + names->strings[i]);
    ops.push_back({it->kind, alphas[i], betas[i]});
  }
  return ops;
}

std::optional<PostOp> PostOpForActivation(const Node& node, const Tensor* clip_min, const Tensor* clip_max) {
  if (!node.domain.empty() && node.domain != "ai.onnx" && node.domain != kInferdDomain) return std::nullopt;
  const std::string& op = node.op_type;
  if (op == "Relu") return PostOp{PostOp::Kind::kRelu};
  if (op == "Sigmoid") return PostOp{PostOp::Kind::kSigmoid};
  if (op == "Tanh") return PostOp{PostOp::Kind::kTanh};
  if (op == "HardSwish") return PostOp{PostOp::Kind::kHardSwish};
  if (op == "Swish" && node.domain == kInferdDomain) return PostOp{PostOp::Kind::kSwish};
  if (op == "Gelu" && node.domain == kInferdDomain) return PostOp{PostOp::Kind::kGelu};
  if (op == "HardSigmoid") {
    auto alpha = node.Float("alpha", 0.2f);
    auto beta = node.Float("beta", 0.5f);
    if (!alpha.ok() || !beta.ok()) return std::nullopt;
    return PostOp{PostOp::Kind::kHardSigmoid, *alpha, *beta};
  }
  if (op == "LeakyRelu") {
    auto alpha = node.Float("alpha", 0.01f);
    return alpha.ok() ? std::optional<PostOp>(PostOp{PostOp::Kind::kLeakyRelu, *alpha}) : std::nullopt;
  }
  if (op == "Elu") {
    auto alpha = node.Float("alpha", 1.0f);
    return alpha.ok() ? std::optional<PostOp>(PostOp{PostOp::Kind::kElu, *alpha}) : std::nullopt;
  }
  if (op == "Clip") {
    float lo = -INFINITY, hi = INFINITY;
    if (node.Has("min") || node.Has("max")) {  // opset < 11
      auto min = node.Float("min", lo);
      auto max = node.Float("max", hi);
      if (!min.ok() || !max.ok()) return std::nullopt;
      lo = *min;
      hi = *max;
    }
    auto scalar = [](const Tensor* t, float* value) {
      if (t == nullptr) return true;
      if (t->dtype != DataType::kFp32 || ElementsOf(*t) != 1) return false;
      *value = ValuesOf<float>(*t)[0];
      return true;
    };
    if (!scalar(clip_min, &lo) || !scalar(clip_max, &hi)) return std::nullopt;
    return PostOp{PostOp::Kind::kClip, lo, hi};
  }
  return std::nullopt;
}

Status ApplyPostOps(const std::vector<PostOp>& ops, const Tensor* residual, Tensor* out) {
  for (const PostOp& op : ops) {
    if (op.kind == PostOp::Kind::kAdd) {
      if (residual == nullptr) return Status::InvalidArgument("fused Add has no residual input");
      RETURN_IF_ERROR(AddResidual(*residual, out));
      continue;
    }
    // The kernel allocated *out itself (or AddResidual did): it is ours to write.
    float* data = const_cast<float*>(ValuesOf<float>(*out));
    const int64_t n = ElementsOf(*out);
    for (int64_t i = 0; i < n; ++i) data[i] = Activate(op, data[i]);
  }
  return Status::Ok();
}

namespace {

class PostOpKernel final : public Kernel {
 public:
  PostOpKernel(std::unique_ptr<Kernel> inner, std::vector<PostOp> ops) : inner_(std::move(inner)), ops_(std::move(ops)) {}
  std::string Implementation() const override { return inner_->Implementation() + "+post-ops"; }
  Status Run(std::span<const Tensor* const> inputs, std::span<Tensor> outputs) override {
    RETURN_IF_ERROR(inner_->Run(inputs, outputs));
    const Tensor* residual = HasAdd(ops_) && !inputs.empty() ? inputs.back() : nullptr;
    return ApplyPostOps(ops_, residual, &outputs[0]);
  }

 private:
  std::unique_ptr<Kernel> inner_;
  std::vector<PostOp> ops_;
};

}  // namespace

KernelFactory WithPostOps(KernelFactory inner) {
  return [inner](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::vector<PostOp> ops, ReadPostOps(node));
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, inner(node, opset));
    if (ops.empty()) return kernel;
    return std::unique_ptr<Kernel>(std::make_unique<PostOpKernel>(std::move(kernel), std::move(ops)));
  };
}

}  // namespace inferd::runtime
