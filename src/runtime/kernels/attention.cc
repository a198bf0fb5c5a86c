// inferd.Attention: its geometry, shared with the oneDNN kernel, and the reference kernel.
#include "runtime/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

// `shape` read through `perm` (none: as it is).
StatusOr<StridedView> OperandView(const Shape& shape, const std::vector<int64_t>& perm) {
  if (!perm.empty()) return TransposeView(shape, perm);
  return StridedView{0, ContiguousStrides(shape), shape};
}

// Gives a rank >= 2 view's batch dims the broadcast `batch` shape: leading dims added and dims of
// size 1 read with stride 0. False when it does not broadcast to it.
bool BroadcastBatch(const Shape& batch, StridedView* view) {
  const size_t own = view->shape.size() - 2;
  if (own > batch.size()) return false;
  StridedView out;
  out.offset = view->offset;
  for (size_t i = 0; i < batch.size(); ++i) {
    const bool present = i >= batch.size() - own;
    const int64_t size = present ? view->shape[i - (batch.size() - own)] : 1;
    if (size != batch[i] && size != 1) return false;
    out.shape.push_back(batch[i]);
    out.strides.push_back(present && size != 1 ? view->strides[i - (batch.size() - own)] : 0);
  }
  for (size_t i = own; i < view->shape.size(); ++i) {
    out.shape.push_back(view->shape[i]);
    out.strides.push_back(view->strides[i]);
  }
  *view = std::move(out);
  return true;
}

Shape BatchOf(const StridedView& view) { return Shape(view.shape.begin(), view.shape.end() - 2); }

StatusOr<std::unique_ptr<Kernel>> MakeAttention(const Node& node, int) {
  ASSIGN_OR_RETURN(AttentionAttributes attributes, ReadAttentionAttributes(node));
  return MakeKernel([attributes](Inputs in, Outputs out) -> Status {
    ASSIGN_OR_RETURN(AttentionGeometry g, ResolveAttention(attributes, in));
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, g.output_shape));
    const float* q = ValuesOf<float>(*in[0]);
    const float* k = ValuesOf<float>(*in[1]);
    const float* v = ValuesOf<float>(*in[2]);
    const float* mask = g.mask ? ValuesOf<float>(*in[3]) : nullptr;
    const size_t nb = g.batch.size();
    auto batch_strides = [nb](const StridedView& view) {
      return std::vector<int64_t>(view.strides.begin(), view.strides.begin() + static_cast<int64_t>(nb));
    };
    const StridedView no_mask{0, std::vector<int64_t>(nb + 2, 0), {}};
    const StridedView& m = g.mask ? *g.mask : no_mask;
    std::vector<double> scores(static_cast<size_t>(g.t));
    auto one_batch = [&](const std::array<int64_t, 5>& at) {
      for (int64_t i = 0; i < g.s; ++i) {
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < g.t; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < g.d; ++c) {
            dot += static_cast<double>(q[g.q.offset + at[0] + i * g.q.strides[nb] + c * g.q.strides[nb + 1]]) *
                   k[g.k.offset + at[1] + c * g.k.strides[nb] + j * g.k.strides[nb + 1]];
          }
          double score = attributes.scale * dot;
          if (mask != nullptr) score += mask[m.offset + at[3] + i * m.strides[nb] + j * m.strides[nb + 1]];
          scores[static_cast<size_t>(j)] = score;
          max = std::max(max, score);
        }
        double sum = 0;
        for (double& score : scores) sum += score = std::exp(score - max);
        for (int64_t e = 0; e < g.dv; ++e) {
          double value = 0;
          for (int64_t j = 0; j < g.t; ++j) {
            value += scores[static_cast<size_t>(j)] * v[g.v.offset + at[2] + j * g.v.strides[nb] + e * g.v.strides[nb + 1]];
          }
          dst[g.result.offset + at[4] + i * g.result.strides[nb] + e * g.result.strides[nb + 1]] =
              static_cast<float>(value / sum);
        }
      }
    };
    ForEachIndex<5>(g.batch, {batch_strides(g.q), batch_strides(g.k), batch_strides(g.v), batch_strides(m),
                              batch_strides(g.result)},
                    one_batch);
    return Status::Ok();
  });
}

}  // namespace

StatusOr<AttentionAttributes> ReadAttentionAttributes(const Node& node) {
  AttentionAttributes a;
  ASSIGN_OR_RETURN(a.scale, node.Float("scale", 1.0f));
  ASSIGN_OR_RETURN(a.q_perm, node.Ints("q_perm"));
  ASSIGN_OR_RETURN(a.k_perm, node.Ints("k_perm"));
  ASSIGN_OR_RETURN(a.v_perm, node.Ints("v_perm"));
  ASSIGN_OR_RETURN(a.out_perm, node.Ints("out_perm"));
  if (node.inputs.size() < 3 || node.outputs.size() != 1) {
    return Status::InvalidArgument(node.Describe() + ": takes Q, K, V and an optional mask, and has one output");
  }
  return a;
}

StatusOr<AttentionGeometry> ResolveAttention(const AttentionAttributes& a, Inputs in) {
  RETURN_IF_ERROR(RequireInputs(in, 3, "Attention"));
  const Tensor* mask = InputAt(in, 3);
  for (const Tensor* t : {in[0], in[1], in[2], mask}) {
    if (t != nullptr && t->dtype != DataType::kFp32) return Status::InvalidArgument("Attention: inputs must be FP32");
  }
  AttentionGeometry g;
  ASSIGN_OR_RETURN(g.q, OperandView(in[0]->shape, a.q_perm));
  ASSIGN_OR_RETURN(g.k, OperandView(in[1]->shape, a.k_perm));
  ASSIGN_OR_RETURN(g.v, OperandView(in[2]->shape, a.v_perm));
  if (g.q.shape.size() < 2 || g.k.shape.size() < 2 || g.v.shape.size() < 2) {
    return Status::InvalidArgument("Attention: Q, K and V need rank 2 or more");
  }
  g.s = g.q.shape.end()[-2];
  g.d = g.q.shape.back();
  g.t = g.k.shape.back();
  g.dv = g.v.shape.back();
  if (g.k.shape.end()[-2] != g.d || g.v.shape.end()[-2] != g.t) {
    return Status::InvalidArgument("Attention: Q " + ShapeToString(g.q.shape) + ", K " + ShapeToString(g.k.shape) +
                                   " and V " + ShapeToString(g.v.shape) + " do not chain");
  }
  // The mask as [batch..., rows, columns]: its rows and columns must be 1 or the scores' (an Add
  // that grew the scores would not be attention); its batch dims join the broadcast.
  Shape mask_shape = mask != nullptr ? mask->shape : Shape{};
  if (mask != nullptr) {
    mask_shape.insert(mask_shape.begin(), static_cast<size_t>(std::max<int64_t>(0, 2 - static_cast<int64_t>(mask_shape.size()))), 1);
    const int64_t rows = mask_shape.end()[-2], columns = mask_shape.back();
    if ((rows != 1 && rows != g.s) || (columns != 1 && columns != g.t)) {
      return Status::InvalidArgument("Attention: mask " + ShapeToString(mask->shape) + " does not fit scores of " +
                                     std::to_string(g.s) + " x " + std::to_string(g.t));
    }
  }
  ASSIGN_OR_RETURN(Shape qk, BroadcastShapes(BatchOf(g.q), BatchOf(g.k)));
  ASSIGN_OR_RETURN(g.batch, BroadcastShapes(qk, BatchOf(g.v)));
  if (mask != nullptr) {
    ASSIGN_OR_RETURN(g.batch, BroadcastShapes(g.batch, Shape(mask_shape.begin(), mask_shape.end() - 2)));
  }
  if (!BroadcastBatch(g.batch, &g.q) || !BroadcastBatch(g.batch, &g.k) || !BroadcastBatch(g.batch, &g.v)) {
    return Status::Internal("Attention: batch broadcast");
  }
  Shape scores_shape = g.batch;
  scores_shape.push_back(g.s);
  scores_shape.push_back(g.t);
  if (mask != nullptr) g.mask = StridedView{0, BroadcastStrides(mask_shape, scores_shape), scores_shape};
  Shape result_shape = g.batch;
  result_shape.push_back(g.s);
  result_shape.push_back(g.dv);
  if (a.out_perm.empty()) {
    g.output_shape = result_shape;
    g.result = StridedView{0, ContiguousStrides(result_shape), result_shape};
  } else {
    // The output is Transpose(result, out_perm): result dim out_perm[i] is output dim i.
    ASSIGN_OR_RETURN(StridedView transposed, TransposeView(result_shape, a.out_perm));
    g.output_shape = transposed.shape;
    const std::vector<int64_t> output_strides = ContiguousStrides(g.output_shape);
    g.result = StridedView{0, std::vector<int64_t>(result_shape.size()), result_shape};
    for (size_t i = 0; i < a.out_perm.size(); ++i) g.result.strides[static_cast<size_t>(a.out_perm[i])] = output_strides[i];
  }
  return g;
}

void RegisterAttentionKernels(KernelRegistry* r) { r->Register("inferd.Attention", 1, MakeAttention); }

}  // namespace inferd::runtime
