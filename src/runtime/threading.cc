#include "runtime/threading.h"

#include <dlfcn.h>

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

}  // namespace inferd::runtime
