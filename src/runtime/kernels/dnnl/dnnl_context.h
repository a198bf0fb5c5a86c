// The oneDNN engine and stream, and the conversion of oneDNN's exceptions into Status: no exception
// leaves a oneDNN kernel.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/shape_plans.h"

namespace inferd::runtime::dnnl_kernels {

// One CPU engine for the process (oneDNN engines are thread-safe). Its first use turns oneDNN's
// primitive cache off (dnnl_context.cc says why): every primitive belongs to the kernel that made it.
const dnnl::engine& Engine();
// A stream per thread: each model instance thread executes on its own.
dnnl::stream& ThreadStream();

// Primitives take their scratchpad from us (scratchpad_mode::user), never from oneDNN. Debian's
// oneDNN is built without DNNL_ENABLE_CONCURRENT_EXEC, where the library's scratchpad is one buffer
// per thread, sized when a primitive is made on it, and a primitive must run on the thread that
// made it. Ours are made on the loading thread (planned batch sizes, warmup), run on an instance's
// and dropped on whichever forgets them: a GEMM-based convolution wrote its im2col columns through
// the instance thread's null buffer and the server died. Every primitive desc is made with this
// attribute (FusedPostOps starts from it) and run through RunPrimitive.
dnnl::primitive_attr OwnScratchpad(dnnl::primitive_attr attr = dnnl::primitive_attr());

// Runs `primitive` on the thread's stream, lending it PrimitiveScratchpad() (run_context.h) when
// it wants a scratchpad. Throws, for Guarded to report, if the primitive was made without
// OwnScratchpad: that one would run on oneDNN's per-thread buffer.
void RunPrimitive(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory> args);

// A reorder between two layouts, made with OwnScratchpad; RunReorder runs one and waits for it
// (without `reorder`: makes one for this call and drops it).
dnnl::reorder::primitive_desc ReorderDesc(const dnnl::memory::desc& from, const dnnl::memory::desc& to);
dnnl::reorder MakeReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to);
// A reorder that also multiplies by `scale` and adds `zero_point`, rounding and saturating into an
// integer `to` (how fp32 activations become int8 for an int8 convolution: scale = 1 / the
// activation's scale; QuantizeLinear's rule).
dnnl::reorder MakeScaledReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to, float scale,
                                int32_t zero_point = 0);
void RunReorder(const dnnl::reorder& reorder, const dnnl::memory& from, const dnnl::memory& to);
void RunReorder(const dnnl::memory& from, const dnnl::memory& to);

// Plain (row-major) memory descriptor for a tensor of `dims` (fp32 unless said).
dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims,
                             dnnl::memory::data_type type = dnnl::memory::data_type::f32);
dnnl::memory::dims ToDims(const Shape& shape);

// Wraps a tensor's buffer. oneDNN takes a non-const handle but never writes through a source.
inline dnnl::memory Wrap(const dnnl::memory::desc& desc, const void* data) {
  return dnnl::memory(desc, Engine(), const_cast<void*>(data));
}

// A memory of `desc` with no buffer of its own: BindScratch gives it one for a run.
inline dnnl::memory ScratchMemory(const dnnl::memory::desc& desc) { return dnnl::memory(desc, Engine(), DNNL_MEMORY_NONE); }

// Points each non-empty memory at its own part of the kernel scratch buffer (run_context.h), valid
// until the kernel returns. Buffers a kernel needs only while it runs live there, not in the
// kernel: kept per kernel and per shape they made memory grow with every batch size seen.
void BindScratch(std::initializer_list<dnnl::memory*> memories);

// Runs fn, turning a dnnl::error (or any std::exception) into an Internal status.
template <typename Fn>
Status Guarded(const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (const dnnl::error& e) {
    return Status::Internal(std::string(what) + ": oneDNN: " + e.what());
  } catch (const std::exception& e) {
    return Status::Internal(std::string(what) + ": " + e.what());
  }
}

// Weights reordered into the layout a primitive chose, shared by the session's kernels: ONNX
// files share one initializer between layers (an exported 12-layer encoder may hold one set of
// weights), and a copy per kernel multiplied them. Only the session's constants are shared; a
// computed weight changes every run and stays with its kernel.
class PackedWeightsCache {
 public:
  void AddConstant(const std::shared_ptr<const uint8_t>& data);
  // `source` (laid out as `from`) in layout `to`, reordered on first use; nullopt when `source`
  // is not one of the constants.
  std::optional<dnnl::memory> Get(const std::shared_ptr<const uint8_t>& source, const dnnl::memory::desc& from,
                                  const dnnl::memory::desc& to, float scale = 1);
  // The packed copies held.
  size_t bytes() const;

 private:
  struct Entry {
    dnnl::memory::desc from, to;
    float scale;
    dnnl::memory packed;
  };
  std::map<const uint8_t*, std::shared_ptr<const uint8_t>> constants_;
  std::map<const uint8_t*, std::vector<Entry>> packed_;
};

// The running session's cache (runtime/run_context.h); nullptr outside a run.
PackedWeightsCache* CurrentPackedWeights();

// Weights in a primitive's layout, as a kernel keeps them for the weights buffer they came from.
struct PackedWeights {
  std::shared_ptr<const uint8_t> source;  // held, so its address cannot come back as another's
  dnnl::memory memory;
  // Makes `memory` hold `weights` (laid out as `from`) in layout `to`, times `scale` (rounded to
  // nearest even): nothing when it already does; the session's shared copy of a constant unless
  // `private_copy`; a reorder otherwise.
  void Update(const std::shared_ptr<const uint8_t>& weights, const dnnl::memory::desc& from,
              const dnnl::memory::desc& to, bool private_copy = false, float scale = 1);
};

// Whether oneDNN's int8 kernels on this CPU (as ONEDNN_MAX_CPU_ISA leaves it) add two u8 x s8
// products in int16 before widening (vpmaddubsw: AVX2 and AVX-512 without VNNI), where the sum
// saturates once activations and weights are both large; VNNI adds four in int32. oneDNN halves
// the weights itself only in convolutions with a signed input; our int8 kernels halve them
// (kSevenBitWeights, as ONNX Runtime's reduce_range does) where the input fills the uint8 range:
// every int8 MatMul/Gemm (oneDNN's GEMM shifts a signed A by 128) and convolutions whose uint8
// input has a zero point (dnnl_conv.cc says why not the others).
bool Int8PairsSaturate();
inline constexpr float kSevenBitWeights = 0.5f;
// Whether int8 weights `w` need halving here: pairs saturate and some |w| > 64 (two products of
// 255 and 64 still fit int16). Decided once per plan from the weights it first runs with: the
// fused int8 nodes' weights are constants.
bool NeedsSevenBitWeights(const Tensor& w);

// An int8 node's fp32 bias (in the int32 sums' units, added before the output scales) times the
// factor its weights were scaled by: kept for the bias buffer it came from.
class ScaledBias {
 public:
  const void* For(const Tensor& bias, float scale);

 private:
  std::shared_ptr<const uint8_t> source_;
  std::vector<float> values_;
};

// The kernels' cache of one primitive per key (shapes...) with the name of oneDNN's implementation
// of it: made on first use from the primitive desc that `make_desc` returns, and dropped with the
// last shape set that used it (shape_plans.h).
template <typename Primitive, typename Key>
using PrimitiveMap = ShapePlans<Key, std::pair<Primitive, std::string>>;

template <typename Primitive, typename Key, typename MakeDesc>
std::pair<Primitive, std::string>& FindOrCreate(PrimitiveMap<Primitive, Key>& primitives, const Key& key,
                                                MakeDesc make_desc) {
  if (auto* found = primitives.Find(key)) return *found;
  const auto pd = make_desc();
  return primitives.Add(key, std::make_pair(Primitive(pd), std::string(pd.impl_info_str())));
}

// The plan for `key`, made by `create(Plan*)` on first use. A plan that oneDNN could not make (an
// Internal status: it rejected the shape) is kept, unusable, so that the kernel falls back at once
// the next time; any other error is returned and nothing is kept.
template <typename Plan, typename Key, typename Create>
StatusOr<Plan*> FindOrCreatePlan(ShapePlans<Key, Plan>& plans, const Key& key, const char* what, Create create) {
  if (Plan* found = plans.Find(key)) return found;
  Plan plan;
  Status status = Guarded(what, [&] { return create(&plan); });
  if (!status.ok() && status.code() != StatusCode::kInternal) return status;
  return &plans.Add(key, std::move(plan));
}

// The factory registered for `op` so far (the reference kernel), which a oneDNN kernel registered
// over it keeps as its fallback.
KernelFactory FactoryBefore(const KernelRegistry& registry, std::string_view op);

}  // namespace inferd::runtime::dnnl_kernels
