// Process metrics read from /proc/self: a new thread and an opened file show, CPU time grows with
// work, resident memory is there.
#include "metrics/process_metrics.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
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
  // Busy until the reading grows by 0.1 s: a fixed 300 ms of wall time got less than that on a
  // loaded machine (the sanitizer build beside the tests). The deadline only ends a broken reading.
  const double before = ProcessCpuSeconds();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  volatile double sink = 0;
  while (ProcessCpuSeconds() <= before + 0.1 && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 100000; ++i) sink = sink + 1;
  }
  EXPECT_GT(ProcessCpuSeconds(), before + 0.1);
  EXPECT_GT(ProcessResidentBytes(), 1 << 20);
}

// A listener on a free loopback port; returns its fd and sets *port.
int ListenOnLoopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd, 4) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

int ConnectTo(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(ProcessMetricsTest, ConnectionsToAPortAreCountedOnItsSideOnly) {
  int port = 0;
  const int listener = ListenOnLoopback(&port);
  ASSERT_GE(listener, 0);
  EXPECT_EQ(EstablishedConnections(port), 0);  // a listening socket is not a connection
  const int first = ConnectTo(port), second = ConnectTo(port);
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  // The accepted ends have local port `port`; the clients' ends have ephemeral local ports.
  EXPECT_EQ(EstablishedConnections(port), 2);
  const int accepted = accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  close(accepted);
  close(first);
  EXPECT_EQ(EstablishedConnections(port), 1);
  close(second);
  close(listener);
  EXPECT_EQ(EstablishedConnections(port), 0);
}

}  // namespace
}  // namespace inferd
