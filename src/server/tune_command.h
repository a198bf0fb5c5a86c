// `inferd tune`: Triton Model Analyzer's job, built in. For one model of a local repository it
// launches its own `inferd serve` (this binary, loopback ports, explicit control mode) on a copy
// of the model's folder (version folders linked, not copied), and for each candidate config
// (instance count x max_batch_size x max_queue_delay, the intra-op threads following from the
// instance count) writes config.pbtxt, reloads the model and sweeps closed-loop concurrency with
// the bench machinery until p99 passes the latency target. It prints throughput and p99 per
// config and writes the config that serves the most inferences per second within the target.
#pragma once

#include <string>
#include <vector>

#include "server/bench_command.h"

namespace CLI {
class App;
}

namespace inferd {

struct TuneFlags {
  std::string repository;  // the model repository holding the model
  std::string model;
  double latency_target_ms = 0;
  int max_instances = 2;
  std::vector<int> batch_sizes{1, 4, 8, 16, 32};  // candidate max_batch_size values (capped by the model's)
  std::vector<int64_t> delays_us;                 // candidate max_queue_delay_microseconds; default 0 and target/10
  int max_concurrency = 64;
  double seconds_per_level = 2;
  std::vector<std::string> shapes;
  std::string out;  // where the best config.pbtxt goes; default MODEL.tuned.pbtxt in the working directory
};

void AddTuneFlags(CLI::App* command, TuneFlags* flags);
int RunTune(const TuneFlags& flags);

}  // namespace inferd
