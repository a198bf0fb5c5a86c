#include "core/model_view.h"

#include "lifecycle/model_version.h"

namespace inferd {

ModelView::ModelView(std::shared_ptr<const ModelVersion> model) : model_(std::move(model)) {}

const ModelConfig& ModelView::config() const { return model_->config(); }
const std::string& ModelView::name() const { return model_->name(); }
int64_t ModelView::version() const { return model_->version(); }
const ModelStats& ModelView::stats() const { return model_->stats(); }
bool ModelView::is_ensemble() const { return model_->ensemble() != nullptr; }

std::vector<EnsembleStepView> ModelView::EnsembleSteps() const {
  std::vector<EnsembleStepView> steps;
  const EnsembleRunner* runner = model_->ensemble();
  if (runner == nullptr) return steps;
  for (size_t i = 0; i < runner->plan().steps.size(); ++i) {
    const EnsembleStep& step = runner->plan().steps[i];
    const StepStats& stats = runner->step_stats(i);
    steps.push_back({step.model_name, step.model_version, stats.in_flight.load(), runner->StepCapacity(i), stats.success.load(),
                     stats.fail.load(), stats.queue_ns.load(), stats.compute_ns.load(), stats.total_ns.load()});
  }
  return steps;
}

bool ModelView::is_router() const { return model_->router() != nullptr; }

std::vector<RouterTargetView> ModelView::RouterTargets() const {
  std::vector<RouterTargetView> targets;
  const RouterRunner* runner = model_->router();
  if (runner == nullptr) return targets;
  for (size_t i = 0; i < runner->targets().size(); ++i) {
    const RouterTargetStats& stats = runner->target_stats(i);
    const CircuitBreaker* breaker = runner->breaker(i);
    targets.push_back({DescribeTarget(runner->targets()[i]), stats.requests.load(), stats.errors.load(),
                       stats.in_flight.load(), stats.recent_p99_ms.load(), stats.predicted_rps.load(),
                       breaker ? std::string(BreakerStateName(breaker->state())) : "", runner->ChannelState(i)});
  }
  return targets;
}

std::vector<std::pair<std::string, uint64_t>> ModelView::RouterRuleMatches() const {
  std::vector<std::pair<std::string, uint64_t>> matches;
  const RouterRunner* runner = model_->router();
  if (runner == nullptr) return matches;
  for (size_t i = 0; i < runner->plan().rules.size(); ++i) matches.emplace_back(runner->plan().rules[i].name, runner->rule_matches(i));
  return matches;
}

}  // namespace inferd
