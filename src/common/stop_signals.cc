#include "common/stop_signals.h"

#include <pthread.h>

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

}  // namespace inferd
