#include "lifecycle/model_version.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "common/classification.h"
#include "instances/lazy_model.h"
#include "instances/planned_batches.h"
#include "lifecycle/warmup.h"

namespace inferd {
namespace {

QueuePolicy QueuePolicyFromConfig(const inference::ModelQueuePolicy& policy) {
  return {.delay_on_timeout = policy.timeout_action() == inference::ModelQueuePolicy::DELAY,
          .default_timeout = Micros(policy.default_timeout_microseconds()),
          .allow_timeout_override = policy.allow_timeout_override(),
          .max_queue_size = policy.max_queue_size()};
}

uint64_t NowUnixMillis() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

SchedulerOptions SchedulerOptionsFromConfig(const ModelConfig& config) {
  SchedulerOptions options;
  options.rules.max_batch_size = config.max_batch_size();
  if (!config.has_dynamic_batching()) {
    options.level_policies = {QueuePolicy{}};
    return options;
  }
  const auto& batching = config.dynamic_batching();
  options.rules.dynamic = true;
  for (int size : batching.preferred_batch_size()) options.rules.preferred_sizes.push_back(size);
  std::sort(options.rules.preferred_sizes.begin(), options.rules.preferred_sizes.end());
  options.rules.max_queue_delay = Micros(batching.max_queue_delay_microseconds());
  // Validated at load: a bad value never gets here.
  options.rules.latency_target = Nanos(static_cast<int64_t>(LatencyTargetMs(config).value_or(0.0) * 1e6));
  options.rules.instances = InstanceCount(config);
  options.priority_levels = std::max<uint32_t>(1, static_cast<uint32_t>(batching.priority_levels()));
  options.default_priority =
      batching.priority_levels() == 0 ? 1 : static_cast<uint32_t>(batching.default_priority_level());
  for (uint32_t level = 1; level <= options.priority_levels; ++level) {
    auto it = batching.priority_queue_policy().find(level);
    options.level_policies.push_back(QueuePolicyFromConfig(
        it != batching.priority_queue_policy().end() ? it->second : batching.default_queue_policy()));
  }
  return options;
}

namespace {

uint64_t NextVersionSerial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

// The server's response cache when the config enables it; a config that enables it on a server
// without one (--cache-size 0) is served uncached, with a warning.
ResponseCache* CacheFor(const ModelConfig& config, int64_t version, ResponseCache* cache) {
  if (!config.response_cache().enable()) return nullptr;
  if (cache == nullptr) {
    spdlog::warn("model '{}' version {}: response_cache is enabled but the server has no cache (--cache-size 0): "
                 "requests are not cached",
                 config.name(), version);
  }
  return cache;
}

}  // namespace

ModelVersion::ModelVersion(const ModelConfig& config, int64_t version, const LoadContext& context)
    : config_(config),
      version_(version),
      serial_(NextVersionSerial()),
      cache_(CacheFor(config, version, context.response_cache)),
      clock_(context.clock),
      registry_(context.metrics),
      metrics_(ModelMetrics::Bind(context.metrics, config.name(), version)),
      orderer_(config.dynamic_batching().preserve_ordering() ? std::make_unique<ResponseOrderer>() : nullptr),
      scheduler_(std::make_unique<Scheduler>(SchedulerOptionsFromConfig(config), context.clock)) {
  BindCacheMetrics();
}

ModelVersion::ModelVersion(const ModelConfig& config, int64_t version, std::shared_ptr<EnsembleRunner> ensemble,
                           std::shared_ptr<RouterRunner> router, const LoadContext& context)
    : config_(config),
      version_(version),
      serial_(NextVersionSerial()),
      cache_(CacheFor(config, version, context.response_cache)),
      clock_(context.clock),
      registry_(context.metrics),
      metrics_(ModelMetrics::Bind(context.metrics, config.name(), version)),
      ensemble_(std::move(ensemble)),
      router_(std::move(router)) {
  BindCacheMetrics();
}

void ModelVersion::BindCacheMetrics() {
  if (cache_ == nullptr) return;
  cache_hits_ = registry_->AddCounter("inferd_cache_hits_total", ModelLabels(name(), version_));
  cache_misses_ = registry_->AddCounter("inferd_cache_misses_total", ModelLabels(name(), version_));
}

namespace {

// Each output's label_filename, read from the model folder (Triton's classification labels).
Status ReadOutputLabels(const ModelConfig& config, const std::filesystem::path& model_dir,
                        std::map<std::string, std::vector<std::string>, std::less<>>* labels) {
  for (const auto& output : config.output()) {
    if (output.label_filename().empty()) continue;
    auto read = ReadLabelFile(model_dir / output.label_filename());
    if (!read.ok()) return read.status().WithPrefix("model '" + config.name() + "' output '" + output.name() + "'");
    (*labels)[output.name()] = std::move(read).value();
  }
  return Status::Ok();
}

// The parameter "quality", checked against the config's outputs; none without it.
StatusOr<std::optional<QualitySpec>> QualitySpecOf(const ModelConfig& config) {
  const std::optional<std::string> text = ConfigParameter(config, "quality");
  if (!text) return std::optional<QualitySpec>();
  ASSIGN_OR_RETURN(QualitySpec spec, ParseQualitySpec(*text));
  const bool known = std::ranges::any_of(config.output(), [&](const auto& output) { return output.name() == spec.output; });
  if (!known) return Status::InvalidArgument("parameter 'quality': the model has no output '" + spec.output + "'");
  return std::optional<QualitySpec>(std::move(spec));
}

// Values per row of a config tensor: the product of its dims; -1 when one is variable.
template <typename TensorConfig>
int64_t RowSize(const TensorConfig& tensor) {
  int64_t size = 1;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0) return -1;
    size *= dim;
  }
  return size;
}

// The parameter "drift", checked against the config's tensors, with its reference files read; none
// without it.
StatusOr<std::unique_ptr<DriftMonitor>> DriftMonitorOf(const ModelConfig& config, const std::filesystem::path& model_dir) {
  const std::optional<std::string> text = ConfigParameter(config, "drift");
  if (!text) return std::unique_ptr<DriftMonitor>();
  ASSIGN_OR_RETURN(DriftSpec spec, ParseDriftSpec(*text));
  std::vector<std::pair<std::string, int64_t>> row_sizes;
  for (const auto& input : config.input()) row_sizes.emplace_back(input.name(), RowSize(input));
  for (const auto& output : config.output()) row_sizes.emplace_back(output.name(), RowSize(output));
  return DriftMonitor::Create(std::move(spec), row_sizes, model_dir);
}

}  // namespace

StatusOr<std::shared_ptr<ModelVersion>> ModelVersion::PrepareEnsemble(const ModelConfig& config, int64_t version,
                                                                      std::shared_ptr<const EnsemblePlan> plan,
                                                                      StepDispatch dispatch,
                                                                      const std::filesystem::path& model_dir,
                                                                      const LoadContext& context) {
  auto runner = EnsembleRunner::Create(std::move(plan), version, std::move(dispatch), context.clock);
  std::shared_ptr<ModelVersion> model(new ModelVersion(config, version, std::move(runner), nullptr, context));
  RETURN_IF_ERROR(ReadOutputLabels(config, model_dir, &model->output_labels_));
  ASSIGN_OR_RETURN(model->quality_spec_, QualitySpecOf(config));
  ASSIGN_OR_RETURN(model->drift_, DriftMonitorOf(config, model_dir));
  return model;
}

StatusOr<std::shared_ptr<ModelVersion>> ModelVersion::PrepareRouter(const ModelConfig& config, int64_t version,
                                                                    std::shared_ptr<const RouterPlan> plan,
                                                                    RouterServices services, const LoadContext& context) {
  services.metrics = context.metrics;
  services.clock = context.clock;
  ASSIGN_OR_RETURN(std::shared_ptr<RouterRunner> runner, RouterRunner::Create(std::move(plan), version, std::move(services)));
  return std::shared_ptr<ModelVersion>(new ModelVersion(config, version, nullptr, std::move(runner), context));
}

bool ModelVersion::stopped() const {
  if (ensemble_) return ensemble_->stopped();
  if (router_) return router_->stopped();
  return scheduler_->IsShutDown();
}

void ModelVersion::Tick() {
  if (router_) router_->Tick();
  if (drift_) drift_->Evaluate(static_cast<int64_t>(NowUnixMillis()));
}

const std::vector<std::string>* ModelVersion::OutputLabels(std::string_view output) const {
  auto it = output_labels_.find(output);
  return it == output_labels_.end() ? nullptr : &it->second;
}

void ModelVersion::RegisterStepMetrics() {
  // Read at scrape time from the runner's StepStats (the /stats counts): nothing added per request.
  for (size_t i = 0; i < ensemble_->plan().steps.size(); ++i) {
    MetricLabels labels = ModelLabels(name(), version_);
    labels.emplace_back("step", std::to_string(i + 1));
    labels.emplace_back("step_model", ensemble_->plan().steps[i].model_name);
    auto read = [runner = ensemble_, i](auto field) {
      return [runner, i, field] { return static_cast<double>((runner->step_stats(i).*field).load(std::memory_order_relaxed)); };
    };
    auto with_outcome = [&](const char* outcome) {
      MetricLabels l = labels;
      l.emplace_back("outcome", outcome);
      return l;
    };
    registry_->AddScrapedValue("inferd_ensemble_step_requests_total", with_outcome("success"), read(&StepStats::success));
    registry_->AddScrapedValue("inferd_ensemble_step_requests_total", with_outcome("failed"), read(&StepStats::fail));
    registry_->AddScrapedValue("inferd_ensemble_step_inflight_requests", labels, read(&StepStats::in_flight));
    registry_->AddScrapedValue("inferd_ensemble_step_duration_seconds_total", labels, [runner = ensemble_, i] {
      return NanosToSeconds(static_cast<int64_t>(runner->step_stats(i).total_ns.load(std::memory_order_relaxed)));
    });
    if (ensemble_->breaker(i) == nullptr) continue;
    registry_->AddScrapedValue("inferd_circuit_breaker_state", labels, [runner = ensemble_, i] {
      return static_cast<double>(runner->breaker(i)->state());
    });
  }
}

size_t ModelVersion::QueueDepth() const {
  if (ensemble_) return static_cast<size_t>(ensemble_->runs_in_flight());
  if (router_) return static_cast<size_t>(router_->runs_in_flight());
  return scheduler_->QueueDepth();
}

namespace {

// Asks for the memory of instance `index` (0-based): twice the model's files for the first, what
// the first holds once prepared for the others (lifecycle/memory_admission.h).
StatusOr<MemoryAdmission::Reservation> AdmitInstance(const ModelConfig& config, const std::filesystem::path& version_dir,
                                                     int index, int count, const std::optional<MemoryFootprint>& first,
                                                     MemoryAdmission* memory) {
  if (memory == nullptr) return MemoryAdmission::Reservation();
  std::string what = "model '" + config.name() + "' version " + version_dir.filename().string();
  if (count > 1) what += ", instance " + std::to_string(index + 1) + " of " + std::to_string(count) + ",";
  if (index == 0 || !first) {
    // The weights as loaded and again as packed for the kernels: resnet50 holds 158 MiB of them for
    // a 97 MiB file. The arena is unknown until the instance is planned.
    const int64_t files = ModelFilesBytes(version_dir);
    return memory->Admit(2 * files, what, "twice its files' size, before it is planned");
  }
  return memory->Admit(first->total(), what,
                       "weights " + Mebibytes(first->weights_bytes) + " + working memory " +
                           Mebibytes(first->working_bytes) + ", as instance 1 holds");
}

// Loads, prepares (planned batch sizes) and warms up every instance; `warmup_ns` gets the time of
// the last two.
Status BuildInstances(const ModelConfig& config, const std::filesystem::path& version_dir,
                      const ModelVersion::LoadContext& context, std::vector<std::unique_ptr<Model>>* instances,
                      int64_t* warmup_ns) {
  const int count = InstanceCount(config);
  ASSIGN_OR_RETURN(const bool lazy, LoadsLazily(config));
  std::optional<MemoryFootprint> first_footprint;
  for (int i = 0; i < count; ++i) {
    if (lazy) {
      instances->push_back(std::make_unique<LazyModel>(context.backend, config,
                                                       LoadOptions{version_dir, context.intra_op_threads}));
      continue;
    }
    // Held until this instance is prepared, when the working set has taken it over.
    ASSIGN_OR_RETURN(MemoryAdmission::Reservation reservation,
                     AdmitInstance(config, version_dir, i, count, first_footprint, context.memory));
    auto loaded = context.backend->Load(config, {version_dir, context.intra_op_threads});
    if (!loaded.ok()) return loaded.status();
    const TimePoint prepare_start = SteadyClock::now();
    ASSIGN_OR_RETURN(std::unique_ptr<Model> prepared, PrepareBatchSizes(std::move(loaded).value(), config));
    *warmup_ns += NanosBetween(prepare_start, SteadyClock::now());
    if (i == 0) first_footprint = prepared->Footprint();
    if (i == 0 && first_footprint) {
      spdlog::info("model '{}' version {}: an instance holds weights {} + working memory {}", config.name(),
                   version_dir.filename().string(), Mebibytes(first_footprint->weights_bytes),
                   Mebibytes(first_footprint->working_bytes));
    }
    instances->push_back(std::move(prepared));
  }
  const TimePoint warmup_start = SteadyClock::now();
  for (auto& instance : *instances) {
    RETURN_IF_ERROR(RunWarmup(config, version_dir.parent_path(), instance.get()));
  }
  *warmup_ns += NanosBetween(warmup_start, SteadyClock::now());
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<ModelVersion>> ModelVersion::Load(const ModelConfig& config, int64_t version,
                                                           const std::filesystem::path& version_dir,
                                                           const LoadContext& context) {
  ASSIGN_OR_RETURN(std::shared_ptr<ModelVersion> model, Prepare(config, version, version_dir, context));
  model->Start();
  return model;
}

StatusOr<std::shared_ptr<ModelVersion>> ModelVersion::Prepare(const ModelConfig& config, int64_t version,
                                                              const std::filesystem::path& version_dir,
                                                              const LoadContext& context) {
  const TimePoint start = SteadyClock::now();
  std::shared_ptr<ModelVersion> model(new ModelVersion(config, version, context));
  ASSIGN_OR_RETURN(const int64_t keep_warm_seconds, SecondsParameter(config, "keep_warm_interval_seconds", 0));
  if (keep_warm_seconds > 0) {
    ASSIGN_OR_RETURN(model->keep_warm_inputs_, KeepWarmInputs(config, version_dir.parent_path()));
    model->keep_warm_interval_ = std::chrono::seconds(keep_warm_seconds);
  }
  RETURN_IF_ERROR(ReadOutputLabels(config, version_dir.parent_path(), &model->output_labels_));
  ASSIGN_OR_RETURN(model->quality_spec_, QualitySpecOf(config));
  ASSIGN_OR_RETURN(model->drift_, DriftMonitorOf(config, version_dir.parent_path()));
  int64_t warmup_ns = 0;
  RETURN_IF_ERROR(BuildInstances(config, version_dir, context, &model->prepared_, &warmup_ns));
  model->load_seconds_ = NanosToSeconds(NanosBetween(start, SteadyClock::now()));
  model->warmup_seconds_ = NanosToSeconds(warmup_ns);
  return model;
}

void ModelVersion::Start() {
  const TimePoint start = SteadyClock::now();
  const int count = static_cast<int>(prepared_.size());
  ModelVersion* raw = this;
  if (!composite()) {
    instances_ = std::make_unique<InstancePool>(
        name(), version_, config_.max_batch_size() > 0, scheduler_.get(), std::move(prepared_),
        [raw](const ExecutionReport& report) { raw->OnExecution(report); }, clock_,
        InstanceCpuPolicyOf(config_).value_or({}));
    prepared_.clear();
    instances_->Start();
  }
  registry_->AddScrapedValue("inferd_queue_depth", ModelLabels(name(), version_),
                              [raw] { return static_cast<double>(raw->QueueDepth()); });
  if (config_.max_batch_size() > 0) {
    // Batch efficiency is rate(inferd_inferences_total) / rate(inferd_executions_total) / this.
    registry_->AddGauge("inferd_model_max_batch_size", ModelLabels(name(), version_))
        ->Set(static_cast<double>(config_.max_batch_size()));
  }
  if (scheduler_ && scheduler_->options().rules.latency_target.count() > 0) {
    // What the latency target lets the batcher take now (scheduler/batch_policy.h).
    registry_->AddScrapedValue("inferd_batch_size_limit", ModelLabels(name(), version_),
                                [raw] { return static_cast<double>(raw->scheduler_->BatchSizeLimit()); });
  }
  if (ensemble_) RegisterStepMetrics();
  if (drift_) drift_->BindMetrics(registry_, ModelLabels(name(), version_));
  if (quality_spec_) {
    const std::vector<std::string>* labels = OutputLabels(quality_spec_->output);
    quality_ = std::make_unique<QualityTracker>(*quality_spec_, labels ? *labels : std::vector<std::string>{},
                                                registry_, ModelLabels(name(), version_), clock_);
  }
  load_seconds_ += NanosToSeconds(NanosBetween(start, SteadyClock::now()));
  metrics_.load_duration->Set(load_seconds_);
  metrics_.warmup_duration->Set(warmup_seconds_);
  last_activity_ns_.store(clock_->Now().time_since_epoch().count());
  if (router_) {
    spdlog::info("loaded router '{}' version {} ({} rules, {} targets)", name(), version_,
                 router_->plan().rules.size(), router_->targets().size());
  } else if (ensemble_) {
    spdlog::info("loaded ensemble '{}' version {} ({} steps)", name(), version_, ensemble_->plan().steps.size());
  } else {
    spdlog::info("loaded model '{}' version {} ({} instance(s))", name(), version_, count);
  }
}

ModelVersion::~ModelVersion() {
  StopAndDrain();
  if (cache_ != nullptr) cache_->EraseVersion(serial_);
}

void ModelVersion::StopAndDrain() {
  if (ensemble_) return ensemble_->StopAndDrain();
  if (router_) return router_->StopAndDrain();
  scheduler_->Shutdown();
  if (instances_) instances_->Join();
}

void ModelVersion::CancelQueued() {
  // An ensemble's steps wait in their own models' queues, which are cancelled with them.
  if (!composite()) scheduler_->CancelQueued(Status::Cancelled("server is shutting down"));
}

ModelVersion::Timings ModelVersion::timings() const {
  const int64_t first = first_request_ns_.load();
  return {load_seconds_, warmup_seconds_, first < 0 ? -1.0 : NanosToSeconds(first)};
}

Status ModelVersion::EnqueueKeepWarm(ValidatedRequest validated) {
  if (composite()) return Status::FailedPrecondition("model '" + name() + "': keep-warm runs are its steps' or targets' own");
  if (keep_warm_in_flight_.exchange(true)) return Status::Ok();
  last_activity_ns_.store(clock_->Now().time_since_epoch().count(), std::memory_order_relaxed);
  PendingRequest pending{
      .request = std::move(validated.request),
      .done =
          [this](StatusOr<InferResponse> result, const RequestTimings&) {
            if (result.ok()) {
              metrics_.keep_warm_runs->Increment();
            } else {
              spdlog::warn("model '{}' version {}: keep-warm run failed: {}", name(), version_, result.status().message());
            }
            keep_warm_in_flight_.store(false);
          },
      .batch_size = validated.batch_size,
      .shape_key = validated.shape_key,
  };
  Status status = scheduler_->Enqueue(pending);
  if (!status.ok()) keep_warm_in_flight_.store(false);
  return status;
}

bool ModelVersion::AnswerFromCache(const InferRequest& request, InferCallback& done) {
  const TimePoint start = clock_->Now();
  const ResponseCacheKey key = ResponseCache::KeyOf(serial_, request);
  if (std::optional<std::vector<Tensor>> outputs = cache_->Lookup(key)) {
    const int64_t ns = NanosBetween(start, clock_->Now());
    cache_hits_->Increment();
    metrics_.success->Increment();
    metrics_.request_duration->Observe(NanosToSeconds(ns));
    stats_.cache_hit.Add(ns);
    stats_.success.Add(ns);
    stats_.last_inference_ms.store(NowUnixMillis(), std::memory_order_relaxed);
    done(InferResponse{.model_name = name(), .model_version = version_, .id = request.id, .outputs = std::move(*outputs)});
    return true;
  }
  cache_misses_->Increment();
  stats_.cache_miss.Add(NanosBetween(start, clock_->Now()));
  done = [this, key, done = std::move(done)](StatusOr<InferResponse> result) {
    if (result.ok()) cache_->Insert(key, result->outputs);
    done(std::move(result));
  };
  return false;
}

Status ModelVersion::Enqueue(ValidatedRequest&& validated, InferCallback done) {
  if (cache_ != nullptr && AnswerFromCache(*validated.request, done)) return Status::Ok();
  if (composite()) return EnqueueCompositeRun(std::move(validated), std::move(done));
  const int64_t batch_size = validated.batch_size;
  const uint64_t ticket = orderer_ ? orderer_->Admit() : 0;
  PendingRequest pending{
      .request = std::move(validated.request),
      .done =
          [this, batch_size, ticket, done = std::move(done)](StatusOr<InferResponse> result,
                                                             const RequestTimings& timings) mutable {
            OnComplete(std::move(result), timings, batch_size, ticket, done);
          },
      .batch_size = batch_size,
      .shape_key = validated.shape_key,
  };
  metrics_.inflight->Add(1);
  Status status = scheduler_->Enqueue(pending);
  if (!status.ok()) {
    validated.request = std::move(pending.request);
    if (orderer_) orderer_->Withdraw(ticket);
    metrics_.inflight->Add(-1);
    metrics_.rejected->Increment();
    stats_.fail.Add(0);
  }
  return status;
}

Status ModelVersion::EnqueueCompositeRun(ValidatedRequest&& validated, InferCallback done) {
  const int64_t batch_size = validated.batch_size;
  const uint64_t ticket = orderer_ ? orderer_->Admit() : 0;
  const TimePoint start = clock_->Now();
  // The statistics' queue and compute of an ensemble are its steps' summed (as Triton reports
  // them): the run's timings are laid out that way.
  InferCallback run_done = [this, batch_size, ticket, start, done = std::move(done)](StatusOr<InferResponse> result) mutable {
    RequestTimings timings{.enqueued = start, .exec_start = start, .input_done = start, .infer_done = start, .output_done = start};
    if (result.ok()) {
      timings.exec_start = timings.input_done = start + std::chrono::nanoseconds(result->queue_ns);
      timings.infer_done = timings.output_done = timings.exec_start + std::chrono::nanoseconds(result->compute_ns);
    }
    OnComplete(std::move(result), timings, batch_size, ticket, done);
  };
  metrics_.inflight->Add(1);
  Status status = ensemble_ ? ensemble_->Run(validated.request, run_done) : router_->Run(validated.request, run_done);
  if (!status.ok()) {
    if (orderer_) orderer_->Withdraw(ticket);
    metrics_.inflight->Add(-1);
    metrics_.rejected->Increment();
    stats_.fail.Add(0);
  }
  return status;
}

void ModelVersion::OnComplete(StatusOr<InferResponse> result, const RequestTimings& timings,
                              int64_t batch_size, uint64_t ticket, InferCallback& done) {
  const TimePoint now = clock_->Now();
  last_activity_ns_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  const int64_t total_ns = NanosBetween(timings.enqueued, now);
  metrics_.inflight->Add(-1);
  metrics_.request_duration->Observe(NanosToSeconds(total_ns));
  if (result.ok()) {
    const int64_t queue_ns = NanosBetween(timings.enqueued, timings.exec_start);
    stats_.success.Add(total_ns);
    latency_.Observe(total_ns);
    if (first_request_ns_.load(std::memory_order_relaxed) < 0) {
      int64_t unset = -1;
      if (first_request_ns_.compare_exchange_strong(unset, total_ns)) {
        registry_->AddGauge("inferd_model_first_request_duration_seconds", ModelLabels(name(), version_))
            ->Set(NanosToSeconds(total_ns));
      }
    }
    stats_.queue.Add(queue_ns);
    if (!composite()) {
      result->queue_ns = queue_ns;
      result->compute_ns = NanosBetween(timings.exec_start, timings.output_done);
    }
    stats_.compute_input.Add(NanosBetween(timings.exec_start, timings.input_done));
    stats_.compute_infer.Add(NanosBetween(timings.input_done, timings.infer_done));
    stats_.compute_output.Add(NanosBetween(timings.infer_done, timings.output_done));
    stats_.inference_count.fetch_add(static_cast<uint64_t>(batch_size), std::memory_order_relaxed);
    stats_.last_inference_ms.store(NowUnixMillis(), std::memory_order_relaxed);
    metrics_.success->Increment();
    metrics_.inferences->Increment(static_cast<uint64_t>(batch_size));
    metrics_.queue_duration->Observe(NanosToSeconds(queue_ns));
    metrics_.compute_duration->Observe(NanosToSeconds(NanosBetween(timings.exec_start, timings.output_done)));
  } else {
    stats_.fail.Add(total_ns);
    switch (result.status().code()) {
      case StatusCode::kDeadlineExceeded:
        metrics_.timeout->Increment();
        break;
      case StatusCode::kCancelled:
        metrics_.cancelled->Increment();
        break;
      default:
        metrics_.failed->Increment();
        break;
    }
  }
  if (!orderer_) return done(std::move(result));
  orderer_->Complete(
      ticket, [done = std::move(done), result = std::move(result)]() mutable { done(std::move(result)); });
}

void ModelVersion::OnExecution(const ExecutionReport& report) {
  if (report.prepared_shapes > 0) metrics_.shape_preparations->Increment(static_cast<uint64_t>(report.prepared_shapes));
  if (!report.ok) return;
  stats_.execution_count.fetch_add(1, std::memory_order_relaxed);
  metrics_.executions->Increment();
  metrics_.batch_size->Observe(static_cast<double>(report.batch_size));
}

}  // namespace inferd
