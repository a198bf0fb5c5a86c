#include "runtime/kernels/dnnl/dnnl_context.h"

namespace inferd::runtime::dnnl_kernels {

const dnnl::engine& Engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
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

KernelFactory FactoryBefore(const KernelRegistry& registry, std::string_view op) {
  const KernelFactory* factory = registry.Find(op, "", 17);
  return factory ? *factory : KernelFactory();
}

}  // namespace inferd::runtime::dnnl_kernels
