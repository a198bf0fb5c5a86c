#include "server/serve_command.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <thread>

#include "core/inference_server.h"
#include "frontends/http/http_server.h"
#include "frontends/http/kserve_routes.h"
#include "frontends/http/tfserving_routes.h"

namespace inferd {

void AddServeFlags(CLI::App* command, ServeFlags* flags) {
  command
      ->add_option("--model-repository", flags->model_repositories,
                   "Model repository folder (<model>/config.pbtxt, <model>/<version>/...); repeatable")
      ->required()
      ->envname("INFERD_MODEL_REPOSITORY");
  command
      ->add_option("--model-control-mode", flags->model_control_mode,
                   "none: load every model at start; explicit: load/unload through the repository API")
      ->check(CLI::IsMember({"none", "explicit"}))
      ->capture_default_str()
      ->envname("INFERD_MODEL_CONTROL_MODE");
  command
      ->add_option("--load-model", flags->load_models,
                   "In explicit mode, a model to load at start; repeatable")
      ->envname("INFERD_LOAD_MODEL");
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
                   "I/O threads parsing and writing HTTP, never running models (0: one per four cores, "
                   "at least one)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str()
      ->envname("INFERD_HTTP_THREADS");
  command
      ->add_option("--threads", flags->threads,
                   "Cores given to inference, divided among model instances (0: all cores)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str()
      ->envname("INFERD_THREADS");
  command
      ->add_option("--http-max-body-bytes", flags->http_max_body_bytes,
                   "Largest accepted request body; larger ones get HTTP 413")
      ->capture_default_str()
      ->envname("INFERD_HTTP_MAX_BODY_BYTES");
  command
      ->add_option("--exit-timeout-secs", flags->exit_timeout_secs,
                   "On SIGTERM, how long to wait for in-flight requests before exiting")
      ->capture_default_str()
      ->envname("INFERD_EXIT_TIMEOUT_SECS");
  command->add_flag("--log-verbose", flags->log_verbose, "Log debug detail")->envname("INFERD_LOG_VERBOSE");
}

namespace {

// Blocks SIGTERM/SIGINT in every thread (call before starting any) and waits for one here.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// I/O is cheap next to inference: a request costs an I/O thread tens of microseconds, so a large
// machine needs few I/O threads. (On 2 cores, one I/O thread instead of the default two helped at
// concurrency 8 and hurt at 64: docs/BENCHMARKS.md.)
int DefaultHttpThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / 4)); }

}  // namespace

int RunServe(const ServeFlags& flags) {
  spdlog::set_level(flags.log_verbose ? spdlog::level::debug : spdlog::level::info);
  sigset_t stop_signals = BlockStopSignals();

  ServerOptions options;
  for (const auto& path : flags.model_repositories) options.repositories.emplace_back(path);
  options.control_mode =
      flags.model_control_mode == "explicit" ? ModelControlMode::kExplicit : ModelControlMode::kNone;
  options.startup_models = flags.load_models;
  options.threads =
      flags.threads > 0 ? flags.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  InferenceServer server(options);
  if (Status status = server.Start(); !status.ok()) {
    spdlog::critical("{}", status.message());
    return 1;
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
  spdlog::info("inferd serving: HTTP on {}:{}, metrics on {}:{}/metrics", flags.http_address, http.port(),
               flags.http_address, metrics.port());

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
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
  metrics.Stop();
  spdlog::info("inferd stopped");
  return 0;
}

}  // namespace inferd
