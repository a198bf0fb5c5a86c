// Runs work on a thread of lower CPU priority (a higher nice value), so that loading a model
// yields the cores to the models serving requests.
//
// Why a thread of its own: Linux keeps the nice value per thread, and threads inherit it from the
// thread that creates them. Lowering the priority of a lasting thread (a load thread) would pass
// it on to every instance thread it starts, and without CAP_SYS_NICE nobody can raise it back. A
// thread made for the work and joined after it takes its priority (and the OpenMP team it starts,
// which libgomp keeps per thread) with it.
#pragma once

#include <functional>

namespace inferd {

// Runs `work` on a new thread whose nice value is `nice_increment` above the caller's, and waits
// for it. With an increment of 0, or when the priority cannot be changed, it still runs (at the
// caller's priority). Returns whether the priority was lowered.
bool RunAtLowerPriority(int nice_increment, const std::function<void()>& work);

}  // namespace inferd
