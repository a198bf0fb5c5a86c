// oneDNN inferd.Attention (kernels/attention.h): a few heads at a time, scores = scale * Q K as a
// batched matmul straight from the operands' strided buffers (the absorbed transposes cost no
// copy), the mask added, softmax in place, then scores x V written strided into the output. The
// chunk's scores stay in cache between the three steps, where the unfused graph wrote all heads'
// scores to memory and read them back twice.
#include <algorithm>
#include <map>

#include "runtime/kernels/attention.h"
#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using namespace dnnl_kernels;
using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;
using dims = dnnl::memory::dims;

// The scores of one chunk of heads: small enough for a core's L2 and a bounded scratch buffer at
// any batch size. Measured at batch 1 and 8 of a 12-head encoder: no slower than all heads at once.
constexpr int64_t kChunkScoresBytes = 256 * 1024;

// The three primitives for a chunk of `heads` heads.
struct ChunkPrimitives {
  dnnl::memory::desc q, k, scores, v, result;
  dnnl::matmul scores_matmul, context_matmul;
  dnnl::softmax_forward softmax;
  std::string implementation;
};

struct AttentionPlan {
  bool usable = false;
  int64_t heads_per_chunk = 0;
  std::map<int64_t, ChunkPrimitives> chunks;  // by heads in the chunk (full, and the remainder)
  std::vector<float> scores;                  // one chunk's scores
};

// A view's stride along batch dim `dim`, or a dense stride where the dim has size 1 (oneDNN wants
// a real stride even there).
int64_t BatchStride(const StridedView& view, size_t dim, int64_t size) {
  if (size > 1) return view.strides[dim];
  const size_t rank = view.shape.size();
  return view.shape[rank - 2] * view.shape[rank - 1];
}

class DnnlAttention final : public Kernel {
 public:
  DnnlAttention(AttentionAttributes attributes, std::unique_ptr<Kernel> fallback)
      : attributes_(std::move(attributes)), fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { plans_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    ASSIGN_OR_RETURN(AttentionGeometry g, ResolveAttention(attributes_, in));
    const Tensor* mask = InputAt(in, 3);
    auto key = std::make_tuple(in[0]->shape, in[1]->shape, in[2]->shape, mask ? mask->shape : Shape{});
    ASSIGN_OR_RETURN(AttentionPlan* found, FindOrCreatePlan(plans_, key, "Attention", [&](AttentionPlan* created) {
      return CreatePlan(g, created);
    }));
    AttentionPlan& plan = *found;
    if (!plan.usable) return fallback_->Run(in, out);
    return Guarded("Attention", [&]() -> Status {
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, g.output_shape));
      Execute(g, in, dst, plan);
      last_ = plan.chunks.begin()->second.implementation;
      return Status::Ok();
    });
  }

 private:
  // The batch dims but the last one are walked one by one; the last (the heads, as exporters lay
  // them out) is cut into chunks.
  static int64_t Heads(const AttentionGeometry& g) { return g.batch.empty() ? 1 : g.batch.back(); }

  Status CreatePlan(const AttentionGeometry& g, AttentionPlan* plan) const {
    // oneDNN cannot read a broadcast (stride 0) batch dim of Q, K or V: the reference kernel does.
    for (size_t i = 0; i < g.batch.size(); ++i) {
      if (g.batch[i] > 1 && (g.q.strides[i] == 0 || g.k.strides[i] == 0 || g.v.strides[i] == 0)) return Status::Ok();
    }
    const int64_t heads = Heads(g);
    plan->heads_per_chunk = std::clamp<int64_t>(kChunkScoresBytes / std::max<int64_t>(1, g.s * g.t * 4), 1, heads);
    for (int64_t size : {plan->heads_per_chunk, heads % plan->heads_per_chunk}) {
      if (size == 0 || plan->chunks.count(size) != 0) continue;
      ChunkPrimitives chunk = MakeChunk(g, size);
      if (chunk.implementation.find("ref") != std::string::npos) return Status::Ok();
      plan->chunks.emplace(size, std::move(chunk));
    }
    plan->scores.resize(static_cast<size_t>(plan->heads_per_chunk * g.s * g.t));
    plan->usable = true;
    return Status::Ok();
  }

  ChunkPrimitives MakeChunk(const AttentionGeometry& g, int64_t heads) const {
    const auto f32 = dnnl::memory::data_type::f32;
    const size_t nb = g.batch.size(), last = nb == 0 ? 0 : nb - 1;
    const int64_t size = Heads(g);
    auto matrix_desc = [&](const StridedView& view, int64_t rows, int64_t cols) {
      const int64_t batch_stride = nb == 0 ? rows * cols : BatchStride(view, last, size);
      return dnnl::memory::desc({heads, rows, cols}, f32, dims{batch_stride, view.strides[nb], view.strides[nb + 1]});
    };
    ChunkPrimitives chunk;
    chunk.q = matrix_desc(g.q, g.s, g.d);
    chunk.k = matrix_desc(g.k, g.d, g.t);
    chunk.v = matrix_desc(g.v, g.t, g.dv);
    chunk.result = matrix_desc(g.result, g.s, g.dv);
    chunk.scores = dnnl::memory::desc({heads, g.s, g.t}, f32, dnnl::memory::format_tag::abc);
    dnnl::primitive_attr scaled = OwnScratchpad();
    scaled.set_output_scales(0, {attributes_.scale});
    const dnnl::matmul::primitive_desc scores_pd(dnnl::matmul::desc(chunk.q, chunk.k, chunk.scores), scaled, Engine());
    const dnnl::matmul::primitive_desc context_pd(dnnl::matmul::desc(chunk.scores, chunk.v, chunk.result), OwnScratchpad(), Engine());
    const dnnl::softmax_forward::primitive_desc softmax_pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, PlainDesc({heads * g.s, g.t}), 1), OwnScratchpad(), Engine());
    chunk.scores_matmul = dnnl::matmul(scores_pd);
    chunk.context_matmul = dnnl::matmul(context_pd);
    chunk.softmax = dnnl::softmax_forward(softmax_pd);
    chunk.implementation = std::string("attention(") + scores_pd.impl_info_str() + ", " + softmax_pd.impl_info_str() +
                           ", " + context_pd.impl_info_str() + "; " + std::to_string(heads) + " heads at a time)";
    return chunk;
  }

  void Execute(const AttentionGeometry& g, Inputs in, float* dst, AttentionPlan& plan) const {
    const size_t nb = g.batch.size();
    const Shape outer = nb == 0 ? Shape{} : Shape(g.batch.begin(), g.batch.end() - 1);
    const StridedView none{0, std::vector<int64_t>(nb + 2, 0), {}};
    const StridedView& mask_view = g.mask ? *g.mask : none;
    auto outer_strides = [&](const StridedView& view) {
      return std::vector<int64_t>(view.strides.begin(), view.strides.begin() + static_cast<int64_t>(outer.size()));
    };
    auto head_stride = [&](const StridedView& view) { return nb == 0 ? 0 : view.strides[nb - 1]; };
    const auto* q = ValuesOf<float>(*in[0]);
    const auto* k = ValuesOf<float>(*in[1]);
    const auto* v = ValuesOf<float>(*in[2]);
    const float* mask = g.mask ? ValuesOf<float>(*in[3]) : nullptr;
    const int64_t heads = Heads(g);
    auto one_outer = [&](const std::array<int64_t, 5>& at) {
      for (int64_t first = 0; first < heads; first += plan.heads_per_chunk) {
        const int64_t count = std::min(plan.heads_per_chunk, heads - first);
        ChunkPrimitives& chunk = plan.chunks.at(count);
        float* scores = plan.scores.data();
        RunPrimitive(chunk.scores_matmul, {{DNNL_ARG_SRC, Wrap(chunk.q, q + g.q.offset + at[0] + first * head_stride(g.q))},
                             {DNNL_ARG_WEIGHTS, Wrap(chunk.k, k + g.k.offset + at[1] + first * head_stride(g.k))},
                             {DNNL_ARG_DST, Wrap(chunk.scores, scores)}});
        ThreadStream().wait();
        if (mask != nullptr) {
          AddMask(mask + at[3] + first * head_stride(mask_view), mask_view, count, head_stride(mask_view), g, scores);
        }
        const dnnl::memory rows = Wrap(PlainDesc({count * g.s, g.t}), scores);
        RunPrimitive(chunk.softmax, {{DNNL_ARG_SRC, rows}, {DNNL_ARG_DST, rows}});
        RunPrimitive(chunk.context_matmul, {{DNNL_ARG_SRC, Wrap(chunk.scores, scores)},
                             {DNNL_ARG_WEIGHTS, Wrap(chunk.v, v + g.v.offset + at[2] + first * head_stride(g.v))},
                             {DNNL_ARG_DST, Wrap(chunk.result, dst + g.result.offset + at[4] + first * head_stride(g.result))}});
        ThreadStream().wait();
      }
    };
    ForEachIndex<5>(outer,
                    {outer_strides(g.q), outer_strides(g.k), outer_strides(g.v), outer_strides(mask_view),
                     outer_strides(g.result)},
                    one_outer);
  }

  static void AddMask(const float* mask, const StridedView& view, int64_t heads, int64_t head_stride,
                      const AttentionGeometry& g, float* scores) {
    const size_t nb = g.batch.size();
    const int64_t row_stride = view.strides[nb], column_stride = view.strides[nb + 1];
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < g.s; ++i) {
        const float* row = mask + h * head_stride + i * row_stride;
        float* out = scores + (h * g.s + i) * g.t;
        if (column_stride == 1) {
          for (int64_t j = 0; j < g.t; ++j) out[j] += row[j];
        } else {
          for (int64_t j = 0; j < g.t; ++j) out[j] += row[j * column_stride];
        }
      }
    }
  }

  AttentionAttributes attributes_;
  std::unique_ptr<Kernel> fallback_;
  ShapePlans<std::tuple<Shape, Shape, Shape, Shape>, AttentionPlan> plans_;
  std::string last_;
};

}  // namespace

void RegisterDnnlAttentionKernels(KernelRegistry* r) {
  KernelFactory reference = FactoryBefore(*r, "inferd.Attention");
  r->Register("inferd.Attention", 1, [reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, reference(node, opset));
    ASSIGN_OR_RETURN(AttentionAttributes attributes, ReadAttentionAttributes(node));
    return std::unique_ptr<Kernel>(std::make_unique<DnnlAttention>(std::move(attributes), std::move(fallback)));
  });
}

}  // namespace inferd::runtime
