#include <algorithm>

#include "runtime/kernels/kernel.h"

namespace inferd::runtime {

void KernelRegistry::Register(std::string op_type, int since_opset, KernelFactory factory) {
  auto& entries = entries_[std::move(op_type)];
  entries.push_back({since_opset, std::move(factory)});
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.since_opset > b.since_opset;  // newest first
  });
}

const KernelFactory* KernelRegistry::Find(std::string_view op_type, std::string_view domain, int opset) const {
  if (!domain.empty() && domain != "ai.onnx") return nullptr;
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

const KernelRegistry& KernelRegistry::Default() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    RegisterElementwiseKernels(r);
    RegisterShapeKernels(r);
    RegisterReduceKernels(r);
    RegisterNnKernels(r);
    return r;
  }();
  return *registry;
}

}  // namespace inferd::runtime
