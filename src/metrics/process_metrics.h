// Process CPU time, resident memory, threads, open file descriptors and client connections, read
// from /proc at scrape time.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace inferd {

class MetricsRegistry;

double ProcessCpuSeconds();
double ProcessResidentBytes();
double ProcessThreads();
double ProcessOpenFds();  // the entries of /proc/self/fd (the directory's own included)
void RegisterProcessMetrics(MetricsRegistry* registry);
// The container's limits as the process sees them (common/container_resources.h): CPUs always;
// the memory limit and working set where a cgroup memory controller is found. Part of the above.
void RegisterContainerMetrics(MetricsRegistry* registry);

// TCP connections in state ESTABLISHED whose local port is `port` (IPv4 and IPv6, this network
// namespace: /proc/net/tcp{,6}). The kernel's table rather than counters in the frontends, because
// gRPC's C++ server does not expose its connections.
double EstablishedConnections(int port);
// inferd_open_connections{listener}, one series per (listener name, bound port).
void RegisterConnectionMetrics(MetricsRegistry* registry, const std::vector<std::pair<std::string, int>>& listeners);

}  // namespace inferd
