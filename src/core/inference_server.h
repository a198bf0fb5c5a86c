// The one facade every frontend calls. Frontends parse their protocol into an InferRequest and
// call InferAsync; everything below (lookup, validation, queueing, execution, stats) happens
// behind it, and the answer comes back through the callback on a non-I/O thread.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/infer_request.h"
#include "common/mutex.h"
#include "core/model_view.h"
#include "core/shared_memory.h"
#include "common/load_override.h"
#include "lifecycle/memory_admission.h"
#include "lifecycle/response_cache.h"
#include "lifecycle/mirror.h"
#include "lifecycle/model_state.h"
#include "lifecycle/rollout.h"
#include "lifecycle/traffic.h"
#include "metrics/alert_board.h"
#include "metrics/drift_monitor.h"
#include "metrics/gpu_metrics.h"
#include "metrics/quality_tracker.h"
#include "metrics/metrics_registry.h"
#include "pipeline/load_forecast.h"
#include "pipeline/remote_pool.h"
#include "pipeline/router_runner.h"

namespace inferd {

class BackendRegistry;
class ModelManager;
class ModelVersion;

class RepositoryPoller;

// Triton's --model-control-mode: none loads every model at start; explicit loads through the
// repository API; poll loads every model at start, then follows the repositories' changes
// (lifecycle/repository_poller.h).
enum class ModelControlMode { kNone, kExplicit, kPoll };

struct ServerOptions {
  std::vector<std::filesystem::path> repositories;
  ModelControlMode control_mode = ModelControlMode::kNone;
  std::vector<std::string> startup_models;  // explicit mode: loaded at start
  std::chrono::seconds repository_poll_interval{15};  // poll mode
  // Loads and unloads run on this many threads (Triton's --model-load-thread-count): different
  // models load at once, one model's loads one after another.
  int model_load_threads = 2;
  // After start-up, run each load's work at SCHED_IDLE (--model-load-priority idle, the default).
  // The price: on a server whose cores are all busy serving, a load advances only in idle time.
  bool loads_at_idle_priority = true;
  int threads = 1;
  // --memory-limit-fraction: loads that the container's memory limit has no room for are refused
  // (lifecycle/memory_admission.h). Null: no check.
  std::shared_ptr<MemoryAdmission> memory_admission;
  // Triton's --strict-readiness: the server is ready only when every model that should be loaded
  // is ready. Off: ready once it is up and not draining, whatever the models.
  bool strict_readiness = true;
  // Routers' remote pools (pipeline/grpc_pool.h's MakeGrpcPool); null: a router with pools fails
  // to load.
  RemotePoolFactory remote_pools;
  // Request-rate forecasts per model and router pool (pipeline/load_forecast.h):
  // --prediction-horizon-secs, and with --prediction-period-secs Holt-Winters.
  int64_t prediction_horizon_s = 10;
  ForecastOptions forecast;
  // The 3-sigma alerts on each model's request rate, error ratio and p99 (--alert-*-secs).
  AlertRules alert_rules = DefaultAlertRules();
  // Triton's --allow-client-shm: clients may register shared-memory regions (core/shared_memory.h).
  bool allow_client_shared_memory = false;
  // --cache-size: the response cache's byte budget, shared by the models whose config has
  // response_cache { enable: true } (lifecycle/response_cache.h). 0: no cache.
  size_t response_cache_bytes = 0;
};

class InferenceServer {
 public:
  explicit InferenceServer(ServerOptions options);
  ~InferenceServer();

  // Loads the models the control mode asks for. Model failures are reported, never fatal.
  Status Start();

  // `done` is called exactly once, on success or failure.
  void InferAsync(std::unique_ptr<InferRequest> request, InferCallback done);

  bool IsLive() const { return true; }
  // The server's readiness for /v2/health/ready, gRPC ServerReady and grpc.health.v1's "": not
  // draining, and (strict readiness) every model that should be loaded is ready.
  bool IsReady() const;
  // One model version's state (version 0: the newest), from memory: what readiness probes and
  // status calls ask. Never reads the repository on disk.
  ModelReadiness ModelStateOf(std::string_view name, int64_t version) const;
  // One model's versions and their states, from memory (empty for an unknown name).
  std::vector<IndexEntry> ModelEntries(std::string_view name) const;
  // A loaded version (0: the newest), or NOT_FOUND.
  StatusOr<ModelView> FindModel(std::string_view name, int64_t version) const;
  std::vector<ModelView> LoadedModels() const;
  // The loaded versions of one model, ascending (empty when none).
  std::vector<ModelView> LoadedVersions(std::string_view name) const;
  // Every model in the repositories with its state: lists the repository folders on disk, for
  // the repository index API only.
  std::vector<IndexEntry> RepositoryIndex() const;
  ModelControlMode control_mode() const { return options_.control_mode; }

  // Traffic between a model's versions, for requests that name none (lifecycle/traffic.h). A split
  // cannot be set by hand while a rollout drives it.
  Status SetTraffic(const std::string& model, std::optional<TrafficSplit> split, std::optional<VersionLabelMap> labels);
  StatusOr<ModelTraffic> Traffic(std::string_view model) const;
  // TF Serving's /labels/L: the version the label names now.
  StatusOr<int64_t> VersionForLabel(std::string_view model, std::string_view label) const;
  // Canary rollouts (lifecycle/rollout.h).
  StatusOr<RolloutStatus> StartRollout(const std::string& model, RolloutPlan plan);
  StatusOr<RolloutStatus> RollbackRollout(const std::string& model);
  StatusOr<RolloutStatus> Rollout(const std::string& model) const;
  // Ground truth for past predictions (metrics/quality_tracker.h): each item goes to the loaded
  // version of `model` that remembers its id (`version` 0: any); an id none remembers counts as
  // unknown, and a malformed item as invalid, on the newest version that tracks quality. One
  // outcome per item. NOT_FOUND for an unknown model; FAILED_PRECONDITION when no loaded version
  // has the parameter "quality".
  StatusOr<std::vector<FeedbackOutcome>> AddFeedback(std::string_view model, int64_t version,
                                                     const std::vector<FeedbackItem>& items);
  // Each tracking version's report (`version` 0: all loaded), newest first.
  StatusOr<std::vector<std::pair<int64_t, QualityReport>>> QualityReports(std::string_view model, int64_t version) const;
  // Each drift-monitored version's report (`version` 0: all loaded), newest first; errors as above.
  StatusOr<std::vector<std::pair<int64_t, DriftReport>>> DriftReports(std::string_view model, int64_t version) const;
  // Features of every loaded version whose drift score is above its threshold now.
  std::vector<DriftAlert> ActiveDriftAlerts() const;
  // The 3-sigma alerts active now (metrics/alert_board.h), for GET /v2/alerts.
  std::vector<Alert> ActiveAlerts() const { return alerts_.Active(); }

  // Load and unload run on a load thread; `done` is called there.
  void LoadModelAsync(std::string name, LoadOverride override, std::function<void(Status)> done);
  void UnloadModelAsync(std::string name, std::function<void(Status)> done);

  // The step before a drain (--drain-delay-secs): readiness turns false so that load balancers
  // polling it stop sending, while requests are still served as before.
  void BeginLeaving() { leaving_.store(true); }
  // Graceful stop: new requests get UNAVAILABLE and readiness turns false; then wait (bounded)
  // until every accepted request is answered.
  void BeginDrain();
  bool draining() const { return draining_.load(); }
  bool WaitForIdle(std::chrono::milliseconds timeout);
  // Unloads every model (draining their queues) and stops the load threads. Call before the
  // frontends go away: queued callbacks may still hold frontend objects.
  void Shutdown();
  // Answers every request still waiting in a queue with CANCELLED (exit timeout passed).
  void CancelQueued();
  int64_t inflight() const { return inflight_.load(); }

  MetricsRegistry& metrics() { return metrics_; }
  // The regions clients registered (Triton's system shared-memory extension); requests that name
  // them are resolved in InferAsync.
  SharedMemoryRegistry& shared_memory() { return shared_memory_; }

 private:
  // A load thread: runs load/unload tasks as they come (ModelManager orders those of one model).
  void RunLoadTasks();
  // The poll thread (poll mode): reads the repositories every interval and runs what changed on
  // the load threads, waiting for it before the next poll.
  void RunPolls();
  void PollRepositories(RepositoryPoller* poller);
  void PostLifecycleTask(std::function<void()> task);
  // Runs every task on the load threads and waits for them all. Not from a load thread.
  void RunOnLoadThreads(std::vector<std::function<void()>> tasks);
  // Runs a load/unload on a load thread when the control mode allows it.
  void PostModelControl(std::function<Status()> operation, std::function<void(Status)> done);
  // The ticker thread, 4 times a second: rollouts' guard rails, and keep-warm runs for idle models.
  void RunTicker();
  void KeepWarmIdleModels();
  // Once a second: every model's request count into the forecasts and its totals into the
  // alerts, routers' own ticks.
  void TickModels();
  void PublishAlerts(const std::map<std::string, ModelTotals>& totals);
  // The router services every router version gets (its door, pools, load facts).
  RouterServices MakeRouterServices();
  void FinishRequest();
  // Maps a request's shared-memory inputs in, and wraps `finish` to write its shared-memory
  // outputs before the answer goes out.
  Status UseSharedMemory(InferRequest& request, InferCallback& finish) const;
  // Queues a validated request at `model`, or at the version that replaced it in the instant
  // after routing; answers `done` with the error when neither takes it.
  void Enqueue(ModelVersion& model, ValidatedRequest&& validated, const InferCallback& done);
  // The door for an ensemble's steps (pipeline/ensemble_runner.h).
  void DispatchStep(std::unique_ptr<InferRequest> request, InferCallback done);
  // Mirrors a request (a copy of it, as it arrived) to the other version of a rollout's agreement
  // guard; returns the callback for the served version's answer, which records it for the
  // comparison before `finish` answers the client.
  InferCallback SendMirrored(std::shared_ptr<TrafficMirror> mirror, int64_t served, std::unique_ptr<InferRequest> copy,
                             InferCallback finish);

  const ServerOptions options_;
  RealClock clock_;
  MetricsRegistry metrics_;
  std::unique_ptr<GpuMetrics> gpus_;  // after metrics_: removes its series from it when it goes
  std::unique_ptr<BackendRegistry> backends_;
  ForecastBoard forecasts_;  // before models_: routers read it
  std::shared_ptr<ResponseCache> response_cache_;  // before models_: their versions use it; null: none
  AlertBoard alerts_{options_.alert_rules};
  std::vector<std::string> alerted_models_;  // the ticker's: models with inferd_anomaly_alert series
  std::unique_ptr<ModelManager> models_;
  std::unique_ptr<RolloutController> rollouts_;

  SharedMemoryRegistry shared_memory_{options_.allow_client_shared_memory};

  std::atomic<bool> draining_{false};
  std::atomic<bool> leaving_{false};
  std::atomic<int64_t> inflight_{0};
  Mutex idle_mu_;  // only pairs with idle_cv_: inflight_ is atomic
  CondVar idle_cv_;

  Mutex tasks_mu_;
  CondVar tasks_cv_;
  std::deque<std::function<void()>> tasks_ GUARDED_BY(tasks_mu_);
  bool stop_tasks_ GUARDED_BY(tasks_mu_) = false;
  std::unique_ptr<RepositoryPoller> poller_;  // poll mode, set in Start before the poll thread
  std::vector<std::thread> load_threads_;
  std::thread poll_thread_;

  Mutex ticker_mu_;
  CondVar ticker_cv_;
  bool stop_ticker_ GUARDED_BY(ticker_mu_) = false;
  std::thread ticker_thread_;
  uint64_t ticks_ = 0;  // the ticker thread's
};

}  // namespace inferd
