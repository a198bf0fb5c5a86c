// What the process may use of the machine when it runs in a container: CPUs from its cgroup's
// quota and its affinity mask, memory from its cgroup's limit. Kubernetes expresses a pod's
// `resources.limits` this way; a pod limited to 2 CPUs on a 64-core node must size its threads for
// 2 (hardware_concurrency() says 64), and a model load that would pass the memory limit must be
// refused before the kernel's OOM killer ends every model in the process.
//
// Both cgroup layouts are read: v2 (one unified hierarchy: cpu.max, memory.max) and v1 (a
// hierarchy per controller: cpu.cfs_quota_us / cpu.cfs_period_us, memory.limit_in_bytes), and the
// hybrid of the two, where the controllers stay on v1. Mount points come from
// /proc/self/mountinfo, the process's groups from /proc/self/cgroup. A container without its own
// cgroup namespace sees the host's path of its group while its group is mounted at the root, so a
// path that does not exist under the mount falls back to the mount itself. Limits of the
// ancestors count too: the tightest one up to the mount applies.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace inferd {

// Where the files are, so that tests can lay out a fake tree.
struct CgroupFiles {
  std::filesystem::path proc_self_cgroup = "/proc/self/cgroup";
  std::filesystem::path proc_self_mountinfo = "/proc/self/mountinfo";
  std::filesystem::path root;  // prefixed to every mount point (empty: the real root)
};

struct ContainerResources {
  int online_cpus = 1;    // hardware_concurrency()
  int affinity_cpus = 1;  // CPUs in the affinity mask (taskset, a cpuset cgroup, Kubernetes' static CPU manager)
  std::optional<double> cpu_quota;  // CPUs' worth of time per period that the cgroup allows
  std::filesystem::path cpu_quota_file;
  std::optional<int64_t> memory_limit_bytes;
  std::filesystem::path memory_limit_file;
  std::filesystem::path memory_cgroup;  // the group whose usage counts against the limit
  int memory_cgroup_version = 0;        // 1 or 2; 0: no memory controller found

  // min(affinity, quota rounded up), at least 1: the threads worth starting.
  int AvailableCpus() const;
  // One line for the start log: what was detected and where.
  std::string Describe() const;
};

ContainerResources DetectContainerResources(const CgroupFiles& files = {});

// This process's, detected on first use and kept: limits do not change under a running pod.
const ContainerResources& ProcessResources();
inline int AvailableCpus() { return ProcessResources().AvailableCpus(); }

// The group's memory in use that the kernel would not reclaim before OOM-killing: usage minus
// inactive file cache, the working set by which the kubelet judges a pod. nullopt without a
// memory controller.
std::optional<int64_t> MemoryWorkingSetBytes(const ContainerResources& resources);

// Writes /proc/self/oom_score_adj (-1000..1000): how readily the kernel's OOM killer picks this
// process. Critical servers lower it (which needs CAP_SYS_RESOURCE), batch work raises it, as a
// pod's QoS class does for its containers.
Status SetOomScoreAdjustment(int value);

// A small kernel file's text (a cgroup or /proc file); empty when it cannot be read.
std::string ReadSmallFile(const std::filesystem::path& path);

// The directory of the process's group in the hierarchy that holds `controller` ("cpu",
// "memory"): a v1 hierarchy naming it, else the v2 one (whose cgroup.controllers may still lack
// it). nullopt when no cgroup file system is mounted.
struct CgroupDir {
  std::filesystem::path dir;    // the process's group
  std::filesystem::path mount;  // where its hierarchy is mounted
  int version = 0;              // 1 or 2
};
std::optional<CgroupDir> FindCgroupDir(const CgroupFiles& files, std::string_view controller);

// The parsers behind it.
// cgroup v2 cpu.max: "QUOTA PERIOD" (microseconds) or "max PERIOD" (no limit).
std::optional<double> ParseCpuMax(std::string_view text);
// cgroup v1: cpu.cfs_quota_us (-1: no limit) over cpu.cfs_period_us.
std::optional<double> ParseCfsQuota(std::string_view quota_us, std::string_view period_us);
// memory.max ("max") or memory.limit_in_bytes (v1 writes "no limit" as a number near 2^63).
std::optional<int64_t> ParseMemoryLimit(std::string_view text);
// The value of `key` in a memory.stat file ("key value" lines).
std::optional<int64_t> MemoryStatValue(std::string_view memory_stat, std::string_view key);

}  // namespace inferd
