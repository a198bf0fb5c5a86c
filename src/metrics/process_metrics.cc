#include "metrics/process_metrics.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/container_resources.h"
#include "metrics/metrics_registry.h"

namespace inferd {
namespace {

// Fields of /proc/self/stat, numbered as proc(5) numbers them (1: pid); empty when unreadable.
std::vector<std::string> StatFields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  // The command name (field 2) is parenthesised and may hold spaces: split after its ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) return {};
  std::vector<std::string> fields{"", "", ""};  // 0 (unused), pid, comm
  std::istringstream rest(line.substr(close + 2));
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;
}

double StatNumber(const std::vector<std::string>& fields, size_t index) {
  return index < fields.size() ? std::stod(fields[index]) : 0;
}

}  // namespace

double ProcessCpuSeconds() {
  const std::vector<std::string> fields = StatFields();
  // utime and stime, in clock ticks.
  return (StatNumber(fields, 14) + StatNumber(fields, 15)) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double ProcessResidentBytes() {
  std::ifstream in("/proc/self/statm");
  long size = 0, resident = 0;
  in >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double ProcessThreads() { return StatNumber(StatFields(), 20); }

double ProcessOpenFds() {
  std::error_code error;
  double count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end; it.increment(error)) {
    ++count;
  }
  return count;
}

namespace {

// Lines of /proc/net/tcp: "sl local_address rem_address st ...", addresses as HEXIP:HEXPORT and
// the state in hex (01: ESTABLISHED).
double CountEstablished(const char* table, int port) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // the header
  double count = 0;
  for (std::string slot, local, remote, state; in >> slot >> local >> remote >> state; in.ignore(1 << 20, '\n')) {
    const auto colon = local.rfind(':');
    if (colon == std::string::npos || state != "01") continue;
    if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) ++count;
  }
  return count;
}

}  // namespace

double EstablishedConnections(int port) {
  return CountEstablished("/proc/net/tcp", port) + CountEstablished("/proc/net/tcp6", port);
}

void RegisterConnectionMetrics(MetricsRegistry* registry, const std::vector<std::pair<std::string, int>>& listeners) {
  registry->Declare("inferd_open_connections", MetricsRegistry::Type::kGauge,
                    "Client connections open on a listener (http, grpc, metrics), from the kernel's TCP table.");
  for (const auto& listener : listeners) {
    const int port = listener.second;  // a copy: clang's lambdas cannot capture structured bindings
    registry->AddScrapedValue("inferd_open_connections", {{"listener", listener.first}},
                              [port] { return EstablishedConnections(port); });
  }
}

void RegisterProcessMetrics(MetricsRegistry* registry) {
  registry->Declare("inferd_process_cpu_seconds_total", MetricsRegistry::Type::kCounter,
                    "User and system CPU time of the inferd process.");
  registry->Declare("inferd_process_resident_memory_bytes", MetricsRegistry::Type::kGauge,
                    "Resident memory of the inferd process.");
  registry->Declare("inferd_process_threads", MetricsRegistry::Type::kGauge, "Threads of the inferd process.");
  registry->Declare("inferd_process_open_fds", MetricsRegistry::Type::kGauge,
                    "Open file descriptors of the inferd process: client connections, model files, pipes.");
  registry->AddScrapedValue("inferd_process_cpu_seconds_total", {}, ProcessCpuSeconds);
  registry->AddScrapedValue("inferd_process_resident_memory_bytes", {}, ProcessResidentBytes);
  registry->AddScrapedValue("inferd_process_threads", {}, ProcessThreads);
  registry->AddScrapedValue("inferd_process_open_fds", {}, ProcessOpenFds);
  RegisterContainerMetrics(registry);
}

void RegisterContainerMetrics(MetricsRegistry* registry) {
  const ContainerResources& resources = ProcessResources();
  registry->Declare("inferd_container_cpus", MetricsRegistry::Type::kGauge,
                    "CPUs the process sizes its threads for: the cgroup CPU quota rounded up, the affinity mask and "
                    "the online CPUs, whichever is least.");
  registry->AddScrapedValue("inferd_container_cpus", {}, [&resources] { return static_cast<double>(resources.AvailableCpus()); });
  // Declared always, so that dashboards and docs see one set of families; a series only where the
  // value exists (no cgroup limit, or no memory controller: none).
  registry->Declare("inferd_container_memory_limit_bytes", MetricsRegistry::Type::kGauge,
                    "The cgroup memory limit (the tightest of the process's group and its ancestors).");
  registry->Declare("inferd_container_memory_working_set_bytes", MetricsRegistry::Type::kGauge,
                    "The cgroup's memory use less inactive file cache: the working set the kubelet and the OOM "
                    "killer judge.");
  if (resources.memory_limit_bytes) {
    registry->AddScrapedValue("inferd_container_memory_limit_bytes", {},
                              [&resources] { return static_cast<double>(*resources.memory_limit_bytes); });
  }
  if (resources.memory_cgroup_version != 0) {
    registry->AddScrapedValue("inferd_container_memory_working_set_bytes", {}, [&resources] {
      return static_cast<double>(MemoryWorkingSetBytes(resources).value_or(0));
    });
  }
}

}  // namespace inferd
