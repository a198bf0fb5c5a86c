#include <algorithm>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/simd/targets.h"

namespace inferd::runtime {

void KernelRegistry::Register(std::string op_type, int since_opset, KernelFactory factory) {
  auto& entries = entries_[std::move(op_type)];
  // Newest opset first; for the same opset the later registration wins, so a fast kernel registered
  // after the reference one takes its place (and may keep it as its fallback).
  entries.insert(entries.begin(), {since_opset, std::move(factory)});
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.since_opset > b.since_opset; });
}

const KernelFactory* KernelRegistry::Find(std::string_view op_type, std::string_view domain, int opset) const {
  std::string qualified;
  if (domain == kInferdDomain) {
    qualified = std::string(kInferdDomain) + "." + std::string(op_type);
    op_type = qualified;
  } else if (!domain.empty() && domain != "ai.onnx") {
    return nullptr;
  }
  auto it = entries_.find(op_type);
  if (it == entries_.end()) return nullptr;
  for (const Entry& entry : it->second) {
    if (entry.since_opset <= opset) return &entry.factory;
  }
  return nullptr;
}

std::vector<std::string> KernelRegistry::OpTypes() const {
  std::vector<std::string> names;
  for (const auto& [name, entries] : entries_) names.push_back(name);
  return names;
}

const KernelRegistry& KernelRegistry::Reference() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    RegisterElementwiseKernels(r);
    RegisterShapeKernels(r);
    RegisterReduceKernels(r);
    RegisterNnKernels(r);
    RegisterResizeKernels(r);
    RegisterAttentionKernels(r);
    RegisterSequenceKernels(r);
    RegisterIndexKernels(r);
    RegisterLossKernels(r);
    RegisterQuantizeKernels(r);
    RegisterEinsumKernels(r);
    RegisterGridSampleKernels(r);
    RegisterRnnKernels(r);
    RegisterControlFlowKernels(r);
    RegisterQuantizedLinearKernels(r);
    RegisterSignalKernels(r);
    RegisterRoiAlignKernels(r);
    return r;
  }();
  return *registry;
}

const KernelRegistry& KernelRegistry::Default() {
  static const KernelRegistry* registry = [] {
    simd::CapTargetsLikeOneDnn();  // before any of our SIMD kernels picks its target
    auto* r = new KernelRegistry(Reference());
    RegisterDnnlConvKernels(r);
    RegisterDnnlMatmulKernels(r);
    RegisterDnnlEltwiseKernels(r);
    RegisterDnnlPoolKernels(r);
    RegisterDnnlBinaryKernels(r);
    RegisterDnnlDataMovementKernels(r);
    RegisterDnnlNormKernels(r);
    RegisterDnnlReduceKernels(r);
    RegisterDnnlAttentionKernels(r);
    RegisterDnnlResizeKernels(r);
    RegisterDnnlLayoutKernels(r);
    return r;
  }();
  return *registry;
}

}  // namespace inferd::runtime
