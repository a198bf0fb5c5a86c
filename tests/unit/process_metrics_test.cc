// Process metrics read from /proc/self: a new thread and an opened file show, CPU time grows with
// work, resident memory is there.
#include "metrics/process_metrics.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

namespace inferd {
namespace {

TEST(ProcessMetricsTest, ANewThreadAndAnOpenedFileAreCounted) {
  const double threads = ProcessThreads(), fds = ProcessOpenFds();
  EXPECT_GE(threads, 1);
  EXPECT_GE(fds, 3);  // stdin, stdout, stderr at least
  std::promise<void> release;
  std::thread waiting([future = release.get_future()]() mutable { future.wait(); });
  const int file = open("/proc/self/stat", O_RDONLY);
  ASSERT_GE(file, 0);
  EXPECT_EQ(ProcessThreads(), threads + 1);
  EXPECT_EQ(ProcessOpenFds(), fds + 1);
  close(file);
  release.set_value();
  waiting.join();
  EXPECT_EQ(ProcessThreads(), threads);
  EXPECT_EQ(ProcessOpenFds(), fds);
}

TEST(ProcessMetricsTest, CpuTimeGrowsWithWorkAndMemoryIsResident) {
  const double before = ProcessCpuSeconds();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile double sink = 0;
  while (std::chrono::steady_clock::now() < until) sink = sink + 1;
  EXPECT_GT(ProcessCpuSeconds(), before + 0.1);
  EXPECT_GT(ProcessResidentBytes(), 1 << 20);
}

}  // namespace
}  // namespace inferd
