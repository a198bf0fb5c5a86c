// The oneDNN engine and stream, and the conversion of oneDNN's exceptions into Status: no exception
// leaves a oneDNN kernel.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/kernels/kernel.h"

namespace inferd::runtime::dnnl_kernels {

// One CPU engine for the process (oneDNN engines are thread-safe).
const dnnl::engine& Engine();
// A stream per thread: each model instance thread executes on its own.
dnnl::stream& ThreadStream();

// Plain (row-major) memory descriptor for an fp32 tensor of `dims`.
dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims);
dnnl::memory::dims ToDims(const Shape& shape);

// Wraps a tensor's buffer. oneDNN takes a non-const handle but never writes through a source.
inline dnnl::memory Wrap(const dnnl::memory::desc& desc, const void* data) {
  return dnnl::memory(desc, Engine(), const_cast<void*>(data));
}

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

// The factory registered for `op` so far (the reference kernel), which a oneDNN kernel registered
// over it keeps as its fallback.
KernelFactory FactoryBefore(const KernelRegistry& registry, std::string_view op);

}  // namespace inferd::runtime::dnnl_kernels
