#include "metrics/gpu_metrics.h"

#include <dlfcn.h>

#include <limits>
#include <vector>

// NVML's C types, the part used here, under nvml.h's own names and at global scope: UBSan's
// function-type check compares our pointers' types with the library's (tests/unit/fake_nvml.cc).
struct nvmlDevice_st;
struct nvmlUtilization_st {
  unsigned int gpu;     // percent of the last sample period a kernel ran
  unsigned int memory;  // percent of it memory was read or written
};
struct nvmlMemory_st {
  unsigned long long total, free, used;  // bytes
};

namespace inferd {
namespace {

using NvmlReturn = int;  // 0 is NVML_SUCCESS
using NvmlDevice = nvmlDevice_st*;
using NvmlUtilization = nvmlUtilization_st;
using NvmlMemory = nvmlMemory_st;
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM
constexpr unsigned kNameLength = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE

}  // namespace

struct GpuMetrics::Nvml {
  void* library = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*device_count)(unsigned int*) = nullptr;
  NvmlReturn (*device_by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*device_name)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned int*) = nullptr;
  std::vector<NvmlDevice> devices;
  bool initialised = false;

  template <typename Fn>
  bool Find(Fn* slot, const char* symbol) {
    *slot = reinterpret_cast<Fn>(dlsym(library, symbol));
    return *slot != nullptr;
  }
};

void GpuMetrics::RegisterMetricFamilies(MetricsRegistry* registry) {
  using Type = MetricsRegistry::Type;
  registry->Declare("inferd_gpu_utilization_ratio", Type::kGauge,
                    "Share of NVML's last sample period in which a kernel ran on the GPU (labels gpu, name).");
  registry->Declare("inferd_gpu_memory_used_bytes", Type::kGauge, "GPU memory in use (NVML).");
  registry->Declare("inferd_gpu_memory_total_bytes", Type::kGauge, "GPU memory installed (NVML).");
  registry->Declare("inferd_gpu_sm_clock_hertz", Type::kGauge, "The GPU's current SM clock (NVML).");
}

GpuMetrics::GpuMetrics(MetricsRegistry* registry) : registry_(registry), nvml_(std::make_unique<Nvml>()) {}

std::unique_ptr<GpuMetrics> GpuMetrics::Load(MetricsRegistry* registry, const std::string& library) {
  std::unique_ptr<GpuMetrics> gpus(new GpuMetrics(registry));
  Nvml& nvml = *gpus->nvml_;
  nvml.library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nvml.library == nullptr) {
    const char* error = dlerror();
    gpus->unavailable_reason_ = "no NVML (" + std::string(error ? error : library) + ")";
    return gpus;
  }
  const bool found = nvml.Find(&nvml.init, "nvmlInit_v2") && nvml.Find(&nvml.shutdown, "nvmlShutdown") &&
                     nvml.Find(&nvml.device_count, "nvmlDeviceGetCount_v2") &&
                     nvml.Find(&nvml.device_by_index, "nvmlDeviceGetHandleByIndex_v2") &&
                     nvml.Find(&nvml.device_name, "nvmlDeviceGetName") &&
                     nvml.Find(&nvml.utilization, "nvmlDeviceGetUtilizationRates") &&
                     nvml.Find(&nvml.memory, "nvmlDeviceGetMemoryInfo") &&
                     nvml.Find(&nvml.clock, "nvmlDeviceGetClockInfo");
  if (!found) {
    gpus->unavailable_reason_ = library + " lacks an NVML entry point";
    return gpus;
  }
  if (NvmlReturn status = nvml.init(); status != 0) {
    gpus->unavailable_reason_ = "nvmlInit failed (NVML error " + std::to_string(status) + ")";
    return gpus;
  }
  nvml.initialised = true;
  unsigned int count = 0;
  if (NvmlReturn status = nvml.device_count(&count); status != 0 || count == 0) {
    gpus->unavailable_reason_ = status != 0 ? "nvmlDeviceGetCount failed (NVML error " + std::to_string(status) + ")"
                                            : "NVML sees no GPU";
    return gpus;
  }
  for (unsigned int i = 0; i < count; ++i) {
    NvmlDevice device = nullptr;
    if (nvml.device_by_index(i, &device) != 0) continue;
    char name[kNameLength] = {};
    if (nvml.device_name(device, name, kNameLength) != 0) name[0] = '\0';
    const MetricLabels labels{{"gpu", std::to_string(i)}, {"name", name}};
    Nvml* raw = &nvml;
    // A failed read (the GPU fell off the bus) gives NaN, not a stale value.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    registry->AddScrapedValue("inferd_gpu_utilization_ratio", labels, [raw, device, nan] {
      NvmlUtilization u{};
      return raw->utilization(device, &u) == 0 ? u.gpu / 100.0 : nan;
    });
    registry->AddScrapedValue("inferd_gpu_memory_used_bytes", labels, [raw, device, nan] {
      NvmlMemory m{};
      return raw->memory(device, &m) == 0 ? static_cast<double>(m.used) : nan;
    });
    registry->AddScrapedValue("inferd_gpu_memory_total_bytes", labels, [raw, device, nan] {
      NvmlMemory m{};
      return raw->memory(device, &m) == 0 ? static_cast<double>(m.total) : nan;
    });
    registry->AddScrapedValue("inferd_gpu_sm_clock_hertz", labels, [raw, device, nan] {
      unsigned int mhz = 0;
      return raw->clock(device, kNvmlClockSm, &mhz) == 0 ? mhz * 1e6 : nan;
    });
    nvml.devices.push_back(device);
  }
  gpus->gpu_count_ = static_cast<unsigned>(nvml.devices.size());
  return gpus;
}

GpuMetrics::~GpuMetrics() {
  for (unsigned i = 0; i < gpu_count_; ++i) registry_->RemoveSeries({{"gpu", std::to_string(i)}});
  if (nvml_->initialised) nvml_->shutdown();
  if (nvml_->library != nullptr) dlclose(nvml_->library);
}

}  // namespace inferd
