// The one facade every frontend calls. Frontends parse their protocol into an InferRequest and
// call InferAsync; everything below (lookup, validation, queueing, execution, stats) happens
// behind it, and the answer comes back through the callback on a non-I/O thread.
#pragma once

#include <atomic>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "common/infer_request.h"
#include "common/mutex.h"
#include "lifecycle/model_manager.h"
#include "metrics/metrics_registry.h"

namespace inferd {

enum class ModelControlMode { kNone, kExplicit };

struct ServerOptions {
  std::vector<std::filesystem::path> repositories;
  ModelControlMode control_mode = ModelControlMode::kNone;
  std::vector<std::string> startup_models;  // explicit mode: loaded at start
  int threads = 1;
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
  bool IsReady() const;
  StatusOr<std::shared_ptr<ModelVersion>> FindModel(std::string_view name, int64_t version) const;
  std::vector<std::shared_ptr<ModelVersion>> LoadedModels() const { return models_.AllLoaded(); }
  std::vector<std::shared_ptr<ModelVersion>> LoadedVersions(std::string_view name) const {
    return models_.LoadedVersions(name);
  }
  std::vector<IndexEntry> RepositoryIndex() const { return models_.Index(); }
  ModelControlMode control_mode() const { return options_.control_mode; }

  // Load and unload run on the lifecycle thread; `done` is called there.
  void LoadModelAsync(std::string name, std::function<void(Status)> done);
  void UnloadModelAsync(std::string name, std::function<void(Status)> done);

  // Graceful stop: new requests get UNAVAILABLE and readiness turns false; then wait (bounded)
  // until every accepted request is answered.
  void BeginDrain();
  bool draining() const { return draining_.load(); }
  bool WaitForIdle(std::chrono::milliseconds timeout);
  // Unloads every model (draining their queues) and stops the lifecycle thread. Call before the
  // frontends go away: queued callbacks may still hold frontend objects.
  void Shutdown();
  // Answers every request still waiting in a queue with CANCELLED (exit timeout passed).
  void CancelQueued();
  int64_t inflight() const { return inflight_.load(); }

  MetricsRegistry& metrics() { return metrics_; }

 private:
  void RunLifecycleTasks();
  void PostLifecycleTask(std::function<void()> task);
  // Runs a load/unload on the lifecycle thread when the control mode allows it.
  void PostModelControl(std::function<Status()> operation, std::function<void(Status)> done);
  void FinishRequest();

  const ServerOptions options_;
  RealClock clock_;
  MetricsRegistry metrics_;
  BackendRegistry backends_;
  ModelManager models_;

  std::atomic<bool> draining_{false};
  std::atomic<int64_t> inflight_{0};
  Mutex idle_mu_;  // only pairs with idle_cv_: inflight_ is atomic
  CondVar idle_cv_;

  Mutex tasks_mu_;
  CondVar tasks_cv_;
  std::deque<std::function<void()>> tasks_ GUARDED_BY(tasks_mu_);
  bool stop_tasks_ GUARDED_BY(tasks_mu_) = false;
  std::thread lifecycle_thread_;
};

}  // namespace inferd
