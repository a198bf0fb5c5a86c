// `inferd serve`: flags, start-up, and the SIGTERM drain.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace inferd {

struct ServeFlags {
  std::vector<std::string> model_repositories;
  std::string model_control_mode = "none";
  std::vector<std::string> load_models;
  std::string http_address = "0.0.0.0";
  uint16_t http_port = 8000;
  uint16_t metrics_port = 8002;
  int http_threads = 2;  // 0: one per four cores, at least one
  int threads = 0;  // 0: every core
  uint64_t http_max_body_bytes = 64ull << 20;
  int exit_timeout_secs = 30;
  bool log_verbose = false;
};

void AddServeFlags(CLI::App* command, ServeFlags* flags);
int RunServe(const ServeFlags& flags);

}  // namespace inferd
