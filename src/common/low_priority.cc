#include "common/low_priority.h"

#include <sched.h>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace inferd {
namespace {

// One SCHED_IDLE thread per calling thread, made at its first use and kept until the caller ends:
// a load thread hands each load's work to its own. Kept, not made per load: a thread ending while
// another trims the heap (malloc_trim after a drain) failed glibc's arena accounting under ASan
// ("a->attached_threads > 0", about one start-up in 40 with three load threads).
class IdleWorker {
 public:
  IdleWorker() : thread_([this] { Serve(); }) {}
  ~IdleWorker() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Runs `work` on the worker and waits for it.
  void Run(const std::function<void()>& work) {
    std::unique_lock lock(mu_);
    work_ = &work;
    cv_.notify_all();
    cv_.wait(lock, [this] { return work_ == nullptr; });
  }
  bool idle() const { return idle_; }

 private:
  void Serve() {
    sched_param param{};
    idle_ = ::sched_setscheduler(0, SCHED_IDLE, &param) == 0;  // 0: this thread
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || work_ != nullptr; });
      if (work_ == nullptr) return;  // stopping
      lock.unlock();
      (*work_)();
      lock.lock();
      work_ = nullptr;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void()>* work_ = nullptr;  // guarded by mu_
  bool stop_ = false;                            // guarded by mu_
  bool idle_ = false;                            // set by the worker before it takes work
  std::thread thread_;
};

}  // namespace

bool RunAtIdlePriority(bool idle, const std::function<void()>& work) {
  if (!idle) {
    work();
    return false;
  }
  thread_local IdleWorker worker;
  worker.Run(work);
  return worker.idle();
}

}  // namespace inferd
