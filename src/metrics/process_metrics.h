// Process CPU time, resident memory, threads and open file descriptors, read from /proc/self at
// scrape time.
#pragma once

namespace inferd {

class MetricsRegistry;

double ProcessCpuSeconds();
double ProcessResidentBytes();
double ProcessThreads();
double ProcessOpenFds();  // the entries of /proc/self/fd (the directory's own included)
void RegisterProcessMetrics(MetricsRegistry* registry);

}  // namespace inferd
