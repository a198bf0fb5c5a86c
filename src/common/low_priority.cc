#include "common/low_priority.h"

#include <sched.h>

#include <thread>

namespace inferd {

bool RunAtIdlePriority(bool idle, const std::function<void()>& work) {
  bool lowered = false;
  std::thread worker([&] {
    if (idle) {
      sched_param param{};
      param.sched_priority = 0;
      lowered = ::sched_setscheduler(0, SCHED_IDLE, &param) == 0;  // 0: the calling thread
    }
    work();
  });
  worker.join();
  return lowered;
}

}  // namespace inferd
