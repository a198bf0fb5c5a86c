// `inferd serve`: flags, start-up, and the SIGTERM drain.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace inferd {

struct ServeFlags {
  std::vector<std::string> model_repositories;
  std::string model_control_mode = "none";
  int repository_poll_secs = 15;
  int model_load_threads = 2;
  std::string model_load_priority = "idle";
  std::vector<std::string> load_models;
  bool strict_readiness = true;
  bool allow_client_shm = false;  // Triton's --allow-client-shm
  uint64_t cache_size = 0;        // the response cache's bytes; 0: none
  std::string http_address = "0.0.0.0";
  uint16_t http_port = 8000;
  uint16_t metrics_port = 8002;
  int http_threads = 2;  // 0: one per four cores, at least one
  int threads = 0;       // 0: every core
  uint64_t http_max_body_bytes = 64ull << 20;
  bool allow_grpc = true;
  std::string grpc_address = "0.0.0.0";
  uint16_t grpc_port = 8001;
  int grpc_threads = 0;  // 0: one per eight cores, at least one
  int grpc_max_message_bytes = 64 << 20;
  int grpc_keepalive_time_ms = 7'200'000;
  int grpc_keepalive_timeout_ms = 20'000;
  bool grpc_keepalive_permit_without_calls = false;
  int grpc_http2_max_pings_without_data = 2;
  int grpc_http2_min_recv_ping_interval_ms = 300'000;
  int grpc_http2_max_ping_strikes = 2;
  int exit_timeout_secs = 30;
  int drain_delay_secs = 0;  // on SIGTERM: not ready but serving, this long, before the drain
  std::optional<int> oom_score_adj;  // written to /proc/self/oom_score_adj at start
  double memory_limit_fraction = 0.9;  // of the cgroup's memory limit that model loads may fill; 0: no check
  int prediction_horizon_secs = 10;
  int prediction_period_secs = 0;
  int alert_window_secs = 120;
  int alert_min_secs = 30;
  int alert_cool_down_secs = 60;
  bool log_verbose = false;
};

void AddServeFlags(CLI::App* command, ServeFlags* flags);
int RunServe(const ServeFlags& flags);

}  // namespace inferd
