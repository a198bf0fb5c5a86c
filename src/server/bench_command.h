// `inferd bench`: a load generator in the spirit of Triton's perf_analyzer. Closed loop (a sweep
// of concurrency levels, each a set of threads sending back to back) or open loop (requests at
// Poisson-distributed times at a given rate, latency counted from the intended send time so a
// slow server cannot hide queueing). Each level warms up, then measures windows until three in a
// row agree on throughput within 10% (or a window limit), and reports throughput, latency
// percentiles, errors, and the server's own queue/compute split from the model's statistics.
// A rate schedule runs one trace of phases instead of levels, and waits for every answer.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "server/client_commands.h"

namespace inferd {

struct BenchFlags {
  ConnectionFlags connection;
  std::string model;
  int64_t version = 0;
  std::string concurrency = "1";  // N, or FROM:TO:xFACTOR (1:64:x2 = 1,2,4,...,64)
  double request_rate = 0;        // > 0: open loop at this many requests per second
  // "RATE:SECONDS,...": one open-loop trace whose rate changes phase by phase (a burst, a ramp);
  // one result row per phase, each request counted in the phase it was sent in.
  std::string rate_schedule;
  double duration_s = 0;          // > 0: one measurement of this length per level, no stability search
  int window_ms = 2000;
  int max_windows = 10;
  int warmup_ms = 1000;
  int64_t batch_size = 1;
  uint32_t priority = 0;  // the requests' priority level (0: the model's default)
  std::vector<std::string> shapes;
  std::string input_data = "random";  // random | zero | FILE.npy (single-input models) or DIR/NAME.npy
  std::string format = "table";       // table | csv | json
  bool json_tensors = false;
  bool async = false;  // closed loop through asynchronous calls instead of a thread per request in flight
  // "system": inputs and outputs travel through one shared-memory region registered with the
  // server (perf_analyzer's --shared-memory system) instead of the messages.
  std::string shared_memory = "none";
  bool progress = true;  // a line per measurement window on stderr
};

struct BenchResult {
  std::string mode;  // "concurrency", "rate" or "phase_rate"
  double level = 0;
  double throughput = 0;  // inferences per second (requests x batch size)
  double p50_ms = 0, p90_ms = 0, p95_ms = 0, p99_ms = 0, avg_ms = 0;
  int64_t requests = 0, errors = 0;
  double server_queue_us = -1, server_compute_us = -1;  // per request; -1 when not available
  bool stable = false;
};

void AddBenchFlags(CLI::App* command, BenchFlags* flags);
int RunBench(const BenchFlags& flags);

// Closed-loop levels (flags.concurrency is ignored) against `client`, measured as `inferd bench`
// does, for other commands (`inferd tune`). `keep_going(result)` after each level: false stops
// the sweep.
StatusOr<std::vector<BenchResult>> MeasureConcurrencies(const BenchFlags& flags, client::Client* client,
                                                        const std::vector<double>& levels,
                                                        const std::function<bool(const BenchResult&)>& keep_going);

}  // namespace inferd
