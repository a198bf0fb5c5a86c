// A stand-in for libnvidia-ml.so.1 with two GPUs and fixed readings, so that the present path of
// metrics/gpu_metrics.cc runs without an NVIDIA GPU. Only the entry points inferd uses, with
// NVML's C signatures. FAKE_NVML_FAIL_INIT in the environment makes nvmlInit_v2 fail.
#include <cstdlib>
#include <cstring>

// NVML's types as nvml.h names them (and as metrics/gpu_metrics.cc declares them).
struct nvmlDevice_st {
  unsigned index;
};
struct nvmlUtilization_st { unsigned int gpu, memory; };
struct nvmlMemory_st { unsigned long long total, free, used; };

namespace {
nvmlDevice_st devices[2] = {{0}, {1}};
int initialised = 0;
}  // namespace

extern "C" {

int nvmlInit_v2() {
  if (std::getenv("FAKE_NVML_FAIL_INIT") != nullptr) return 999;  // NVML_ERROR_UNKNOWN
  ++initialised;
  return 0;
}
int nvmlShutdown() {
  --initialised;
  return 0;
}
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_st** device) {
  if (index >= 2) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &devices[index];
  return 0;
}
int nvmlDeviceGetName(nvmlDevice_st* device, char* name, unsigned int length) {
  std::strncpy(name, device->index == 0 ? "Fake GPU A" : "Fake GPU B", length);
  return 0;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_st* device, nvmlUtilization_st* u) {
  u->gpu = device->index == 0 ? 75 : 0;
  u->memory = 10;
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_st* device, nvmlMemory_st* m) {
  if (device->index == 1) return 15;  // NVML_ERROR_GPU_IS_LOST
  m->total = 80ull << 30;
  m->used = 3ull << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetClockInfo(nvmlDevice_st*, int type, unsigned int* mhz) {
  *mhz = type == 1 ? 1410 : 0;
  return 0;
}
// For the test: how many inits are not shut down.
int fake_nvml_open_inits() { return initialised; }
}
