#include "common/cpu_placement.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "common/option_list.h"  // ParseWholeNumber

namespace inferd {
namespace {

StatusOr<int> ParseCpu(std::string_view text, std::string_view whole) {
  int cpu = -1;
  if (!ParseWholeNumber(text, &cpu) || cpu < 0 || cpu >= CPU_SETSIZE) {
    return Status::InvalidArgument("'" + std::string(whole) + "' is not a CPU list like 0-3,8 (CPUs 0.." +
                                   std::to_string(CPU_SETSIZE - 1) + ")");
  }
  return cpu;
}

}  // namespace

StatusOr<CpuList> ParseCpuList(std::string_view text) {
  CpuList cpus;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const size_t dash = item.find('-');
    ASSIGN_OR_RETURN(int first, ParseCpu(item.substr(0, dash), text));
    int last = first;
    if (dash != std::string_view::npos) {
      ASSIGN_OR_RETURN(last, ParseCpu(item.substr(dash + 1), text));
      if (last < first) return Status::InvalidArgument("'" + std::string(text) + "': range " + std::string(item) + " runs backwards");
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    start = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  if (std::adjacent_find(cpus.begin(), cpus.end()) != cpus.end()) {
    return Status::InvalidArgument("'" + std::string(text) + "' names a CPU twice");
  }
  return cpus;
}

std::string FormatCpuList(const CpuList& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (j > i) text += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

std::vector<CpuList> SplitAmongInstances(const CpuList& cpus, int instances) {
  std::vector<CpuList> split(static_cast<size_t>(std::max(1, instances)));
  if (cpus.empty()) return split;
  const size_t each = std::max<size_t>(1, cpus.size() / split.size());
  for (size_t instance = 0; instance < split.size(); ++instance) {
    for (size_t k = 0; k < each; ++k) split[instance].push_back(cpus[(instance * each + k) % cpus.size()]);
    std::sort(split[instance].begin(), split[instance].end());
  }
  return split;
}

CpuList CurrentThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CpuList cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

Status PinCurrentThread(const CpuList& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  if (const int error = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); error != 0) {
    return Status::FailedPrecondition("cannot run on CPUs " + FormatCpuList(cpus) + ": " + std::strerror(error));
  }
  return Status::Ok();
}

StatusOr<int> ParseNice(std::string_view text) {
  int nice = 0;
  if (!ParseWholeNumber(text, &nice) || nice < -20 || nice > 19) {
    return Status::InvalidArgument("'" + std::string(text) + "' is not a nice value in -20..19");
  }
  return nice;
}

StatusOr<int> ParseCpuWeight(std::string_view text) {
  int weight = 0;
  if (!ParseWholeNumber(text, &weight) || weight < 1 || weight > 10000) {
    return Status::InvalidArgument("'cpu_weight' needs an integer from 1 to 10000 (100: an even share), got '" +
                                   std::string(text) + "'");
  }
  return weight;
}

int NiceForCpuWeight(int weight) {
  const double nice = -std::log(static_cast<double>(std::max(weight, 1)) / 100.0) / std::log(1.25);
  return std::clamp(static_cast<int>(std::lround(nice)), -20, 19);
}

Status SetCurrentThreadNice(int nice) {
  // PRIO_PROCESS with a thread id sets that one thread's value on Linux.
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  if (::setpriority(PRIO_PROCESS, tid, nice) != 0) {
    return Status::FailedPrecondition("cannot set nice " + std::to_string(nice) + ": " + std::strerror(errno) +
                                      (errno == EACCES || errno == EPERM ? " (a negative value needs CAP_SYS_NICE)" : ""));
  }
  return Status::Ok();
}

}  // namespace inferd
