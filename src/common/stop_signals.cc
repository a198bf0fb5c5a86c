#include "common/stop_signals.h"

#include <pthread.h>

#include <cerrno>

namespace inferd {

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

int WaitForStopSignal(const sigset_t& stop_signals) {
  int received = 0;
  sigwait(&stop_signals, &received);
  return received;
}

std::optional<int> WaitForStopSignal(const sigset_t& stop_signals, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    timespec wait{.tv_sec = static_cast<time_t>(left.count() / 1'000'000'000),
                  .tv_nsec = static_cast<long>(left.count() % 1'000'000'000)};
    const int received = sigtimedwait(&stop_signals, nullptr, &wait);
    if (received > 0) return received;
    if (errno != EINTR) return std::nullopt;  // EAGAIN: the time is up
  }
}

}  // namespace inferd
