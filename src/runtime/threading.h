// Intra-op threads. Debian's oneDNN runs its parallel loops on OpenMP, whose team size is a
// per-thread setting: each model instance thread sets its own, so that instances x threads stays
// within the cores the server was given.
#pragma once

namespace inferd::runtime {

// Sets the OpenMP team size for parallel regions started by the calling thread. Returns false when
// no OpenMP runtime is loaded (then oneDNN runs sequentially anyway).
bool SetIntraOpThreads(int threads);
// The team size parallel regions started by the calling thread get (1 without OpenMP).
int IntraOpThreads();

}  // namespace inferd::runtime
