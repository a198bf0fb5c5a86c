#include "core/inference_server.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "backends/backend.h"
#include "common/classification.h"
#include "core/request_validation.h"
#include "lifecycle/model_manager.h"
#include "lifecycle/model_metrics.h"
#include "lifecycle/repository_poller.h"
#include "metrics/process_metrics.h"

namespace inferd {

namespace {
// Load / unload requests beyond this many waiting are refused: the lifecycle queue is bounded too.
constexpr size_t kMaxLifecycleTasks = 64;

using Classifications = std::vector<std::pair<std::string, uint32_t>>;

// Triton's classification extension: the outputs asked for as classes must be numeric outputs
// of the model.
Status CheckClassifications(const ModelConfig& config, const Classifications& classifications) {
  for (const auto& classification : classifications) {
    const std::string& output = classification.first;  // named: clang 14 captures no structured binding
    auto declared = std::ranges::find_if(config.output(), [&](const auto& o) { return o.name() == output; });
    if (declared == config.output().end()) {
      return Status::InvalidArgument("model '" + config.name() + "' has no output '" + output + "' to classify");
    }
    if (declared->data_type() == inference::TYPE_STRING || declared->data_type() == inference::TYPE_BOOL) {
      return Status::InvalidArgument("model '" + config.name() + "' output '" + output +
                                     "' is not numeric: it cannot be answered as classes");
    }
  }
  return Status::Ok();
}

// Replaces each classified output of a successful answer by its top classes.
InferCallback Classifying(std::shared_ptr<ModelVersion> model, Classifications classifications, InferCallback finish) {
  return [model = std::move(model), classifications = std::move(classifications),
          finish = std::move(finish)](StatusOr<InferResponse> result) {
    if (!result.ok()) return finish(std::move(result));
    const bool batched = model->config().max_batch_size() > 0;
    for (Tensor& output : result->outputs) {
      auto wanted = std::ranges::find_if(classifications, [&](const auto& c) { return c.first == output.name; });
      if (wanted == classifications.end()) continue;
      const int64_t rows = batched && !output.shape.empty() ? output.shape[0] : 1;
      auto best = TopClasses(output, rows, wanted->second);
      if (!best.ok()) return finish(best.status());
      output = ClassificationTensor(output.name, *best, rows, batched, model->OutputLabels(output.name));
    }
    finish(std::move(result));
  };
}

// Hands a successful answer to the version's quality tracker (what it predicted, for feedback)
// and drift monitor (its inputs and outputs). Wrapped outside Classifying, so it sees the scores
// before they turn into strings. `inputs` share the request's buffers.
InferCallback Observing(std::shared_ptr<ModelVersion> model, const ValidatedRequest& validated, InferCallback finish) {
  const int64_t rows = model->config().max_batch_size() > 0 ? validated.batch_size : 1;
  std::string id = model->quality() != nullptr ? validated.request->id : std::string();
  std::vector<Tensor> inputs = model->drift() != nullptr ? validated.request->inputs : std::vector<Tensor>();
  return [model = std::move(model), id = std::move(id), inputs = std::move(inputs), rows,
          finish = std::move(finish)](StatusOr<InferResponse> result) {
    if (result.ok()) {
      if (!id.empty()) model->quality()->RecordPrediction(id, result->outputs, rows);
      if (model->drift() != nullptr) model->drift()->Record(inputs, result->outputs, rows);
    }
    finish(std::move(result));
  };
}

}  // namespace

InferenceServer::InferenceServer(ServerOptions options)
    : options_(std::move(options)),
      backends_(std::make_unique<BackendRegistry>(BackendRegistry::WithBuiltins())),
      forecasts_(options_.forecast, options_.prediction_horizon_s),
      response_cache_(options_.response_cache_bytes > 0
                          ? std::make_shared<ResponseCache>(options_.response_cache_bytes, &metrics_)
                          : nullptr),
      models_(std::make_unique<ModelManager>(
          ModelManager::Options{options_.repositories, options_.threads, options_.memory_admission,
                                [this](std::unique_ptr<InferRequest> request, InferCallback done) {
                                  DispatchStep(std::move(request), std::move(done));
                                },
                                MakeRouterServices(), response_cache_},
          backends_.get(), &metrics_, &clock_)) {
  RegisterModelMetricFamilies(&metrics_);
  RegisterRolloutMetricFamilies(&metrics_);
  RegisterProcessMetrics(&metrics_);
  GpuMetrics::RegisterMetricFamilies(&metrics_);
  gpus_ = GpuMetrics::Load(&metrics_);
  if (gpus_->gpu_count() > 0) {
    spdlog::info("GPU metrics: {} GPU(s) through NVML", gpus_->gpu_count());
  } else {
    spdlog::info("no GPU metrics: {}", gpus_->unavailable_reason());
  }
  rollouts_ = std::make_unique<RolloutController>(models_.get(), &metrics_, [this](const std::string& model, int64_t version) {
    PostLifecycleTask([this, model, version] {
      if (Status status = models_->RetireVersion(model, version); !status.ok()) {
        spdlog::warn("retiring model '{}' version {}: {}", model, version, status.message());
      }
    });
  });
  for (int i = 0; i < std::max(1, options_.model_load_threads); ++i) {
    load_threads_.emplace_back([this] { RunLoadTasks(); });
  }
  ticker_thread_ = std::thread([this] { RunTicker(); });
}

InferenceServer::~InferenceServer() { Shutdown(); }

void InferenceServer::Shutdown() {
  draining_.store(true);
  {
    MutexLock lock(&tasks_mu_);
    stop_tasks_ = true;
  }
  tasks_cv_.NotifyAll();
  if (poll_thread_.joinable()) poll_thread_.join();
  for (std::thread& thread : load_threads_) thread.join();
  load_threads_.clear();
  {
    MutexLock lock(&ticker_mu_);
    stop_ticker_ = true;
  }
  ticker_cv_.NotifyAll();
  if (ticker_thread_.joinable()) ticker_thread_.join();
  models_->UnloadAll();
}

Status InferenceServer::Start() {
  for (const auto& repository : options_.repositories) {
    if (!std::filesystem::is_directory(repository)) {
      return Status::NotFound("model repository " + repository.string() + " is not a directory");
    }
  }
  auto load_every_model = [this] {
    std::vector<std::function<void()>> loads;
    for (std::string& name : models_->RepositoryModels()) {
      loads.push_back([this, name = std::move(name)] { (void)models_->Load(name); });  // failures are logged
    }
    RunOnLoadThreads(std::move(loads));
  };
  if (options_.control_mode == ModelControlMode::kPoll) {
    // Read before the loads: a model changed while they run is caught by the first polls.
    RepositorySnapshot at_start = SnapshotRepositories(options_.repositories);
    load_every_model();
    poller_ = std::make_unique<RepositoryPoller>(std::move(at_start));
  } else if (options_.control_mode == ModelControlMode::kNone) {
    load_every_model();
  } else {
    models_->ScanNames();
    for (const auto& name : options_.startup_models) {
      Status status = models_->Load(name);
      if (!status.ok()) spdlog::error("startup model '{}': {}", name, status.message());
    }
  }
  models_->SetLoadsAtIdlePriority(options_.loads_at_idle_priority);  // from now on loads run beside serving
  if (poller_) poll_thread_ = std::thread([this] { RunPolls(); });
  return Status::Ok();
}

bool InferenceServer::IsReady() const {
  return !draining_.load() && !leaving_.load() && (!options_.strict_readiness || models_->AllReady());
}

ModelReadiness InferenceServer::ModelStateOf(std::string_view name, int64_t version) const {
  return models_->State(name, version);
}

std::vector<IndexEntry> InferenceServer::ModelEntries(std::string_view name) const { return models_->Entries(name); }

std::vector<IndexEntry> InferenceServer::RepositoryIndex() const { return models_->Index(); }

StatusOr<ModelView> InferenceServer::FindModel(std::string_view name, int64_t version) const {
  ASSIGN_OR_RETURN(std::shared_ptr<ModelVersion> model, models_->Find(name, version));
  return ModelView(std::move(model));
}

namespace {
std::vector<ModelView> Views(const std::vector<std::shared_ptr<ModelVersion>>& models) {
  return std::vector<ModelView>(models.begin(), models.end());
}
}  // namespace

namespace {

// The loaded versions of `model` that have `parameter` ("quality", "drift"), newest first
// (`version` 0: all).
StatusOr<std::vector<std::shared_ptr<ModelVersion>>> VersionsWith(const ModelManager& models, std::string_view model,
                                                                    int64_t version, const std::string& parameter) {
  std::vector<std::shared_ptr<ModelVersion>> loaded;
  if (version != 0) {
    ASSIGN_OR_RETURN(std::shared_ptr<ModelVersion> one, models.Find(model, version));
    loaded.push_back(std::move(one));
  } else {
    loaded = models.LoadedVersions(model);
    if (loaded.empty()) RETURN_IF_ERROR(models.Find(model, 0).status());
  }
  std::erase_if(loaded, [&](const auto& v) {
    return parameter == "quality" ? v->quality() == nullptr : v->drift() == nullptr;
  });
  if (loaded.empty()) {
    return Status::FailedPrecondition("model '" + std::string(model) + "' has no parameter '" + parameter +
                                      "' in its config" +
                                      (parameter == "quality" ? ": it keeps no predictions for feedback" : ""));
  }
  std::ranges::sort(loaded, std::greater<>(), [](const auto& v) { return v->version(); });
  return loaded;
}

}  // namespace

StatusOr<std::vector<FeedbackOutcome>> InferenceServer::AddFeedback(std::string_view model, int64_t version,
                                                                    const std::vector<FeedbackItem>& items) {
  ASSIGN_OR_RETURN(auto tracking, VersionsWith(*models_, model, version, "quality"));
  std::vector<FeedbackOutcome> outcomes;
  outcomes.reserve(items.size());
  for (const FeedbackItem& item : items) {
    auto knows = std::ranges::find_if(tracking, [&](const auto& v) { return v->quality()->Knows(item.id); });
    if (!item.well_formed || knows == tracking.end()) {
      const FeedbackOutcome outcome = item.well_formed ? FeedbackOutcome::kUnknown : FeedbackOutcome::kInvalid;
      tracking.front()->quality()->Count(outcome);
      outcomes.push_back(outcome);
    } else {
      outcomes.push_back((*knows)->quality()->AddFeedback(item.id, item.labels));
    }
  }
  return outcomes;
}

StatusOr<std::vector<std::pair<int64_t, QualityReport>>> InferenceServer::QualityReports(std::string_view model,
                                                                                        int64_t version) const {
  ASSIGN_OR_RETURN(auto tracking, VersionsWith(*models_, model, version, "quality"));
  std::vector<std::pair<int64_t, QualityReport>> reports;
  for (const auto& v : tracking) reports.emplace_back(v->version(), v->quality()->Report());
  return reports;
}

StatusOr<std::vector<std::pair<int64_t, DriftReport>>> InferenceServer::DriftReports(std::string_view model,
                                                                                    int64_t version) const {
  ASSIGN_OR_RETURN(auto monitored, VersionsWith(*models_, model, version, "drift"));
  std::vector<std::pair<int64_t, DriftReport>> reports;
  for (const auto& v : monitored) reports.emplace_back(v->version(), v->drift()->Report());
  return reports;
}

std::vector<DriftAlert> InferenceServer::ActiveDriftAlerts() const {
  std::vector<DriftAlert> alerts;
  for (const std::shared_ptr<ModelVersion>& model : models_->AllLoaded()) {
    if (model->drift() == nullptr) continue;
    for (DriftScore& score : model->drift()->Report().scores) {
      if (score.alert) alerts.push_back({.model = model->name(), .version = model->version(), .score = std::move(score)});
    }
  }
  return alerts;
}

std::vector<ModelView> InferenceServer::LoadedModels() const { return Views(models_->AllLoaded()); }

std::vector<ModelView> InferenceServer::LoadedVersions(std::string_view name) const {
  return Views(models_->LoadedVersions(name));
}

void InferenceServer::FinishRequest() {
  if (inflight_.fetch_sub(1) == 1 && draining_.load()) {
    MutexLock lock(&idle_mu_);
    idle_cv_.NotifyAll();
  }
}

void InferenceServer::InferAsync(std::unique_ptr<InferRequest> request, InferCallback done) {
  // Counted before the draining check, so a drain that sees zero in flight cannot miss a request
  // that is just arriving.
  inflight_.fetch_add(1);
  InferCallback finish = [this, done = std::move(done)](StatusOr<InferResponse> result) {
    done(std::move(result));
    FinishRequest();
  };
  if (draining_.load()) return finish(Status::Unavailable("server is shutting down"));
  if (!request->input_regions.empty() || !request->output_regions.empty()) {
    Status mapped = UseSharedMemory(*request, finish);
    if (!mapped.ok()) return finish(mapped);
  }
  auto routed = models_->Route(request->model_name, request->model_version, request->id);
  if (!routed.ok()) return finish(routed.status());
  const std::shared_ptr<ModelVersion>& model = routed->model;
  // The copy shares the inputs' buffers; it is taken before validation reorders and reshapes them
  // for this version's config (the other version validates against its own).
  std::unique_ptr<InferRequest> mirrored;
  if (routed->mirror != nullptr && routed->mirror->TryBegin()) mirrored = std::make_unique<InferRequest>(*request);
  Classifications classifications = std::move(request->classifications);
  auto validated = ValidateRequest(model->config(), std::move(request));
  Status checked = validated.ok() ? CheckClassifications(model->config(), classifications) : validated.status();
  if (!checked.ok()) {
    model->RecordInvalid();
    if (mirrored) routed->mirror->Abandon();
    return finish(checked);
  }
  if (!classifications.empty()) finish = Classifying(model, std::move(classifications), std::move(finish));
  if ((model->quality() != nullptr && !validated->request->id.empty()) || model->drift() != nullptr) {
    finish = Observing(model, *validated, std::move(finish));
  }
  if (mirrored) finish = SendMirrored(std::move(routed->mirror), model->version(), std::move(mirrored), std::move(finish));
  Enqueue(*model, std::move(validated).value(), finish);
}

Status InferenceServer::UseSharedMemory(InferRequest& request, InferCallback& finish) const {
  RETURN_IF_ERROR(shared_memory_.AttachInputs(request));
  if (request.output_regions.empty()) return Status::Ok();
  ASSIGN_OR_RETURN(std::vector<OutputDestination> destinations, shared_memory_.ResolveOutputs(request));
  finish = [destinations = std::move(destinations), finish = std::move(finish)](StatusOr<InferResponse> result) {
    if (result.ok()) {
      if (Status written = WriteOutputsToSharedMemory(destinations, *result); !written.ok()) return finish(written);
    }
    finish(std::move(result));
  };
  return Status::Ok();
}

void InferenceServer::Enqueue(ModelVersion& model, ValidatedRequest&& validated, const InferCallback& done) {
  Status status = model.Enqueue(std::move(validated), done);
  if (!status.ok() && model.stopped()) {
    // Routed in the instant before a reload retired that version: the one in its place serves.
    if (auto replacement = models_->Replacement(model, *validated.request); replacement.ok()) {
      status = (*replacement)->Enqueue(std::move(validated), done);
    }
  }
  if (!status.ok()) done(status);
}

void InferenceServer::DispatchStep(std::unique_ptr<InferRequest> request, InferCallback done) {
  // A step of a request already accepted: it runs during a drain too, and is counted in flight
  // as its ensemble's request. No mirroring: a rollout's guard compares the client's requests.
  auto routed = models_->Route(request->model_name, request->model_version, request->id);
  if (!routed.ok()) {
    // The ensemble exists; its step's model is what is missing: the ensemble is unavailable.
    return done(routed.status().code() == StatusCode::kNotFound ? Status::Unavailable(routed.status().message())
                                                                : routed.status());
  }
  auto validated = ValidateRequest(routed->model->config(), std::move(request));
  if (!validated.ok()) {
    routed->model->RecordInvalid();
    return done(validated.status());
  }
  Enqueue(*routed->model, std::move(validated).value(), done);
}

InferCallback InferenceServer::SendMirrored(std::shared_ptr<TrafficMirror> mirror, int64_t served,
                                            std::unique_ptr<InferRequest> copy, InferCallback finish) {
  auto pair = std::make_shared<MirrorPair>(mirror);
  const int64_t peer = mirror->PeerOf(served);
  copy->model_version = peer;
  auto record_peer = [pair, peer](StatusOr<InferResponse> result) {
    if (!result.ok()) return pair->Record(peer, result.status());
    pair->Record(peer, std::move(result->outputs));
  };
  Status sent = Status::Ok();
  if (auto target = models_->Find(copy->model_name, peer); !target.ok()) {
    sent = target.status();
  } else if (auto validated = ValidateRequest((*target)->config(), std::move(copy)); !validated.ok()) {
    sent = validated.status();
  } else {
    sent = (*target)->Enqueue(std::move(validated).value(), record_peer);
  }
  if (!sent.ok()) pair->Record(peer, sent);
  // The client's answer is recorded by sharing its output buffers (no copy), then sent on.
  return [pair, served, finish = std::move(finish)](StatusOr<InferResponse> result) {
    if (result.ok()) {
      pair->Record(served, result->outputs);
    } else {
      pair->Record(served, result.status());
    }
    finish(std::move(result));
  };
}

void InferenceServer::RunTicker() {
  constexpr std::chrono::milliseconds kTick{250};
  MutexLock lock(&ticker_mu_);
  while (!stop_ticker_) {
    ticker_cv_.WaitFor(lock, kTick);
    if (stop_ticker_) break;
    lock.Unlock();
    rollouts_->Tick(std::chrono::steady_clock::now());
    KeepWarmIdleModels();
    if (++ticks_ % 4 == 0) TickModels();
    lock.Lock();
  }
}

RouterServices InferenceServer::MakeRouterServices() {
  RouterServices services;
  services.dispatch = [this](std::unique_ptr<InferRequest> request, InferCallback done) {
    DispatchStep(std::move(request), std::move(done));
  };
  services.make_pool = options_.remote_pools;
  services.queue_depth = [this](const std::string& model, int64_t version) -> std::optional<double> {
    auto found = models_->Find(model, version);
    if (!found.ok()) return std::nullopt;
    return static_cast<double>((*found)->QueueDepth());
  };
  services.predicted_rps = [this](const std::string& model) { return forecasts_.Predicted(model); };
  services.forecast = options_.forecast;
  services.forecast_horizon_s = options_.prediction_horizon_s;
  return services;
}

void InferenceServer::TickModels() {
  // The ticker's wake-ups drift by a few milliseconds a second: the forecast's unit is "one tick".
  std::map<std::string, ModelTotals> model_totals;  // over each model's versions
  for (const std::shared_ptr<ModelVersion>& model : models_->AllLoaded()) {
    const ModelStats& stats = model->stats();
    ModelTotals& sum = model_totals[model->name()];
    const uint64_t failures = stats.fail.count.load(std::memory_order_relaxed);
    sum.requests += stats.success.count.load(std::memory_order_relaxed) + failures;
    sum.failures += failures;
    const LatencyHistogram::Counts latency = model->latency().Snapshot();
    for (size_t i = 0; i < latency.size(); ++i) sum.latency[i] += latency[i];
    model->Tick();
  }
  PublishAlerts(model_totals);
  std::map<std::string, uint64_t> totals;
  for (const auto& [model, sum] : model_totals) totals[model] = sum.requests;
  const std::map<std::string, double, std::less<>> before = forecasts_.All();
  forecasts_.Tick(totals);
  const std::string horizon = std::to_string(forecasts_.horizon_s());
  for (const auto& [model, predicted] : forecasts_.All()) {
    metrics_.AddGauge("inferd_predicted_requests_per_second", {{"model", model}, {"horizon", horizon}})->Set(predicted);
  }
  for (const auto& [model, predicted] : before) {
    if (!totals.contains(model)) metrics_.RemoveSeries({{"model", model}, {"horizon", horizon}});
  }
}

void InferenceServer::PublishAlerts(const std::map<std::string, ModelTotals>& totals) {
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  const std::vector<Alert> before = alerts_.Active();
  alerts_.Tick(totals, now_ms);
  const std::vector<Alert> after = alerts_.Active();
  auto labels = [](const std::string& model, const char* series) -> MetricLabels {
    return {{"model", model}, {"series", series}};
  };
  // 1 while an alert is active, 0 otherwise, for every model and series; gone with the model.
  for (const auto& entry : totals) {
    const std::string& model = entry.first;  // a named variable: clang's lambdas cannot capture a binding
    for (const char* series : AlertBoard::kSeries) {
      const bool active = std::any_of(after.begin(), after.end(),
                                      [&](const Alert& a) { return a.model == model && a.series == series; });
      metrics_.AddGauge("inferd_anomaly_alert", labels(model, series))->Set(active ? 1 : 0);
    }
  }
  for (const std::string& model : alerted_models_) {
    if (!totals.contains(model)) {
      for (const char* series : AlertBoard::kSeries) metrics_.RemoveSeries(labels(model, series));
    }
  }
  alerted_models_.clear();
  for (const auto& [model, unused] : totals) alerted_models_.push_back(model);
  for (const Alert& alert : after) {
    if (std::none_of(before.begin(), before.end(), [&](const Alert& b) { return b.model == alert.model && b.series == alert.series; })) {
      spdlog::warn("alert: model '{}' {} = {:.4g}, {:.1f} standard deviations from its mean {:.4g}", alert.model,
                   alert.series, alert.value, alert.stddev > 0 ? std::abs(alert.value - alert.mean) / alert.stddev : 0.0,
                   alert.mean);
    }
  }
}

void InferenceServer::KeepWarmIdleModels() {
  if (draining_.load()) return;
  const TimePoint now = clock_.Now();
  for (const std::shared_ptr<ModelVersion>& model : models_->AllLoaded()) {
    if (model->keep_warm_interval().count() == 0 || model->keep_warm_in_flight()) continue;
    if (now - model->last_activity() < model->keep_warm_interval()) continue;
    auto request = std::make_unique<InferRequest>();
    request->model_name = model->name();
    request->model_version = model->version();
    request->inputs = model->keep_warm_inputs();  // shares the buffers: a run reads them only
    auto validated = ValidateRequest(model->config(), std::move(request));
    Status status = validated.ok() ? model->EnqueueKeepWarm(std::move(validated).value()) : validated.status();
    if (!status.ok()) spdlog::warn("model '{}': keep-warm run not queued: {}", model->name(), status.message());
  }
}

void InferenceServer::PostLifecycleTask(std::function<void()> task) {
  {
    MutexLock lock(&tasks_mu_);
    tasks_.push_back(std::move(task));
  }
  tasks_cv_.NotifyOne();
}

void InferenceServer::RunLoadTasks() {
  while (true) {
    std::function<void()> task;
    {
      MutexLock lock(&tasks_mu_);
      while (!stop_tasks_ && tasks_.empty()) tasks_cv_.Wait(lock);
      if (tasks_.empty()) return;  // stopping, and every task accepted has run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void InferenceServer::RunOnLoadThreads(std::vector<std::function<void()>> tasks) {
  Mutex done_mu;
  CondVar done_cv;
  size_t left = tasks.size();
  for (auto& task : tasks) {
    PostLifecycleTask([&, task = std::move(task)] {
      task();
      MutexLock lock(&done_mu);
      if (--left == 0) done_cv.NotifyAll();
    });
  }
  MutexLock lock(&done_mu);
  while (left > 0) done_cv.Wait(lock);
}

void InferenceServer::RunPolls() {
  using std::chrono::steady_clock;
  while (true) {
    {
      MutexLock lock(&tasks_mu_);
      const auto next_poll = steady_clock::now() + options_.repository_poll_interval;
      while (!stop_tasks_) {
        const auto now = steady_clock::now();
        if (now >= next_poll) break;
        tasks_cv_.WaitFor(lock, next_poll - now);
      }
      if (stop_tasks_) return;
    }
    PollRepositories(poller_.get());
  }
}

void InferenceServer::PollRepositories(RepositoryPoller* poller) {
  const PollActions actions = poller->Poll(SnapshotRepositories(options_.repositories));
  std::vector<std::function<void()>> work;
  for (const auto& [name, versions] : actions.load) {
    spdlog::info("repository poll: model '{}' changed{}{}, loading", name, versions.empty() ? "" : " in versions ",
                 fmt::join(versions, ", "));
    work.push_back([this, name = name, versions = versions] {
      (void)models_->Reload(name, versions);  // a failure is logged, counted and indexed by the manager
    });
  }
  for (const std::string& name : actions.unload) {
    spdlog::info("repository poll: model '{}' is gone, unloading", name);
    work.push_back([this, name] {
      (void)models_->Unload(name);
      rollouts_->Forget(name);
    });
  }
  RunOnLoadThreads(std::move(work));
}

void InferenceServer::PostModelControl(std::function<Status()> operation, std::function<void(Status)> done) {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return done(
        Status::FailedPrecondition("model control is disabled: start inferd with --model-control-mode "
                                   "explicit to load or unload models"));
  }
  {
    MutexLock lock(&tasks_mu_);
    if (tasks_.size() >= kMaxLifecycleTasks)
      return done(Status::Unavailable("too many pending load/unload requests"));
  }
  PostLifecycleTask([operation = std::move(operation), done = std::move(done)] { done(operation()); });
}

void InferenceServer::LoadModelAsync(std::string name, LoadOverride override, std::function<void(Status)> done) {
  PostModelControl([this, name = std::move(name), override = std::move(override)] { return models_->Load(name, override); },
                   std::move(done));
}

void InferenceServer::UnloadModelAsync(std::string name, std::function<void(Status)> done) {
  PostModelControl(
      [this, name = std::move(name)] {
        Status status = models_->Unload(name);
        if (status.ok()) rollouts_->Forget(name);
        return status;
      },
      std::move(done));
}

Status InferenceServer::SetTraffic(const std::string& model, std::optional<TrafficSplit> split,
                                   std::optional<VersionLabelMap> labels) {
  if (split) {
    if (auto rollout = rollouts_->Get(model); rollout.ok() && rollout->phase == RolloutPhase::kRunning) {
      return Status::FailedPrecondition("model '" + model + "': a rollout of version " +
                                        std::to_string(rollout->plan.version) +
                                        " drives its traffic split; roll it back first");
    }
  }
  return models_->SetTraffic(model, std::move(split), std::move(labels));
}

StatusOr<ModelTraffic> InferenceServer::Traffic(std::string_view model) const { return models_->Traffic(model); }

StatusOr<int64_t> InferenceServer::VersionForLabel(std::string_view model, std::string_view label) const {
  ASSIGN_OR_RETURN(ModelTraffic traffic, models_->Traffic(model));
  auto it = traffic.labels.find(label);
  if (it == traffic.labels.end()) {
    return Status::NotFound("model '" + std::string(model) + "' has no version label '" + std::string(label) + "'");
  }
  return it->second;
}

StatusOr<RolloutStatus> InferenceServer::StartRollout(const std::string& model, RolloutPlan plan) {
  return rollouts_->Start(model, std::move(plan));
}

StatusOr<RolloutStatus> InferenceServer::RollbackRollout(const std::string& model) { return rollouts_->Rollback(model); }

StatusOr<RolloutStatus> InferenceServer::Rollout(const std::string& model) const { return rollouts_->Get(model); }

void InferenceServer::CancelQueued() {
  for (auto& model : models_->AllLoaded()) model->CancelQueued();
}

void InferenceServer::BeginDrain() { draining_.store(true); }

bool InferenceServer::WaitForIdle(std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  MutexLock lock(&idle_mu_);
  while (inflight_.load() != 0) {
    const auto now = SteadyClock::now();
    if (now >= deadline) return false;
    idle_cv_.WaitFor(lock, deadline - now);
  }
  return true;
}

}  // namespace inferd
