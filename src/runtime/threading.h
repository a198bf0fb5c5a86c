// Intra-op threads. Debian's oneDNN runs its parallel loops on OpenMP, whose team size is a
// per-thread setting: each model instance thread sets its own, so that instances x threads stays
// within the cores the server was given.
#pragma once

#include <cstdint>
#include <functional>

namespace inferd::runtime {

// Sets the OpenMP team size for parallel regions started by the calling thread. Returns false when
// no OpenMP runtime is loaded (then oneDNN runs sequentially anyway).
bool SetIntraOpThreads(int threads);
// The team size parallel regions started by the calling thread get (1 without OpenMP).
int IntraOpThreads();

// Runs body(begin, end) over [0, count) split into one contiguous range per intra-op thread, on
// the OpenMP team oneDNN uses (libgomp's own entry point, found like omp_set_num_threads): our
// kernels' parallel loops share oneDNN's threads instead of starting a second pool. Runs inline
// with one thread, a small count, or no OpenMP runtime.
void ParallelFor(int64_t count, const std::function<void(int64_t begin, int64_t end)>& body);

}  // namespace inferd::runtime
