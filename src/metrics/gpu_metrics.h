// GPU utilisation, memory and SM clock per NVIDIA GPU, read at scrape time through NVML. NVML is
// loaded at run time with dlopen("libnvidia-ml.so.1"), so inferd neither links against the NVIDIA
// driver nor needs it: without the library (or without a GPU) there are no GPU series, and the
// reason is logged once. The few NVML entry points used are declared here (its C ABI is stable
// across driver versions: the *_v2 names).
#pragma once

#include <memory>
#include <string>

#include "metrics/metrics_registry.h"

namespace inferd {

class GpuMetrics {
 public:
  static constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

  static void RegisterMetricFamilies(MetricsRegistry* registry);
  // Loads `library` and registers each GPU's series (label gpu = its index, name = its model).
  // Always returns an object; gpu_count() is 0 and unavailable_reason() says why when NVML is
  // absent or fails.
  static std::unique_ptr<GpuMetrics> Load(MetricsRegistry* registry, const std::string& library = kNvmlLibrary);

  // Removes the series it registered, then shuts NVML down and unloads it.
  ~GpuMetrics();
  GpuMetrics(const GpuMetrics&) = delete;
  GpuMetrics& operator=(const GpuMetrics&) = delete;

  unsigned gpu_count() const { return gpu_count_; }
  const std::string& unavailable_reason() const { return unavailable_reason_; }

 private:
  struct Nvml;
  explicit GpuMetrics(MetricsRegistry* registry);

  MetricsRegistry* const registry_;
  std::unique_ptr<Nvml> nvml_;
  unsigned gpu_count_ = 0;
  std::string unavailable_reason_;
};

}  // namespace inferd
