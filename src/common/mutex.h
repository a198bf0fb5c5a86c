// A mutex whose locking rules the compiler checks: members are marked GUARDED_BY(mu_), functions
// REQUIRES(mu_) / EXCLUDES(mu_), and clang's -Wthread-safety (on in the clang CI build) rejects code
// that touches guarded state without the lock. Other compilers ignore the annotations.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define INFERD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define INFERD_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) INFERD_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY INFERD_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) INFERD_THREAD_ANNOTATION(guarded_by(x))
#define REQUIRES(...) INFERD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) INFERD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) INFERD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define EXCLUDES(...) INFERD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

namespace inferd {

class CAPABILITY("mutex") Mutex {
 public:
  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope; Unlock()/Lock() release and retake it inside the scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  friend class CondVar;
  Mutex* mu_;
  bool held_ = true;
};

class CondVar {
 public:
  // Both wait with the lock held and return with it held.
  void Wait(MutexLock& lock) {
    std::unique_lock<std::mutex> native(lock.mu_->mu_, std::adopt_lock);
    cv_.wait(native);
    native.release();
  }
  template <typename Rep, typename Period>
  void WaitFor(MutexLock& lock, std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> native(lock.mu_->mu_, std::adopt_lock);
    cv_.wait_for(native, timeout);
    native.release();
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace inferd
