// Runs work on a thread of the lowest CPU priority Linux offers (SCHED_IDLE), so that loading a
// model uses only the CPU time serving models leave idle.
//
// Why SCHED_IDLE and not a nice value: model execution runs on OpenMP teams, whose threads meet at
// a barrier after every layer. A load at nice +10 still gets its share of a busy core, and each
// time it holds one of a serving team's cores, the whole team waits at the next barrier: on 2
// cores, a resnet50 reloading every 2 s took mobilenet's p99 from 59 ms to 1.2 s
// (docs/BENCHMARKS.md). A SCHED_IDLE thread runs only when nothing else wants the core and yields
// it at once when a serving thread wakes.
//
// Why a thread of its own: Linux keeps the policy per thread, and threads inherit it from the
// thread that creates them. Lowering a lasting thread (a load thread) would pass it on to every
// instance thread it starts, and an unprivileged thread cannot leave SCHED_IDLE. So each calling
// thread gets a SCHED_IDLE worker of its own (made at its first use, kept until the caller ends),
// which runs the work, and the OpenMP team it starts, while the caller waits.
#pragma once

#include <functional>

namespace inferd {

// Runs `work` on the calling thread's SCHED_IDLE worker when `idle` (at the caller's priority
// otherwise: on the caller itself) and waits for it. Returns whether the work ran at idle
// priority (false too when the policy could not be set).
bool RunAtIdlePriority(bool idle, const std::function<void()>& work);

}  // namespace inferd
