#include "runtime/kernels/dnnl/dnnl_context.h"

#include <algorithm>
#include <stdexcept>

#include "runtime/kernels/tensor_util.h"
#include "runtime/run_context.h"

namespace inferd::runtime::dnnl_kernels {

const dnnl::engine& Engine() {
  static const dnnl::engine engine = [] {
    // oneDNN's primitive cache hands the same primitive to every kernel that asks for the same
    // descriptor: two instances of a model, two versions of it during a rollout, two models with a
    // layer of the same shape, run from their threads at once. oneDNN allows a primitive to run
    // on one thread at a time only. Without the cache every kernel owns its primitives, and a
    // kernel runs on one thread at a time. Kernels keep their primitives per shape (ShapePlans),
    // so the cache saved only the JIT of identical layers in other sessions.
    dnnl::set_primitive_cache_capacity(0);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

dnnl::primitive_attr OwnScratchpad(dnnl::primitive_attr attr) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void RunPrimitive(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory> args) {
  const_dnnl_primitive_desc_t pd = primitive.get_primitive_desc();
  const_dnnl_primitive_attr_t attr = nullptr;
  dnnl_scratchpad_mode_t mode = dnnl_scratchpad_mode_library;
  if (dnnl_primitive_desc_get_attr(pd, &attr) != dnnl_success ||
      dnnl_primitive_attr_get_scratchpad_mode(attr, &mode) != dnnl_success || mode != dnnl_scratchpad_mode_user) {
    throw std::logic_error("a oneDNN primitive made without OwnScratchpad (dnnl_context.h)");
  }
  const dnnl_memory_desc_t* scratchpad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (scratchpad != nullptr) {
    if (const size_t bytes = dnnl_memory_desc_get_size(scratchpad); bytes > 0) {
      args.insert_or_assign(DNNL_ARG_SCRATCHPAD,
                            dnnl::memory(dnnl::memory::desc(*scratchpad), Engine(), PrimitiveScratchpad().Get(bytes)));
    }
  }
  primitive.execute(ThreadStream(), args);
}

dnnl::reorder::primitive_desc ReorderDesc(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  return dnnl::reorder::primitive_desc(Engine(), from, Engine(), to, OwnScratchpad());
}

dnnl::reorder MakeReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  return dnnl::reorder(ReorderDesc(from, to));
}

dnnl::reorder MakeScaledReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to, float scale,
                                int32_t zero_point) {
  dnnl::primitive_attr attr = OwnScratchpad();
  attr.set_output_scales(0, {scale});
  if (zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {zero_point});
  return dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), from, Engine(), to, attr));
}

void RunReorder(const dnnl::reorder& reorder, const dnnl::memory& from, const dnnl::memory& to) {
  RunPrimitive(reorder, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  ThreadStream().wait();
}

void RunReorder(const dnnl::memory& from, const dnnl::memory& to) {
  RunReorder(MakeReorder(from.get_desc(), to.get_desc()), from, to);
}

dnnl::memory::dims ToDims(const Shape& shape) { return dnnl::memory::dims(shape.begin(), shape.end()); }

dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims, dnnl::memory::data_type type) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return dnnl::memory::desc(dims, type, strides);
}

void BindScratch(std::initializer_list<dnnl::memory*> memories) {
  constexpr size_t kAlignment = 64;
  auto rounded = [](size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; };
  size_t total = 0;
  for (const dnnl::memory* memory : memories) {
    if (*memory) total += rounded(memory->get_desc().get_size());
  }
  uint8_t* scratch = KernelScratch().Get(total);
  for (dnnl::memory* memory : memories) {
    if (!*memory) continue;
    memory->set_data_handle(scratch);
    scratch += rounded(memory->get_desc().get_size());
  }
}

void PackedWeightsCache::AddConstant(const std::shared_ptr<const uint8_t>& data) {
  if (data != nullptr) constants_[data.get()] = data;
}

namespace {
dnnl::reorder ScaledOrPlainReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to, float scale) {
  return scale == 1 ? MakeReorder(from, to) : MakeScaledReorder(from, to, scale, 0);
}
}  // namespace

std::optional<dnnl::memory> PackedWeightsCache::Get(const std::shared_ptr<const uint8_t>& source,
                                                    const dnnl::memory::desc& from, const dnnl::memory::desc& to,
                                                    float scale) {
  auto constant = constants_.find(source.get());
  if (constant == constants_.end() || !SameBuffer(constant->second, source)) return std::nullopt;
  std::vector<Entry>& entries = packed_[source.get()];
  for (const Entry& entry : entries) {
    if (entry.from == from && entry.to == to && entry.scale == scale) return entry.packed;
  }
  dnnl::memory packed(to, Engine());
  RunReorder(ScaledOrPlainReorder(from, to, scale), Wrap(from, source.get()), packed);
  entries.push_back({from, to, scale, packed});
  return packed;
}

size_t PackedWeightsCache::bytes() const {
  size_t total = 0;
  for (const auto& [source, entries] : packed_) {
    for (const Entry& entry : entries) total += entry.to.get_size();
  }
  return total;
}

PackedWeightsCache* CurrentPackedWeights() { return CurrentRunContext().packed_weights; }

void PackedWeights::Update(const std::shared_ptr<const uint8_t>& weights, const dnnl::memory::desc& from,
                           const dnnl::memory::desc& to, bool private_copy, float scale) {
  if (SameBuffer(source, weights)) return;
  PackedWeightsCache* shared = private_copy ? nullptr : CurrentPackedWeights();
  dnnl::memory plain = Wrap(from, weights.get());
  if (to == from && scale == 1) {
    memory = plain;
  } else if (auto packed = shared ? shared->Get(weights, from, to, scale) : std::nullopt) {
    memory = *packed;
  } else {
    memory = dnnl::memory(to, Engine());
    RunReorder(ScaledOrPlainReorder(from, to, scale), plain, memory);
  }
  source = weights;
}

bool NeedsSevenBitWeights(const Tensor& w) {
  if (!Int8PairsSaturate() || w.dtype != DataType::kInt8) return false;
  const auto* values = reinterpret_cast<const int8_t*>(w.data.get());
  return std::any_of(values, values + ElementsOf(w), [](int8_t v) { return v > 64 || v < -64; });
}

const void* ScaledBias::For(const Tensor& bias, float scale) {
  if (scale == 1) return bias.data.get();
  if (!SameBuffer(source_, bias.data)) {
    const float* values = reinterpret_cast<const float*>(bias.data.get());
    values_.assign(values, values + ElementsOf(bias));
    for (float& v : values_) v *= scale;
    source_ = bias.data;
  }
  return values_.data();
}

bool Int8PairsSaturate() {
  using isa = dnnl::cpu_isa;
  static const bool saturate = [] {
    const isa effective = dnnl::get_effective_cpu_isa();
    return effective != isa::avx2_vnni && effective != isa::avx512_core_vnni && effective != isa::avx512_core_bf16 &&
           effective != isa::avx512_core_amx;
  }();
  return saturate;
}

KernelFactory FactoryBefore(const KernelRegistry& registry, std::string_view op) {
  const KernelFactory* factory = registry.Find(op, "", 17);
  return factory ? *factory : KernelFactory();
}

}  // namespace inferd::runtime::dnnl_kernels
