// A model's share of the CPU when models compete for it, by control group:
//   parameters { key: "cpu_weight" value: { string_value: "400" } }
// on cgroup v2's cpu.weight scale (1..10000, 100 being what a group gets by default). Under
// contention each group gets CPU time in proportion to its weight, whatever number of threads
// it runs, so a light model weighted above a heavy one is served first while the heavy one takes
// what is left; with idle CPUs nobody is capped.
//
// Each model's instance threads (and the OpenMP teams they start, which the kernel puts in the
// creating thread's group) run in a group of their own, under a group for this process:
//   cgroup v2 (the kernel's default layout; needs a delegated subtree, e.g. systemd's
//   `Delegate=cpu`, or a container given its cgroup read-write):
//     <the process's group>/inferd-PID            the process moves here; +cpu is enabled in the
//                                                 parent's cgroup.subtree_control
//     <the process's group>/inferd-PID/model-M    cgroup.type "threaded", cpu.weight, the instance
//                                                 threads written to cgroup.threads
//   cgroup v1 with the cpu controller on a hierarchy of its own (the hybrid layout):
//     the same folders, cpu.shares = weight x 1024 / 100 (the kernel's own conversion), the
//     threads written to `tasks`.
// Nothing is made until a model asks for a weight. Where no such hierarchy can be managed (none
// mounted, read-only, the cpu controller elsewhere, other processes sharing the group), the
// start-up log says why and a weight falls back to the instance threads' nice value, the same CFS
// weight per thread rather than per group: nice = -log(weight / 100) / log(1.25), since each nice
// step is a factor of 1.25 in CFS.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <string_view>

#include "common/container_resources.h"
#include "common/cpu_placement.h"  // ParseCpuWeight, NiceForCpuWeight
#include "common/mutex.h"
#include "common/status.h"

namespace inferd {

class CpuWeightGroups {
 public:
  // Finds the process's cpu hierarchy (files point at a fake tree in tests) and checks, without
  // changing anything, that it could be managed.
  explicit CpuWeightGroups(const CgroupFiles& files = {});
  ~CpuWeightGroups();
  CpuWeightGroups(const CpuWeightGroups&) = delete;
  CpuWeightGroups& operator=(const CpuWeightGroups&) = delete;

  // Whether weights go to groups (false: the nice fallback).
  bool available() const;
  // One line for the start log: the groups' parent and the layout, or why there are none.
  std::string Describe() const;

  // Moves the calling thread into `model`'s group, made (and the process's) on first use, and
  // sets the group's weight (the latest call's wins: versions of a model share its group). An
  // error leaves the thread where it was; after a failed first setup, available() turns false.
  Status JoinCurrentThread(const std::string& model, int weight);
  // Removes the model's group once no thread is left in it (a busy group stays).
  void Release(const std::string& model);

 private:
  Status SetUpProcessGroup() REQUIRES(mu_);
  std::filesystem::path ModelGroup(const std::string& model) const;
  void RemoveStaleProcessGroups() const;

  int version_ = 0;  // 1 or 2; 0: unavailable
  std::filesystem::path parent_;  // the process's group when it started
  std::filesystem::path own_;     // parent_/inferd-PID
  std::string unavailable_reason_;

  mutable Mutex mu_;
  bool set_up_ GUARDED_BY(mu_) = false;
  std::string setup_error_ GUARDED_BY(mu_);
  std::set<std::string> models_ GUARDED_BY(mu_);
};

// This process's, probed on first use.
CpuWeightGroups& ProcessCpuWeightGroups();

}  // namespace inferd
