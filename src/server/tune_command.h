// `inferd tune`: Triton Model Analyzer's job, built in. It tunes one model on a server: its own
// `inferd serve` (this binary on loopback ports, explicit control mode, the repository read as it
// is) with --model-repository, or a running server with -u. It reads the model's config from the
// server, then for each candidate (instance count x max_batch_size x max_queue_delay, then the
// intra-op threads of the best) reloads the model with that config through the load API's
// "config" parameter (nothing is written to the repository) and sweeps closed-loop concurrency
// with the bench machinery until p99 passes the latency target. It prints throughput and p99 per
// config and writes the config that serves the most inferences per second within the target. A
// running server gets the config it served back at the end.
#pragma once

#include <string>
#include <vector>

#include "server/bench_command.h"
#include "server/client_commands.h"

namespace CLI {
class App;
}

namespace inferd {

struct TuneFlags {
  std::string repository;       // local: the model repository holding the model...
  ConnectionFlags connection;   // ...or the server to tune it on (-u, -i)
  std::string model;
  double latency_target_ms = 0;
  int max_instances = 2;
  std::vector<int> batch_sizes{1, 4, 8, 16, 32};  // candidate max_batch_size values (capped by the model's)
  std::vector<int64_t> delays_us;                 // candidate max_queue_delay_microseconds; default 0 and target/10
  int max_threads = 0;  // intra_op_thread_count candidates 1, 2, 4, ... up to this; 0: this machine's CPUs
  int max_concurrency = 64;
  double seconds_per_level = 2;
  std::vector<std::string> shapes;
  std::string out;  // where the best config.pbtxt goes; default MODEL.tuned.pbtxt in the working directory
};

void AddTuneFlags(CLI::App* command, TuneFlags* flags);
int RunTune(const TuneFlags& flags);

}  // namespace inferd
