#include "lifecycle/rollout.h"

#include <fmt/format.h>
#include <cmath>
#include <spdlog/spdlog.h>

#include "lifecycle/model_manager.h"

namespace inferd {

namespace {
constexpr int64_t kDefaultRetentionSeconds = 86400;
constexpr RolloutPhase kPhases[] = {RolloutPhase::kRunning, RolloutPhase::kCompleted, RolloutPhase::kRolledBack};

MetricLabels RolloutLabels(const std::string& model, int64_t version) {
  return {{"model", model}, {"version", std::to_string(version)}};
}
}  // namespace

std::string_view RolloutPhaseName(RolloutPhase phase) {
  switch (phase) {
    case RolloutPhase::kRunning:
      return "running";
    case RolloutPhase::kCompleted:
      return "completed";
    case RolloutPhase::kRolledBack:
      return "rolled_back";
  }
  return "unknown";
}

Status ValidateRolloutPlan(const RolloutPlan& plan) {
  if (plan.version <= 0) return Status::InvalidArgument("the rollout plan needs the new 'version'");
  if (plan.baseline < 0 || plan.baseline == plan.version) {
    return Status::InvalidArgument("the rollout's 'baseline' must be another version than the new one");
  }
  if (plan.steps.empty() || plan.steps.back() != 100) {
    return Status::InvalidArgument("the rollout's 'steps' must end at 100 (percent of traffic)");
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (plan.steps[i] == 0 || (i > 0 && plan.steps[i] <= plan.steps[i - 1])) {
      return Status::InvalidArgument("the rollout's 'steps' must rise from above 0 to 100, e.g. [5, 20, 100]");
    }
  }
  if (plan.dwell <= std::chrono::milliseconds(0)) {
    return Status::InvalidArgument("the rollout's 'dwell_seconds' must be above 0");
  }
  if (!(plan.max_error_rate >= 0 && plan.max_error_rate <= 1)) {
    return Status::InvalidArgument("the rollout's 'max_error_rate' must be within [0, 1]");
  }
  if (!(plan.max_p99_ratio > 0)) return Status::InvalidArgument("the rollout's 'max_p99_ratio' must be above 0");
  if (plan.min_requests == 0) return Status::InvalidArgument("the rollout's 'min_requests' must be at least 1");
  if (plan.retention_seconds && *plan.retention_seconds < 0) {
    return Status::InvalidArgument("the rollout's 'retention_seconds' must not be negative");
  }
  if (const auto& guard = plan.agreement) {
    if (!(guard->min_agreement > 0 && guard->min_agreement <= 1)) {
      return Status::InvalidArgument("the rollout's agreement 'min' must be within (0, 1]");
    }
    if (guard->mirror_percent == 0 || guard->mirror_percent > 100) {
      return Status::InvalidArgument("the rollout's agreement 'mirror_percent' must be within [1, 100]");
    }
    if (!(guard->tolerance >= 0 && std::isfinite(guard->tolerance))) {
      return Status::InvalidArgument("the rollout's agreement 'tolerance' must be a non-negative number");
    }
  }
  return Status::Ok();
}

StepJudgement JudgeStep(const RolloutPlan& plan, const StepWindow& candidate, const MirrorCounts& mirrored,
                        double baseline_p99, std::chrono::milliseconds in_step) {
  using Verdict = StepJudgement::Verdict;
  const bool agreement_judged = !plan.agreement || mirrored.compared >= plan.min_requests;
  if (plan.agreement && agreement_judged) {
    const double agreement = static_cast<double>(mirrored.agreed) / static_cast<double>(mirrored.compared);
    if (agreement < plan.agreement->min_agreement) {
      return {Verdict::kRollBack, "agreement",
              fmt::format("agreement {:.3f} ({} of {} mirrored requests answered alike) below the limit {:.3f}",
                          agreement, mirrored.agreed, mirrored.compared, plan.agreement->min_agreement)};
    }
  }
  const bool judged = candidate.requests >= plan.min_requests && agreement_judged;
  if (judged) {
    const double error_rate = static_cast<double>(candidate.errors) / static_cast<double>(candidate.requests);
    if (error_rate > plan.max_error_rate) {
      return {Verdict::kRollBack, "error_rate",
              fmt::format("error rate {:.3f} ({} of {} requests) above the limit {:.3f}", error_rate,
                          candidate.errors, candidate.requests, plan.max_error_rate)};
    }
    if (baseline_p99 > 0 && candidate.p99_seconds > plan.max_p99_ratio * baseline_p99) {
      return {Verdict::kRollBack, "latency",
              fmt::format("p99 {:.3f} ms is {:.2f}x the baseline's {:.3f} ms, above the limit {:.2f}x",
                          candidate.p99_seconds * 1e3, candidate.p99_seconds / baseline_p99, baseline_p99 * 1e3,
                          plan.max_p99_ratio)};
    }
  }
  // A step advances only once its guards were judged: too little traffic holds it.
  if (judged && in_step >= plan.dwell) return {Verdict::kAdvance, "", ""};
  return {Verdict::kHold, "", ""};
}

void RegisterRolloutMetricFamilies(MetricsRegistry* registry) {
  using Type = MetricsRegistry::Type;
  registry->Declare("inferd_rollout_traffic_percent", Type::kGauge,
                    "The share of a model's traffic its rollout gives the new version (label version).");
  registry->Declare("inferd_rollout_step", Type::kGauge, "The rollout's current step, from 1.");
  registry->Declare("inferd_rollout_state", Type::kGauge,
                    "1 for the rollout's state (running, completed, rolled_back), 0 for the others.");
  registry->Declare("inferd_rollout_rollbacks_total", Type::kCounter,
                    "Rollouts rolled back, by cause: error_rate, latency, agreement (guard rails) or manual.");
  registry->Declare("inferd_rollout_mirrored_total", Type::kCounter,
                    "Requests mirrored for a rollout's agreement guard, by outcome: agreed, disagreed, skipped.");
}

RolloutController::RolloutController(ModelManager* models, MetricsRegistry* metrics, RetireVersion retire)
    : models_(models), metrics_(metrics), retire_(std::move(retire)) {}

RolloutController::~RolloutController() = default;

RolloutController::Mark RolloutController::MarkOf(const std::string& model, int64_t version) const {
  Mark mark;
  auto loaded = models_->Find(model, version);
  if (!loaded.ok()) return mark;
  const ModelStats& stats = (*loaded)->stats();
  mark.model = *loaded;
  mark.successes = stats.success.count.load();
  mark.failures = stats.fail.count.load();
  mark.latencies = (*loaded)->latency().Snapshot();
  return mark;
}

StepWindow RolloutController::WindowSince(const std::string& model, int64_t version, Mark& mark) const {
  auto loaded = models_->Find(model, version);
  if (!loaded.ok()) return {};
  if (mark.model.lock() != *loaded) {
    mark = MarkOf(model, version);  // reloaded (or first seen): its counters started again
    return {};
  }
  const ModelStats& stats = (*loaded)->stats();
  const uint64_t successes = stats.success.count.load() - mark.successes;
  const uint64_t failures = stats.fail.count.load() - mark.failures;
  const auto latencies = LatencyHistogram::Between(mark.latencies, (*loaded)->latency().Snapshot());
  return {successes + failures, failures, LatencyHistogram::Quantile(latencies, 0.99)};
}

Status RolloutController::BeginStep(Rollout& rollout, size_t step, Clock::time_point now) {
  RolloutStatus& status = rollout.status;
  const uint32_t percent = status.plan.steps[step];
  TrafficSplit split{{status.plan.version, percent}};
  if (percent < 100) split[status.plan.baseline] = 100 - percent;
  RETURN_IF_ERROR(models_->SetTraffic(status.model, split, std::nullopt));
  status.step = step;
  status.percent = percent;
  status.in_step = std::chrono::milliseconds(0);
  status.candidate = {};
  status.baseline = {};
  rollout.step_start = now;
  rollout.candidate = MarkOf(status.model, status.plan.version);
  rollout.baseline = MarkOf(status.model, status.plan.baseline);
  status.mirrored = {};
  if (rollout.mirror != nullptr) rollout.mirror_mark = rollout.mirror->Counts();
  spdlog::info("rollout of model '{}' version {}: step {} of {}, {}% of traffic", status.model, status.plan.version,
               step + 1, status.plan.steps.size(), percent);
  ExportState(rollout);
  return Status::Ok();
}

void RolloutController::RollBack(Rollout& rollout, const std::string& cause, const std::string& reason) {
  RolloutStatus& status = rollout.status;
  Status set = models_->SetTraffic(status.model, TrafficSplit{{status.plan.baseline, 100}}, std::nullopt);
  if (!set.ok()) spdlog::error("rollback of model '{}': {}", status.model, set.message());
  StopMirroring(rollout);
  status.phase = RolloutPhase::kRolledBack;
  status.percent = 0;
  status.reason = reason;
  rollout.retire_at.reset();
  spdlog::warn("rollout of model '{}' version {} rolled back to version {}: {}", status.model, status.plan.version,
               status.plan.baseline, reason);
  MetricLabels labels = RolloutLabels(status.model, status.plan.version);
  labels.emplace_back("cause", cause);
  metrics_->AddCounter("inferd_rollout_rollbacks_total", labels)->Increment();
  ExportState(rollout);
}

void RolloutController::StopMirroring(Rollout& rollout) {
  if (rollout.mirror == nullptr) return;
  // The model may be gone (unloaded): nothing mirrors then anyway.
  (void)models_->SetMirror(rollout.status.model, nullptr);
  rollout.mirror.reset();
}

void RolloutController::ExportState(const Rollout& rollout) {
  const RolloutStatus& status = rollout.status;
  const MetricLabels labels = RolloutLabels(status.model, status.plan.version);
  metrics_->AddGauge("inferd_rollout_traffic_percent", labels)->Set(status.percent);
  metrics_->AddGauge("inferd_rollout_step", labels)->Set(static_cast<double>(status.step + 1));
  for (RolloutPhase phase : kPhases) {
    MetricLabels with_state = labels;
    with_state.emplace_back("state", std::string(RolloutPhaseName(phase)));
    metrics_->AddGauge("inferd_rollout_state", with_state)->Set(phase == status.phase ? 1 : 0);
  }
}

StatusOr<RolloutStatus> RolloutController::Start(const std::string& model, RolloutPlan plan) {
  RETURN_IF_ERROR(ValidateRolloutPlan(plan));
  ASSIGN_OR_RETURN(auto candidate, models_->Find(model, plan.version));
  if (plan.baseline == 0) {
    ASSIGN_OR_RETURN(plan.baseline, models_->BusiestVersion(model, plan.version));
  }
  ASSIGN_OR_RETURN(auto baseline, models_->Find(model, plan.baseline));
  if (!plan.retention_seconds) {
    auto seconds = SecondsParameter(baseline->config(), "rollback_retention_seconds", kDefaultRetentionSeconds);
    plan.retention_seconds = seconds.value_or(kDefaultRetentionSeconds);
  }
  MutexLock lock(&mu_);
  if (auto it = rollouts_.find(model); it != rollouts_.end() && it->second.status.phase == RolloutPhase::kRunning) {
    return Status::FailedPrecondition("model '" + model + "' has a rollout running (version " +
                                      std::to_string(it->second.status.plan.version) +
                                      "); roll it back before starting another");
  }
  Rollout rollout;
  rollout.status.model = model;
  rollout.status.plan = plan;
  // Stale gauges of an earlier rollout of another version would read as a second rollout.
  if (auto it = rollouts_.find(model); it != rollouts_.end()) {
    metrics_->RemoveSeries(RolloutLabels(model, it->second.status.plan.version));
  }
  if (plan.agreement) {
    MetricLabels labels = RolloutLabels(model, plan.version);
    auto counter = [&](const char* outcome) {
      MetricLabels with_outcome = labels;
      with_outcome.emplace_back("outcome", outcome);
      return metrics_->AddCounter("inferd_rollout_mirrored_total", with_outcome);
    };
    rollout.mirror = std::make_shared<TrafficMirror>(
        plan.baseline, plan.version, *plan.agreement,
        TrafficMirror::Counters{counter("agreed"), counter("disagreed"), counter("skipped")});
  }
  RETURN_IF_ERROR(BeginStep(rollout, 0, Clock::now()));
  if (rollout.mirror != nullptr) RETURN_IF_ERROR(models_->SetMirror(model, rollout.mirror));
  rollouts_[model] = std::move(rollout);
  return rollouts_[model].status;
}

StatusOr<RolloutStatus> RolloutController::Rollback(const std::string& model) {
  MutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end()) return Status::NotFound("model '" + model + "' has no rollout");
  Rollout& rollout = it->second;
  if (rollout.status.phase == RolloutPhase::kRolledBack) return rollout.status;
  if (rollout.status.baseline_retired) {
    return Status::FailedPrecondition("model '" + model + "': baseline version " +
                                      std::to_string(rollout.status.plan.baseline) +
                                      " was unloaded after its retention; load it to go back");
  }
  RollBack(rollout, "manual", "rolled back on request");
  return rollout.status;
}

StatusOr<RolloutStatus> RolloutController::Get(const std::string& model) const {
  MutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end()) return Status::NotFound("model '" + model + "' has no rollout");
  return it->second.status;
}

void RolloutController::Forget(const std::string& model) {
  MutexLock lock(&mu_);
  auto it = rollouts_.find(model);
  if (it == rollouts_.end()) return;
  metrics_->RemoveSeries(RolloutLabels(model, it->second.status.plan.version));
  rollouts_.erase(it);
}

void RolloutController::Evaluate(Rollout& rollout, Clock::time_point now) {
  RolloutStatus& status = rollout.status;
  const std::string& model = status.model;
  if (status.phase == RolloutPhase::kCompleted) {
    if (!rollout.retire_at || status.baseline_retired) return;
    status.retire_in_seconds =
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(*rollout.retire_at - now).count());
    if (now < *rollout.retire_at) return;
    status.baseline_retired = true;
    spdlog::info("rollout of model '{}': version {} retained {} s, unloading it", model, status.plan.baseline,
                 *status.plan.retention_seconds);
    retire_(model, status.plan.baseline);
    return;
  }
  if (status.phase != RolloutPhase::kRunning) return;
  if (!models_->Find(model, status.plan.version).ok()) {
    return RollBack(rollout, "manual", "version " + std::to_string(status.plan.version) + " was unloaded");
  }
  status.in_step = std::chrono::duration_cast<std::chrono::milliseconds>(now - rollout.step_start);
  status.candidate = WindowSince(model, status.plan.version, rollout.candidate);
  status.baseline = WindowSince(model, status.plan.baseline, rollout.baseline);
  if (rollout.mirror != nullptr) {
    const MirrorCounts now_counts = rollout.mirror->Counts();
    status.mirrored = {now_counts.compared - rollout.mirror_mark.compared, now_counts.agreed - rollout.mirror_mark.agreed,
                       now_counts.skipped - rollout.mirror_mark.skipped};
  }
  if (status.baseline.requests - status.baseline.errors >= status.plan.min_requests) {
    rollout.baseline_p99 = status.baseline.p99_seconds;
  }
  const StepJudgement judgement =
      JudgeStep(status.plan, status.candidate, status.mirrored, rollout.baseline_p99, status.in_step);
  switch (judgement.verdict) {
    case StepJudgement::Verdict::kHold:
      return;
    case StepJudgement::Verdict::kRollBack:
      return RollBack(rollout, judgement.cause, judgement.reason);
    case StepJudgement::Verdict::kAdvance:
      break;
  }
  if (status.step + 1 < status.plan.steps.size()) {
    if (Status begun = BeginStep(rollout, status.step + 1, now); !begun.ok()) {
      RollBack(rollout, "manual", "cannot set the next step's split: " + begun.message());
    }
    return;
  }
  StopMirroring(rollout);
  status.phase = RolloutPhase::kCompleted;
  rollout.retire_at = now + std::chrono::seconds(*status.plan.retention_seconds);
  status.retire_in_seconds = *status.plan.retention_seconds;
  spdlog::info("rollout of model '{}': version {} takes all traffic; version {} stays loaded {} s for a rollback",
               model, status.plan.version, status.plan.baseline, *status.plan.retention_seconds);
  ExportState(rollout);
}

void RolloutController::Tick(Clock::time_point now) {
  MutexLock lock(&mu_);
  for (auto& [model, rollout] : rollouts_) Evaluate(rollout, now);
}

}  // namespace inferd
