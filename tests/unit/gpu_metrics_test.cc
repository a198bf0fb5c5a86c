// GPU metrics: without NVML there are no GPU series and a reason; with a stand-in NVML
// (fake_nvml.cc, two GPUs) each GPU's utilisation, memory and SM clock are read at scrape time, a
// failing read gives NaN, a failing init gives none, and destruction removes the series. Where the
// machine has NVIDIA's driver, the real NVML is read too (skipped elsewhere; INFERD_EXPECT_GPU=1
// turns the skip into a failure, for runs on a GPU machine).
#include "metrics/gpu_metrics.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace inferd {
namespace {

class GpuMetricsTest : public ::testing::Test {
 protected:
  GpuMetricsTest() { GpuMetrics::RegisterMetricFamilies(&registry_); }
  bool Has(const std::string& line) { return registry_.RenderText().find(line + "\n") != std::string::npos; }
  MetricsRegistry registry_;
};

TEST_F(GpuMetricsTest, WithoutNvmlThereAreNoGpuSeries) {
  auto gpus = GpuMetrics::Load(&registry_, "libnvidia-ml-that-is-not-here.so.1");
  EXPECT_EQ(gpus->gpu_count(), 0u);
  EXPECT_NE(gpus->unavailable_reason().find("no NVML"), std::string::npos) << gpus->unavailable_reason();
  EXPECT_EQ(registry_.RenderText().find("inferd_gpu_utilization_ratio{"), std::string::npos);
  // A library that is not NVML at all.
  auto libc = GpuMetrics::Load(&registry_, "libc.so.6");
  EXPECT_EQ(libc->gpu_count(), 0u);
  EXPECT_NE(libc->unavailable_reason().find("entry point"), std::string::npos);
}

TEST_F(GpuMetricsTest, EachGpuIsReadAtScrapeTime) {
  {
    auto gpus = GpuMetrics::Load(&registry_, FAKE_NVML_PATH);
    ASSERT_EQ(gpus->gpu_count(), 2u) << gpus->unavailable_reason();
    EXPECT_TRUE(Has("inferd_gpu_utilization_ratio{gpu=\"0\",name=\"Fake GPU A\"} 0.75"));
    EXPECT_TRUE(Has("inferd_gpu_memory_used_bytes{gpu=\"0\",name=\"Fake GPU A\"} 3221225472"));
    EXPECT_TRUE(Has("inferd_gpu_memory_total_bytes{gpu=\"0\",name=\"Fake GPU A\"} 85899345920"));
    EXPECT_TRUE(Has("inferd_gpu_sm_clock_hertz{gpu=\"0\",name=\"Fake GPU A\"} 1410000000"));
    EXPECT_TRUE(Has("inferd_gpu_utilization_ratio{gpu=\"1\",name=\"Fake GPU B\"} 0"));
    EXPECT_TRUE(Has("inferd_gpu_memory_used_bytes{gpu=\"1\",name=\"Fake GPU B\"} NaN"));  // the read failed
  }
  EXPECT_EQ(registry_.RenderText().find("gpu=\""), std::string::npos);  // gone with the object
  void* fake = dlopen(FAKE_NVML_PATH, RTLD_NOW);
  ASSERT_NE(fake, nullptr);
  auto open_inits = reinterpret_cast<int (*)()>(dlsym(fake, "fake_nvml_open_inits"));
  EXPECT_EQ(open_inits(), 0);  // nvmlShutdown was called
  dlclose(fake);
}

TEST_F(GpuMetricsTest, AFailingInitGivesNoSeries) {
  setenv("FAKE_NVML_FAIL_INIT", "1", 1);
  auto gpus = GpuMetrics::Load(&registry_, FAKE_NVML_PATH);
  unsetenv("FAKE_NVML_FAIL_INIT");
  EXPECT_EQ(gpus->gpu_count(), 0u);
  EXPECT_NE(gpus->unavailable_reason().find("nvmlInit failed"), std::string::npos) << gpus->unavailable_reason();
}

// The value of `family`'s series for GPU `gpu` in the exposition text; NaN when absent.
double GpuValue(const std::string& text, const std::string& family, unsigned gpu) {
  const std::string prefix = family + "{gpu=\"" + std::to_string(gpu) + "\",";
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) return std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return std::nan("");
}

TEST_F(GpuMetricsTest, TheDriversNvmlIsReadWhereThereIsOne) {
  auto gpus = GpuMetrics::Load(&registry_);
  const char* expect = std::getenv("INFERD_EXPECT_GPU");
  if (gpus->gpu_count() == 0) {
    if (expect != nullptr && std::string(expect) == "1") FAIL() << "no GPU series: " << gpus->unavailable_reason();
    GTEST_SKIP() << "no NVIDIA GPU here: " << gpus->unavailable_reason();
  }
  const std::string text = registry_.RenderText();
  for (unsigned gpu = 0; gpu < gpus->gpu_count(); ++gpu) {
    const double total = GpuValue(text, "inferd_gpu_memory_total_bytes", gpu);
    const double used = GpuValue(text, "inferd_gpu_memory_used_bytes", gpu);
    const double utilization = GpuValue(text, "inferd_gpu_utilization_ratio", gpu);
    const double clock = GpuValue(text, "inferd_gpu_sm_clock_hertz", gpu);
    std::cout << "gpu " << gpu << ": total " << total << " B, used " << used << " B, utilization " << utilization
              << ", SM clock " << clock << " Hz\n";
    EXPECT_GT(total, 1e9) << text;  // every GPU NVML supports has more than 1 GB
    EXPECT_GE(used, 0.0);
    EXPECT_LE(used, total);
    EXPECT_GE(utilization, 0.0);
    EXPECT_LE(utilization, 1.0);
    EXPECT_GT(clock, 1e7);  // tens of MHz at the lowest idle clock
  }
}

}  // namespace
}  // namespace inferd
