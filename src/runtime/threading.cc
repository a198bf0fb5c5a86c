#include "runtime/threading.h"

#include <dlfcn.h>

#include <algorithm>

namespace inferd::runtime {

bool SetIntraOpThreads(int threads) {
  // Looked up in the OpenMP runtime that libdnnl itself loaded (libgomp on Debian) instead of
  // linking one: a clang build would otherwise bring LLVM's libomp as a second runtime.
  using SetNumThreads = void (*)(int);
  static const auto set_num_threads = reinterpret_cast<SetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set_num_threads == nullptr) return false;
  set_num_threads(threads < 1 ? 1 : threads);
  return true;
}

int IntraOpThreads() {
  using GetMaxThreads = int (*)();
  static const auto get_max_threads = reinterpret_cast<GetMaxThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return get_max_threads == nullptr ? 1 : get_max_threads();
}

namespace {

struct ParallelJob {
  int64_t count;
  const std::function<void(int64_t, int64_t)>* body;
};

int OmpThreadNumber() {
  using GetThreadNum = int (*)();
  static const auto get_thread_num = reinterpret_cast<GetThreadNum>(dlsym(RTLD_DEFAULT, "omp_get_thread_num"));
  return get_thread_num == nullptr ? 0 : get_thread_num();
}

int OmpTeamSize() {
  using GetNumThreads = int (*)();
  static const auto get_num_threads = reinterpret_cast<GetNumThreads>(dlsym(RTLD_DEFAULT, "omp_get_num_threads"));
  return get_num_threads == nullptr ? 1 : get_num_threads();
}

// What each thread of the team runs: its share of the range.
void RunShare(void* data) {
  const auto* job = static_cast<const ParallelJob*>(data);
  const int64_t team = OmpTeamSize(), me = OmpThreadNumber();
  const int64_t begin = job->count * me / team, end = job->count * (me + 1) / team;
  if (begin < end) (*job->body)(begin, end);
}

}  // namespace

void ParallelFor(int64_t count, const std::function<void(int64_t begin, int64_t end)>& body) {
  if (count <= 0) return;
  // GOMP_parallel(fn, data, num_threads, flags) is what `#pragma omp parallel` compiles to with
  // GCC; num_threads 0 takes the calling thread's team size (SetIntraOpThreads).
  using GompParallel = void (*)(void (*)(void*), void*, unsigned, unsigned);
  static const auto gomp_parallel = reinterpret_cast<GompParallel>(dlsym(RTLD_DEFAULT, "GOMP_parallel"));
  const int threads = IntraOpThreads();
  if (gomp_parallel == nullptr || threads <= 1 || count == 1) return body(0, count);
  ParallelJob job{count, &body};
  gomp_parallel(&RunShare, &job, static_cast<unsigned>(std::min<int64_t>(threads, count)), 0);
}

}  // namespace inferd::runtime
