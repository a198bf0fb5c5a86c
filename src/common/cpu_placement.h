// Which CPUs a model's instances run on, and at what CPU priority.
//
// Placement: parameters { key: "cpus" value: { string_value: "2-5" } }
// in the model's config. The instances divide the listed CPUs in order, each taking an equal run
// of them (6 CPUs, 2 instances: 3 each); with more instances than CPUs, they take one CPU each in
// turn. An instance thread pins itself to its run (the OpenMP team it starts inherits the mask)
// and its backend runs a team of that many threads, so a light model listed on cores the heavy
// one is not never waits for the heavy one's threads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inferd {

using CpuList = std::vector<int>;  // ascending, distinct

// Linux's list format, as taskset and cpuset.cpus write it: "0-3,8,10-11".
StatusOr<CpuList> ParseCpuList(std::string_view text);
std::string FormatCpuList(const CpuList& cpus);

// Each instance's CPUs; `cpus` must not be empty and `instances` >= 1.
std::vector<CpuList> SplitAmongInstances(const CpuList& cpus, int instances);

// The calling thread's affinity mask.
CpuList CurrentThreadCpus();
// Restricts the calling thread to `cpus` (threads it starts afterwards inherit it).
Status PinCurrentThread(const CpuList& cpus);

// parameters { key: "nice" value: { string_value: "10" } }: the Linux nice value of a model's
// instance threads, and so of the OpenMP teams they start (Linux keeps it per thread and new
// threads inherit it). A positive value lets the model run only on CPU time that models at 0
// leave; a negative one needs CAP_SYS_NICE. Valid values are -20..19.
StatusOr<int> ParseNice(std::string_view text);
// Sets the calling thread's nice value.
Status SetCurrentThreadNice(int nice);

// parameters { key: "cpu_weight" value: { string_value: "400" } }: a model's share of the CPU on
// cgroup v2's cpu.weight scale (common/cpu_weight_groups.h). "400" -> 400; an error for anything
// but an integer in [1, 10000].
StatusOr<int> ParseCpuWeight(std::string_view text);
// The nice value whose CFS weight relative to nice 0 matches `weight` relative to 100, in -20..19:
// -log(weight / 100) / log(1.25), each nice step being a factor of 1.25 in CFS.
int NiceForCpuWeight(int weight);

}  // namespace inferd
