#include "server/serve_command.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "common/container_resources.h"
#include "common/cpu_weight_groups.h"
#include "common/stop_signals.h"
#include "core/inference_server.h"
#include "frontends/grpc/grpc_server.h"
#include "frontends/http/http_server.h"
#include "pipeline/grpc_pool.h"
#include "frontends/http/kserve_routes.h"
#include "frontends/http/tfserving_routes.h"
#include "metrics/process_metrics.h"

namespace inferd {

namespace {

// Names as Triton's, so deployment manifests carry over; times are in milliseconds.
void AddGrpcFlags(CLI::App* command, ServeFlags* flags) {
  command->add_option("--allow-grpc", flags->allow_grpc, "Serve the KServe v2 gRPC API (true/false)")
      ->capture_default_str()
      ->envname("INFERD_ALLOW_GRPC");
  command->add_option("--grpc-address", flags->grpc_address, "Address the gRPC port binds to")
      ->capture_default_str()
      ->envname("INFERD_GRPC_ADDRESS");
  command
      ->add_option("--grpc-port", flags->grpc_port,
                   "KServe v2 gRPC port (inference.GRPCInferenceService, "
                   "grpc.health.v1.Health)")
      ->capture_default_str()
      ->envname("INFERD_GRPC_PORT");
  command
      ->add_option("--grpc-threads", flags->grpc_threads,
                   "Threads polling gRPC's completion queues: they parse and answer calls, never running "
                   "models (0: one per eight available CPUs, at least one)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str()
      ->envname("INFERD_GRPC_THREADS");
  command
      ->add_option("--grpc-max-message-bytes", flags->grpc_max_message_bytes,
                   "Largest gRPC request or response message; larger requests get RESOURCE_EXHAUSTED")
      ->check(CLI::Range(1024, std::numeric_limits<int>::max()))
      ->capture_default_str()
      ->envname("INFERD_GRPC_MAX_MESSAGE_BYTES");
  command
      ->add_option("--grpc-keepalive-time", flags->grpc_keepalive_time_ms,
                   "Milliseconds between keepalive pings the server sends on an idle connection")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--grpc-keepalive-timeout", flags->grpc_keepalive_timeout_ms,
                   "Milliseconds to wait for a keepalive ping's answer before closing the connection")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--grpc-keepalive-permit-without-calls", flags->grpc_keepalive_permit_without_calls,
                   "Allow keepalive pings on connections with no call in progress (true/false)")
      ->capture_default_str();
  command
      ->add_option("--grpc-http2-max-pings-without-data", flags->grpc_http2_max_pings_without_data,
                   "Pings the server may send without data in between (0: unlimited)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      ->add_option("--grpc-http2-min-recv-ping-interval-without-data",
                   flags->grpc_http2_min_recv_ping_interval_ms,
                   "Shortest interval between client pings without data that is not a strike (ms)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      ->add_option("--grpc-http2-max-ping-strikes", flags->grpc_http2_max_ping_strikes,
                   "Bad pings tolerated before the connection is closed (0: unlimited)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace

void AddServeFlags(CLI::App* command, ServeFlags* flags) {
  command
      ->add_option("--model-repository", flags->model_repositories,
                   "Model repository folder (<model>/config.pbtxt, <model>/<version>/...); repeatable")
      ->required()
      ->envname("INFERD_MODEL_REPOSITORY");
  command
      ->add_option("--model-control-mode", flags->model_control_mode,
                   "none: load every model at start; explicit: load/unload through the repository API; "
                   "poll: load every model at start, then follow the repositories' changes")
      ->check(CLI::IsMember({"none", "explicit", "poll"}))
      ->capture_default_str()
      ->envname("INFERD_MODEL_CONTROL_MODE");
  command
      ->add_option("--repository-poll-secs", flags->repository_poll_secs,
                   "In poll mode, seconds between two reads of the repositories; a change is loaded once "
                   "its files are the same at two polls in a row")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str()
      ->envname("INFERD_REPOSITORY_POLL_SECS");
  command
      ->add_option("--model-load-threads,--model-load-thread-count", flags->model_load_threads,
                   "Threads that load and unload models: different models load at once, one model's "
                   "loads in turn")
      ->check(CLI::Range(1, 64))
      ->capture_default_str()
      ->envname("INFERD_MODEL_LOAD_THREADS");
  command
      ->add_option("--model-load-priority", flags->model_load_priority,
                   "CPU priority of loads after start-up: idle (SCHED_IDLE: a load takes only the time serving "
                   "models leave, and on a saturated server waits for it) or normal")
      ->check(CLI::IsMember({"idle", "normal"}))
      ->capture_default_str()
      ->envname("INFERD_MODEL_LOAD_PRIORITY");
  command
      ->add_option("--load-model", flags->load_models,
                   "In explicit mode, a model to load at start; repeatable")
      ->envname("INFERD_LOAD_MODEL");
  command
      ->add_option("--strict-readiness", flags->strict_readiness,
                   "true: the server is ready only when every model that should be loaded is ready; false: "
                   "ready once it is up and not draining, even if a model failed to load (/v2/health/ready, "
                   "gRPC ServerReady and grpc.health.v1 for service \"\")")
      ->capture_default_str()
      ->envname("INFERD_STRICT_READINESS");
  command
      ->add_option("--allow-client-shm", flags->allow_client_shm,
                   "true: clients on this host may register system shared-memory regions and pass tensors "
                   "through them (Triton's extension; a registered region can be read and written by the "
                   "server as its own user)")
      ->capture_default_str()
      ->envname("INFERD_ALLOW_CLIENT_SHM");
  command
      ->add_option("--cache-size", flags->cache_size,
                   "Bytes of the response cache shared by the models whose config has response_cache { enable: "
                   "true } (e.g. 256MiB; 0: no cache, those models run every request)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str()
      ->envname("INFERD_CACHE_SIZE");
  command->add_option("--http-address", flags->http_address, "Address the HTTP and metrics ports bind to")
      ->capture_default_str()
      ->envname("INFERD_HTTP_ADDRESS");
  command->add_option("--http-port", flags->http_port, "KServe v2 REST port")
      ->capture_default_str()
      ->envname("INFERD_HTTP_PORT");
  command->add_option("--metrics-port", flags->metrics_port, "Prometheus /metrics port")
      ->capture_default_str()
      ->envname("INFERD_METRICS_PORT");
  command
      ->add_option("--http-threads", flags->http_threads,
                   "I/O threads parsing and writing HTTP, never running models (0: one per four available CPUs, "
                   "at least one)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str()
      ->envname("INFERD_HTTP_THREADS");
  command
      ->add_option("--threads", flags->threads,
                   "Cores given to inference, divided among model instances (0: the CPUs available to the process: its cgroup quota rounded up, its affinity mask)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str()
      ->envname("INFERD_THREADS");
  command
      ->add_option("--http-max-body-bytes", flags->http_max_body_bytes,
                   "Largest accepted request body; larger ones get HTTP 413")
      ->capture_default_str()
      ->envname("INFERD_HTTP_MAX_BODY_BYTES");
  AddGrpcFlags(command, flags);
  command
      ->add_option("--oom-score-adj", flags->oom_score_adj,
                   "Written to /proc/self/oom_score_adj at start (-1000..1000): lower protects a critical "
                   "server from the kernel's OOM killer (needs CAP_SYS_RESOURCE), higher offers it first")
      ->envname("INFERD_OOM_SCORE_ADJ");
  command
      ->add_option("--memory-limit-fraction", flags->memory_limit_fraction,
                   "A model load is refused when the container's working set plus the model's estimated need "
                   "would pass this fraction of its cgroup memory limit (0: no check; no limit: no check)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str()
      ->envname("INFERD_MEMORY_LIMIT_FRACTION");
  command
      ->add_option("--drain-delay-secs", flags->drain_delay_secs,
                   "On SIGTERM, first keep serving this long while /v2/health/ready says not ready, so that "
                   "load balancers polling it stop sending before the drain refuses new requests (a second "
                   "signal ends the wait; on Kubernetes a preStop hook does the same)")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str()
      ->envname("INFERD_DRAIN_DELAY_SECS");
  command
      ->add_option("--exit-timeout-secs", flags->exit_timeout_secs,
                   "On SIGTERM, how long to wait for in-flight requests before exiting")
      ->capture_default_str()
      ->envname("INFERD_EXIT_TIMEOUT_SECS");
  command
      ->add_option("--prediction-horizon-secs", flags->prediction_horizon_secs,
                   "How far ahead each model's and router pool's request rate is forecast "
                   "(inferd_predicted_requests_per_second, routers' predicted_rps)")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600))
      ->envname("INFERD_PREDICTION_HORIZON_SECS");
  command
      ->add_option("--prediction-period-secs", flags->prediction_period_secs,
                   "0: forecast with Holt's linear trend; else Holt-Winters with this seasonal period")
      ->capture_default_str()
      ->envname("INFERD_PREDICTION_PERIOD_SECS");
  command
      ->add_option("--alert-window-secs", flags->alert_window_secs,
                   "3-sigma alerts on each model's request rate, error ratio and p99 (GET /v2/alerts, "
                   "inferd_anomaly_alert): seconds in the rolling mean and standard deviation")
      ->capture_default_str()
      ->envname("INFERD_ALERT_WINDOW_SECS");
  command
      ->add_option("--alert-min-secs", flags->alert_min_secs, "Seconds a model is watched before it can alert")
      ->capture_default_str()
      ->envname("INFERD_ALERT_MIN_SECS");
  command
      ->add_option("--alert-cool-down-secs", flags->alert_cool_down_secs,
                   "Seconds after an alert clears before the same series can alert again")
      ->capture_default_str()
      ->check(CLI::Range(0, 86400))
      ->envname("INFERD_ALERT_COOL_DOWN_SECS");
  command->add_flag("--log-verbose", flags->log_verbose, "Log debug detail")->envname("INFERD_LOG_VERBOSE");
}

namespace {

// I/O is cheap next to inference: a request costs an I/O thread tens of microseconds, so a large
// machine needs few I/O threads. (On 2 cores, one I/O thread instead of the default two helped at
// concurrency 8 and hurt at 64: docs/BENCHMARKS.md.)
int DefaultHttpThreads() { return std::max(1, AvailableCpus() / 4); }

}  // namespace

int RunServe(const ServeFlags& flags) {
  spdlog::set_level(flags.log_verbose ? spdlog::level::debug : spdlog::level::info);
  const sigset_t stop_signals = BlockStopSignals();  // before any thread starts: they inherit it

  ServerOptions options;
  for (const auto& path : flags.model_repositories) options.repositories.emplace_back(path);
  options.control_mode = flags.model_control_mode == "explicit" ? ModelControlMode::kExplicit
                         : flags.model_control_mode == "poll"   ? ModelControlMode::kPoll
                                                                : ModelControlMode::kNone;
  options.repository_poll_interval = std::chrono::seconds(flags.repository_poll_secs);
  options.model_load_threads = flags.model_load_threads;
  options.loads_at_idle_priority = flags.model_load_priority == "idle";
  options.startup_models = flags.load_models;
  options.strict_readiness = flags.strict_readiness;
  options.allow_client_shared_memory = flags.allow_client_shm;
  options.response_cache_bytes = static_cast<size_t>(flags.cache_size);
  options.remote_pools = MakeGrpcPool;
  options.prediction_horizon_s = flags.prediction_horizon_secs;
  options.forecast.period_s = flags.prediction_period_secs;
  if (Status valid = ValidateForecastOptions(options.forecast); !valid.ok()) {
    spdlog::critical("--prediction-period-secs: {}", valid.message());
    return 1;
  }
  for (AnomalyRule* rule : {&options.alert_rules.request_rate, &options.alert_rules.error_ratio,
                            &options.alert_rules.p99_seconds}) {
    rule->window = static_cast<size_t>(std::max(0, flags.alert_window_secs));
    rule->min_samples = static_cast<size_t>(std::max(0, flags.alert_min_secs));
    rule->cool_down = static_cast<size_t>(flags.alert_cool_down_secs);
    if (Status valid = rule->Validate(); !valid.ok()) {
      spdlog::critical("--alert-window-secs / --alert-min-secs: {}", valid.message());
      return 1;
    }
  }
  // Thread counts follow the CPUs this container may use (its cgroup quota and affinity), not the node's.
  spdlog::info("resources: {}", ProcessResources().Describe());
  // Where models' cpu_weight goes: said at start, whether or not a model sets one yet.
  spdlog::info("{}", ProcessCpuWeightGroups().Describe());
  if (flags.oom_score_adj) {
    if (Status set = SetOomScoreAdjustment(*flags.oom_score_adj); !set.ok()) {
      spdlog::critical("{}", set.message());
      return 1;
    }
    spdlog::info("oom_score_adj set to {}", *flags.oom_score_adj);
  }
  options.threads = flags.threads > 0 ? flags.threads : AvailableCpus();
  if (flags.memory_limit_fraction > 0) {
    options.memory_admission = MemoryAdmission::ForProcess(flags.memory_limit_fraction);
  }

  InferenceServer server(options);
  if (Status status = server.Start(); !status.ok()) {
    spdlog::critical("{}", status.message());
    return 1;
  }
  GrpcServer grpc({.address = flags.grpc_address,
                   .port = flags.grpc_port,
                   .max_message_bytes = flags.grpc_max_message_bytes,
                   .keepalive_time_ms = flags.grpc_keepalive_time_ms,
                   .keepalive_timeout_ms = flags.grpc_keepalive_timeout_ms,
                   .keepalive_permit_without_calls = flags.grpc_keepalive_permit_without_calls,
                   .http2_max_pings_without_data = flags.grpc_http2_max_pings_without_data,
                   .http2_min_recv_ping_interval_without_data_ms = flags.grpc_http2_min_recv_ping_interval_ms,
                   .http2_max_ping_strikes = flags.grpc_http2_max_ping_strikes,
                   .call_threads = flags.grpc_threads},
                  &server);
  // gRPC first: a client that saw /v2/health/live answer on the HTTP port may connect to gRPC at
  // once (the e2e harness does), and must not find the port still closed.
  if (flags.allow_grpc) {
    if (Status status = grpc.Start(); !status.ok()) {
      spdlog::critical("{}", status.message());
      return 1;
    }
  }
  HttpServer http({.address = flags.http_address,
                   .port = flags.http_port,
                   .io_threads = flags.http_threads > 0 ? flags.http_threads : DefaultHttpThreads(),
                   .max_body_bytes = flags.http_max_body_bytes},
                  RouteByApi(MakeKServeHandler(&server), MakeTfServingHandler(&server)));
  HttpServer metrics({.address = flags.http_address, .port = flags.metrics_port, .io_threads = 1},
                     MakeMetricsHandler(&server));
  for (auto* listener : {&http, &metrics}) {
    if (Status status = listener->Start(); !status.ok()) {
      spdlog::critical("{}", status.message());
      return 1;
    }
  }
  std::vector<std::pair<std::string, int>> listeners{{"http", http.port()}, {"metrics", metrics.port()}};
  if (flags.allow_grpc) listeners.emplace_back("grpc", grpc.port());
  RegisterConnectionMetrics(&server.metrics(), listeners);
  spdlog::info("inferd serving: HTTP on {}:{}, {}metrics on {}:{}/metrics", flags.http_address, http.port(),
               flags.allow_grpc ? fmt::format("gRPC on {}:{}, ", flags.grpc_address, grpc.port()) : "",
               flags.http_address, metrics.port());

  const int signal_number = WaitForStopSignal(stop_signals);
  if (flags.drain_delay_secs > 0) {
    spdlog::info("received signal {}: not ready, still serving for {} s before draining", signal_number,
                 flags.drain_delay_secs);
    server.BeginLeaving();
    if (auto again = WaitForStopSignal(stop_signals, std::chrono::seconds(flags.drain_delay_secs))) {
      spdlog::info("received signal {} again: draining now", *again);
    }
  }
  spdlog::info("received signal {}: draining ({} request(s) in flight, up to {} s)", signal_number,
               server.inflight(), flags.exit_timeout_secs);
  server.BeginDrain();
  http.StopAccepting();
  const bool idle = server.WaitForIdle(std::chrono::seconds(flags.exit_timeout_secs));
  if (!idle) {
    spdlog::warn("exit timeout reached with {} request(s) still in flight; cancelling queued ones",
                 server.inflight());
    server.CancelQueued();
  }
  // Models next: a running execution finishes and answers (it cannot be interrupted), and no
  // queued callback may outlive the HTTP connections it references.
  server.Shutdown();
  // Let the I/O threads write the last answers out.
  if (!http.WaitForIdle(std::chrono::seconds(2)))
    spdlog::warn("some answers could not be written before exit");
  http.Stop();
  // Every call's answer is known by now (the models are shut down); this lets them go out.
  grpc.Stop(std::chrono::seconds(2));
  metrics.Stop();
  spdlog::info("inferd stopped");
  return 0;
}

}  // namespace inferd
