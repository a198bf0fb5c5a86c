#include "runtime/kernels/dnnl/dnnl_context.h"

#include "runtime/kernels/tensor_util.h"
#include "runtime/run_context.h"

namespace inferd::runtime::dnnl_kernels {

const dnnl::engine& Engine() {
  static const dnnl::engine engine = [] {
    // oneDNN's primitive cache hands the same primitive to every kernel that asks for the same
    // descriptor: two instances of a model, two versions of it during a rollout, two models with a
    // layer of the same shape. Debian builds oneDNN with DNNL_ENABLE_CONCURRENT_EXEC, where each
    // primitive owns its scratchpad and one primitive run from two threads at once computes
    // garbage (oneDNN's scratchpad guide): two models preparing at once corrupted the heap under
    // ASan. Without the cache every kernel owns its primitives, and a kernel runs on one thread at
    // a time. Kernels keep their primitives per shape (ShapePlans), so the cache saved only the
    // JIT of identical layers in other sessions.
    dnnl::set_primitive_cache_capacity(0);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

dnnl::memory::dims ToDims(const Shape& shape) { return dnnl::memory::dims(shape.begin(), shape.end()); }

dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
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

std::optional<dnnl::memory> PackedWeightsCache::Get(const std::shared_ptr<const uint8_t>& source,
                                                    const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  auto constant = constants_.find(source.get());
  if (constant == constants_.end() || !SameBuffer(constant->second, source)) return std::nullopt;
  std::vector<Entry>& entries = packed_[source.get()];
  for (const Entry& entry : entries) {
    if (entry.from == from && entry.to == to) return entry.packed;
  }
  dnnl::memory plain = Wrap(from, source.get());
  dnnl::memory packed(to, Engine());
  dnnl::reorder(plain, packed).execute(ThreadStream(), plain, packed);
  ThreadStream().wait();
  entries.push_back({from, to, packed});
  return packed;
}

PackedWeightsCache* CurrentPackedWeights() { return CurrentRunContext().packed_weights; }

void PackedWeights::Update(const std::shared_ptr<const uint8_t>& weights, const dnnl::memory::desc& from,
                           const dnnl::memory::desc& to, bool private_copy) {
  if (SameBuffer(source, weights)) return;
  PackedWeightsCache* shared = private_copy ? nullptr : CurrentPackedWeights();
  dnnl::memory plain = Wrap(from, weights.get());
  if (to == from) {
    memory = plain;
  } else if (auto packed = shared ? shared->Get(weights, from, to) : std::nullopt) {
    memory = *packed;
  } else {
    memory = dnnl::memory(to, Engine());
    dnnl::reorder(plain, memory).execute(ThreadStream(), plain, memory);
    ThreadStream().wait();
  }
  source = weights;
}

KernelFactory FactoryBefore(const KernelRegistry& registry, std::string_view op) {
  const KernelFactory* factory = registry.Find(op, "", 17);
  return factory ? *factory : KernelFactory();
}

}  // namespace inferd::runtime::dnnl_kernels
