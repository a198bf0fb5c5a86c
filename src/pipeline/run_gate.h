// Admits a composite model's runs (an ensemble's, a router's) until it is stopped, and lets the
// stop wait for the runs already admitted: how their versions drain on unload and reload.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "common/mutex.h"

namespace inferd {

class RunGate {
 public:
  // Counts a run in before the check, so a drain that sees none in flight cannot miss one
  // starting. False (and nothing counted) once stopped.
  bool TryEnter() {
    in_flight_.fetch_add(1);
    if (!stopped_.load()) return true;
    Exit();
    return false;
  }
  // A run admitted by TryEnter has answered.
  void Exit() {
    if (in_flight_.fetch_sub(1) == 1 && stopped_.load()) {
      MutexLock lock(&mu_);
      drained_.NotifyAll();
    }
  }
  // Admits no more runs, and waits until every admitted one has answered.
  void StopAndDrain() {
    stopped_.store(true);
    MutexLock lock(&mu_);
    while (in_flight_.load() > 0) drained_.WaitFor(lock, std::chrono::milliseconds(50));
  }
  bool stopped() const { return stopped_.load(); }
  int64_t in_flight() const { return in_flight_.load(); }

 private:
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> in_flight_{0};
  Mutex mu_;  // only pairs with drained_: the counters are atomic
  CondVar drained_;
};

}  // namespace inferd
