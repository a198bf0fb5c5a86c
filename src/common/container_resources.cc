#include "common/container_resources.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "common/option_list.h"

namespace inferd {
namespace fs = std::filesystem;

namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

// A cgroup file's number (they end in a newline).
std::optional<int64_t> ParseInt(std::string_view text) {
  int64_t value = 0;
  if (!ParseWholeNumber(Trim(text), &value)) return std::nullopt;
  return value;
}

bool HasItem(std::string_view comma_list, std::string_view item) {
  for (std::string_view part : SplitOn(comma_list, ',')) {
    if (part == item) return true;
  }
  return false;
}

// A controller's hierarchy: where it is mounted and which of its groups is mounted there.
struct Hierarchy {
  int version = 0;  // 0: not found
  fs::path mount_point;
  std::string mount_root;
};

// /proc/self/mountinfo lines: "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE
// SOURCE SUPER_OPTIONS". v1 hierarchies name their controllers in SUPER_OPTIONS.
Hierarchy FindHierarchy(const std::string& mountinfo, std::string_view controller) {
  Hierarchy v2;
  std::istringstream lines(mountinfo);
  for (std::string line; std::getline(lines, line);) {
    const std::vector<std::string_view> fields = SplitOn(line, ' ');
    const auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 4) continue;
    const std::string_view fstype = dash[1], super_options = dash[3];
    if (fstype == "cgroup" && HasItem(super_options, controller)) {
      return {1, fs::path(std::string(fields[4])), std::string(fields[3])};
    }
    if (fstype == "cgroup2" && v2.version == 0) v2 = {2, fs::path(std::string(fields[4])), std::string(fields[3])};
  }
  return v2;  // hybrid systems keep the controllers on v1, found above when they are there
}

// The process's group in a hierarchy, from /proc/self/cgroup lines "ID:CONTROLLERS:PATH" (v2's
// line is "0::PATH").
std::optional<std::string> GroupPath(const std::string& proc_cgroup, int version, std::string_view controller) {
  std::istringstream lines(proc_cgroup);
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string_view controllers = std::string_view(line).substr(first + 1, second - first - 1);
    const bool match = version == 2 ? controllers.empty() && line.compare(0, first, "0") == 0
                                    : HasItem(controllers, controller);
    if (match) return line.substr(second + 1);
  }
  return std::nullopt;
}

}  // namespace

std::string ReadSmallFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<CgroupDir> FindCgroupDir(const CgroupFiles& files, std::string_view controller) {
  const Hierarchy hierarchy = FindHierarchy(ReadSmallFile(files.proc_self_mountinfo), controller);
  if (hierarchy.version == 0) return std::nullopt;
  const fs::path mount = (files.root.empty() ? fs::path("/") : files.root) / hierarchy.mount_point.relative_path();
  std::string path = GroupPath(ReadSmallFile(files.proc_self_cgroup), hierarchy.version, controller).value_or("/");
  if (hierarchy.mount_root != "/" && path.rfind(hierarchy.mount_root, 0) == 0) path = path.substr(hierarchy.mount_root.size());
  fs::path dir = mount / fs::path(path).relative_path();
  std::error_code error;
  if (!fs::is_directory(dir, error)) dir = mount;  // the host's path, seen from inside a container
  return CgroupDir{dir.lexically_normal(), mount.lexically_normal(), hierarchy.version};
}

namespace {

// Reads `limit_of(dir)` for the group and each ancestor up to the mount; the smallest wins.
template <typename T, typename LimitOf>
std::optional<T> TightestLimit(const CgroupDir& group, LimitOf limit_of, fs::path* where) {
  std::optional<T> tightest;
  for (fs::path dir = group.dir;; dir = dir.parent_path()) {
    if (const std::optional<T> limit = limit_of(dir); limit && (!tightest || *limit < *tightest)) {
      tightest = limit;
      *where = dir;
    }
    if (dir == group.mount || !dir.has_relative_path() || dir.parent_path() == dir) return tightest;
  }
}

int AffinityCpus(int online) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return online;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace

std::optional<double> ParseCpuMax(std::string_view text) {
  const std::vector<std::string_view> parts = SplitOn(Trim(text), ' ');
  if (parts.size() != 2 || parts[0] == "max") return std::nullopt;
  const auto quota = ParseInt(parts[0]), period = ParseInt(parts[1]);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

std::optional<double> ParseCfsQuota(std::string_view quota_us, std::string_view period_us) {
  const auto quota = ParseInt(quota_us), period = ParseInt(period_us);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

std::optional<int64_t> ParseMemoryLimit(std::string_view text) {
  const auto limit = ParseInt(text);
  // v1 writes "no limit" as LONG_MAX rounded down to a page; nothing real comes near 2^60 bytes.
  if (!limit || *limit <= 0 || *limit >= (int64_t{1} << 60)) return std::nullopt;
  return limit;
}

std::optional<int64_t> MemoryStatValue(std::string_view memory_stat, std::string_view key) {
  for (std::string_view line : SplitOn(memory_stat, '\n')) {
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return ParseInt(line.substr(key.size() + 1));
    }
  }
  return std::nullopt;
}

ContainerResources DetectContainerResources(const CgroupFiles& files) {
  ContainerResources resources;
  resources.online_cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // A fake tree (tests) describes limits, not this process: the real affinity mask would leak in.
  resources.affinity_cpus = files.root.empty() ? AffinityCpus(resources.online_cpus) : resources.online_cpus;
  if (const auto cpu = FindCgroupDir(files, "cpu")) {
    resources.cpu_quota = TightestLimit<double>(*cpu, [&](const fs::path& dir) {
      return cpu->version == 2 ? ParseCpuMax(ReadSmallFile(dir / "cpu.max"))
                               : ParseCfsQuota(ReadSmallFile(dir / "cpu.cfs_quota_us"), ReadSmallFile(dir / "cpu.cfs_period_us"));
    }, &resources.cpu_quota_file);
    if (resources.cpu_quota) resources.cpu_quota_file /= cpu->version == 2 ? "cpu.max" : "cpu.cfs_quota_us";
  }
  if (const auto memory = FindCgroupDir(files, "memory")) {
    resources.memory_cgroup = memory->dir;
    resources.memory_cgroup_version = memory->version;
    const char* limit_file = memory->version == 2 ? "memory.max" : "memory.limit_in_bytes";
    resources.memory_limit_bytes = TightestLimit<int64_t>(*memory, [&](const fs::path& dir) {
      return ParseMemoryLimit(ReadSmallFile(dir / limit_file));
    }, &resources.memory_limit_file);
    if (resources.memory_limit_bytes) resources.memory_limit_file /= limit_file;
  }
  return resources;
}

int ContainerResources::AvailableCpus() const {
  int cpus = std::min(online_cpus, affinity_cpus);
  if (cpu_quota) cpus = std::min(cpus, static_cast<int>(std::ceil(*cpu_quota - 1e-9)));
  return std::max(1, cpus);
}

std::string ContainerResources::Describe() const {
  std::ostringstream text;
  text << AvailableCpus() << " CPUs available (" << online_cpus << " online, " << affinity_cpus << " in the affinity mask";
  if (cpu_quota) {
    text << ", cgroup quota " << *cpu_quota << " CPUs from " << cpu_quota_file.string();
  } else {
    text << ", no cgroup CPU quota";
  }
  text << "); memory: ";
  if (memory_limit_bytes) {
    text << "cgroup limit " << *memory_limit_bytes / (1 << 20) << " MiB from " << memory_limit_file.string();
  } else {
    text << "no cgroup limit";
  }
  return text.str();
}

Status SetOomScoreAdjustment(int value) {
  if (value < -1000 || value > 1000) {
    return Status::InvalidArgument("--oom-score-adj " + std::to_string(value) + ": must be within -1000..1000");
  }
  std::ofstream out("/proc/self/oom_score_adj");
  out << value << '\n';
  out.flush();
  if (!out) {
    return Status::FailedPrecondition("--oom-score-adj " + std::to_string(value) +
                                      ": /proc/self/oom_score_adj refused it (lowering it needs CAP_SYS_RESOURCE)");
  }
  return Status::Ok();
}

const ContainerResources& ProcessResources() {
  static const ContainerResources resources = DetectContainerResources();
  return resources;
}

std::optional<int64_t> MemoryWorkingSetBytes(const ContainerResources& resources) {
  if (resources.memory_cgroup_version == 0) return std::nullopt;
  const bool v2 = resources.memory_cgroup_version == 2;
  const auto usage = ParseInt(ReadSmallFile(resources.memory_cgroup / (v2 ? "memory.current" : "memory.usage_in_bytes")));
  if (!usage) return std::nullopt;
  const std::string stat = ReadSmallFile(resources.memory_cgroup / "memory.stat");
  const int64_t inactive_file = MemoryStatValue(stat, v2 ? "inactive_file" : "total_inactive_file").value_or(0);
  return std::max<int64_t>(0, *usage - inactive_file);
}

}  // namespace inferd
