#include "metrics/process_metrics.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "metrics/metrics_registry.h"

namespace inferd {

double ProcessCpuSeconds() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
  auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int index = 3; rest >> field; ++index) {
    if (index == 14) utime = std::stod(field);
    if (index == 15) {
      stime = std::stod(field);
      break;
    }
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double ProcessResidentBytes() {
  std::ifstream in("/proc/self/statm");
  long size = 0, resident = 0;
  in >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

void RegisterProcessMetrics(MetricsRegistry* registry) {
  registry->Declare("inferd_process_cpu_seconds_total", MetricsRegistry::Type::kCounter,
                    "User and system CPU time of the inferd process.");
  registry->Declare("inferd_process_resident_memory_bytes", MetricsRegistry::Type::kGauge,
                    "Resident memory of the inferd process.");
  registry->AddGaugeFunction("inferd_process_cpu_seconds_total", {}, ProcessCpuSeconds);
  registry->AddGaugeFunction("inferd_process_resident_memory_bytes", {}, ProcessResidentBytes);
}

}  // namespace inferd
