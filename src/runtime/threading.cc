#include "runtime/threading.h"

#include <dlfcn.h>

#include <algorithm>

namespace inferd::runtime {
namespace {

// A function of the OpenMP runtime that libdnnl itself loaded (libgomp on Debian), looked up
// instead of linked: a clang build would otherwise bring LLVM's libomp as a second runtime.
// nullptr when none is loaded.
template <typename Function>
Function OpenMp(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_DEFAULT, name));
}

struct ParallelJob {
  int64_t count;
  const std::function<void(int64_t, int64_t)>* body;
};

// What each thread of the team runs: its share of the range.
void RunShare(void* data) {
  static const auto thread_number = OpenMp<int (*)()>("omp_get_thread_num");
  static const auto team_size = OpenMp<int (*)()>("omp_get_num_threads");
  const auto* job = static_cast<const ParallelJob*>(data);
  const int64_t team = team_size ? team_size() : 1, me = thread_number ? thread_number() : 0;
  const int64_t begin = job->count * me / team, end = job->count * (me + 1) / team;
  if (begin < end) (*job->body)(begin, end);
}

}  // namespace

bool SetIntraOpThreads(int threads) {
  static const auto set_num_threads = OpenMp<void (*)(int)>("omp_set_num_threads");
  if (set_num_threads == nullptr) return false;
  set_num_threads(threads < 1 ? 1 : threads);
  return true;
}

int IntraOpThreads() {
  static const auto get_max_threads = OpenMp<int (*)()>("omp_get_max_threads");
  return get_max_threads == nullptr ? 1 : get_max_threads();
}

void ParallelFor(int64_t count, const std::function<void(int64_t begin, int64_t end)>& body) {
  if (count <= 0) return;
  // GOMP_parallel(fn, data, num_threads, flags) is what `#pragma omp parallel` compiles to with
  // GCC; the team is the calling thread's size (SetIntraOpThreads), no larger than the count.
  static const auto gomp_parallel = OpenMp<void (*)(void (*)(void*), void*, unsigned, unsigned)>("GOMP_parallel");
  const int threads = IntraOpThreads();
  if (gomp_parallel == nullptr || threads <= 1 || count == 1) return body(0, count);
  ParallelJob job{count, &body};
  gomp_parallel(&RunShare, &job, static_cast<unsigned>(std::min<int64_t>(threads, count)), 0);
}

}  // namespace inferd::runtime
