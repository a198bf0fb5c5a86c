// Process CPU time and resident memory, read from /proc/self at scrape time.
#pragma once

namespace inferd {

class MetricsRegistry;

double ProcessCpuSeconds();
double ProcessResidentBytes();
void RegisterProcessMetrics(MetricsRegistry* registry);

}  // namespace inferd
