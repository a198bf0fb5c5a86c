// Canary rollouts that advance or roll back by themselves.
//
// A plan moves the traffic of one model from a baseline version to a new one in steps (5% -> 20%
// -> 100%), each held for a dwell time. During every step, once the new version has answered
// `min_requests` requests in it, its guard rails are checked on every tick (4 per second): its
// error rate within the step, its p99 against the baseline's p99 in the same step, and, with an
// agreement guard, once as many mirrored pairs were compared, the share of them whose answers
// agreed (lifecycle/mirror.h). Crossing any sends all traffic back to the baseline at once (the split changes without waiting for
// any load), logs why, and counts it. After the dwell of a step whose guards held, the next step
// begins; the dwell of the last (100%) step done, the rollout is complete and the baseline stays
// loaded for its retention time (rollback_retention_seconds) so that a rollback stays instant,
// after which it is unloaded.
//
// JudgeStep is the rule, kept pure so that unit tests pin it; RolloutController applies it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/traffic_plan.h"
#include "lifecycle/mirror.h"
#include "common/status.h"
#include "metrics/latency_histogram.h"
#include "metrics/metrics_registry.h"

namespace inferd {

class ModelManager;
class ModelVersion;

// Checks a plan's numbers (not whether its versions are loaded).
Status ValidateRolloutPlan(const RolloutPlan& plan);

enum class RolloutPhase { kRunning, kCompleted, kRolledBack };
std::string_view RolloutPhaseName(RolloutPhase phase);  // "running", "completed", "rolled_back"

// What one version did within the current step.
struct StepWindow {
  uint64_t requests = 0;  // answered, successfully or not
  uint64_t errors = 0;
  double p99_seconds = 0;  // of successful requests; 0 with none
};

struct StepJudgement {
  enum class Verdict { kHold, kAdvance, kRollBack } verdict = Verdict::kHold;
  std::string cause;   // for a rollback: "error_rate", "latency" or "agreement" (the metric's label)
  std::string reason;  // for a rollback: the numbers, for logs and GET
};

// The rule for one tick of a step. `baseline_p99` is the baseline's p99 in this step, or, when it
// served too few requests in it (the 100% step), in the last step where it served enough; 0 when
// unknown (the latency guard waits). `mirrored`: the pairs compared in this step (no agreement
// guard: ignored).
StepJudgement JudgeStep(const RolloutPlan& plan, const StepWindow& candidate, const MirrorCounts& mirrored,
                        double baseline_p99, std::chrono::milliseconds in_step);

struct RolloutStatus {
  std::string model;
  RolloutPlan plan;  // with its baseline resolved
  RolloutPhase phase = RolloutPhase::kRunning;
  size_t step = 0;        // index into plan.steps
  uint32_t percent = 0;   // the new version's share now
  std::string reason;     // why it rolled back
  StepWindow candidate;   // the current step's window so far
  StepWindow baseline;
  MirrorCounts mirrored;  // the current step's mirrored pairs (agreement guard)
  std::chrono::milliseconds in_step{0};
  bool baseline_retired = false;  // unloaded after its retention
  int64_t retire_in_seconds = -1;  // completed: seconds until the baseline is unloaded
};

class RolloutController {
 public:
  using Clock = std::chrono::steady_clock;
  // Unloads one version after its retention; called from Tick (the ticker thread), must not block on
  // a load (it posts the work elsewhere).
  using RetireVersion = std::function<void(const std::string& model, int64_t version)>;

  RolloutController(ModelManager* models, MetricsRegistry* metrics, RetireVersion retire);
  ~RolloutController();

  // Starts the plan on `model` (replacing a finished one; a running one must be rolled back
  // first). Sets the first step's split at once.
  StatusOr<RolloutStatus> Start(const std::string& model, RolloutPlan plan);
  // All traffic back to the baseline now (running, or completed while the baseline is retained).
  StatusOr<RolloutStatus> Rollback(const std::string& model);
  StatusOr<RolloutStatus> Get(const std::string& model) const;
  // Forgets the model's rollout (the model was unloaded).
  void Forget(const std::string& model);

  // One evaluation of every rollout: the server's ticker thread calls it 4 times a second; unit
  // tests drive it with their own clock.
  void Tick(Clock::time_point now);

 private:
  // A version's counters at the start of a step, to subtract from later ones.
  struct Mark {
    std::weak_ptr<const ModelVersion> model;  // a reload of the same version restarts the window
    uint64_t successes = 0, failures = 0;
    LatencyHistogram::Counts latencies{};
  };
  struct Rollout {
    RolloutStatus status;
    Clock::time_point step_start;
    Mark candidate, baseline;
    double baseline_p99 = 0;  // last step's with enough baseline requests
    std::shared_ptr<TrafficMirror> mirror;  // while running with an agreement guard
    MirrorCounts mirror_mark;               // its counts at the start of the step
    std::optional<Clock::time_point> retire_at;
  };

  Status BeginStep(Rollout& rollout, size_t step, Clock::time_point now) REQUIRES(mu_);
  void RollBack(Rollout& rollout, const std::string& cause, const std::string& reason) REQUIRES(mu_);
  void StopMirroring(Rollout& rollout) REQUIRES(mu_);
  void Evaluate(Rollout& rollout, Clock::time_point now) REQUIRES(mu_);
  Mark MarkOf(const std::string& model, int64_t version) const;
  // The window since `mark`; resets `mark` when the version was reloaded since.
  StepWindow WindowSince(const std::string& model, int64_t version, Mark& mark) const;
  void ExportState(const Rollout& rollout) REQUIRES(mu_);

  ModelManager* const models_;
  MetricsRegistry* const metrics_;
  const RetireVersion retire_;

  mutable Mutex mu_;
  std::map<std::string, Rollout, std::less<>> rollouts_ GUARDED_BY(mu_);
};

void RegisterRolloutMetricFamilies(MetricsRegistry* registry);

}  // namespace inferd
