// `inferd traffic` and `inferd rollout`: traffic between a model's versions and canary rollouts,
// from the command line, over HTTP or gRPC (inferd's own lifecycle routes).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/client_commands.h"

namespace CLI {
class App;
}

namespace inferd {

struct TrafficFlags {
  ConnectionFlags connection;
  std::string model;
  std::string split;                // "1:95,2:5"; "none" clears it
  std::vector<std::string> labels;  // LABEL=VERSION, repeatable; replaces the labels
};

struct RolloutFlags {
  ConnectionFlags connection;
  std::string model;
  int64_t version = 0;  // 0: show the rollout's state
  int64_t baseline = 0;
  std::string steps = "5,20,100";
  double dwell_seconds = 60;
  double max_error_rate = 0.01;
  double max_p99_ratio = 1.5;
  uint64_t min_requests = 20;
  std::optional<int64_t> retention_seconds;
  // The agreement guard: unset min_agreement, none.
  std::optional<double> min_agreement;
  uint32_t mirror_percent = 10;
  std::string agreement_compare = "close";
  double agreement_tolerance = 1e-4;
  bool rollback = false;
  bool watch = false;  // print the state every second until the rollout ends
};

void AddTrafficFlags(CLI::App* command, TrafficFlags* flags);
void AddRolloutFlags(CLI::App* command, RolloutFlags* flags);
int RunTraffic(const TrafficFlags& flags);
int RunRollout(const RolloutFlags& flags);

}  // namespace inferd
