#include "common/low_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace inferd {

bool RunAtLowerPriority(int nice_increment, const std::function<void()>& work) {
  bool lowered = false;
  std::thread worker([&] {
    if (nice_increment > 0) {
      const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
      errno = 0;
      const int nice = ::getpriority(PRIO_PROCESS, tid);
      lowered = errno == 0 && ::setpriority(PRIO_PROCESS, tid, nice + nice_increment) == 0;
    }
    work();
  });
  worker.join();
  return lowered;
}

}  // namespace inferd
