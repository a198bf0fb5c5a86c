// Serves one loaded router version (pipeline/router_plan.h): picks each request's target by the
// rules, first match wins, and forwards the request whole (its tensors by pointer) to a local
// model through the server's own door, or to a remote pool; or runs the cascade, tier by tier,
// until a tier's answer is confident enough. Nothing waits on a thread: an answer continues the
// request from the thread that answered.
//
// The answer is the target's, under the router's name and version, with two response parameters:
// `routed_to` (the target that answered: "model NAME", "model NAME@V" or "pool NAME") and, in a
// cascade, `tier` (1 for the first). Its outputs are those the client asked for (all of the
// router's when it names none).
//
// Deadlines: the request's budget (its client deadline or KServe timeout) binds every target: a
// local target gets what is left as its client deadline, a pool as the gRPC deadline (capped by
// the pool's timeout_ms). A cascade's tiers share the one budget.
//
// Facts the rules read: input sizes and dimensions and request parameters from the request;
// queue_depth of a local model is its queue now, of a pool this router's calls in flight there;
// p99_ms is this router's requests' p99 at that target over the last 10 s (updated every second);
// predicted_rps of a local model is the server's forecast of its request rate, of a pool the
// forecast of this router's requests to it (pipeline/load_forecast.h); complexity is the plan's
// score.
//
// Circuit breakers: a target with circuit_breaker.NAME fails fast with UNAVAILABLE, or goes to the
// breaker's fallback model, while open; its answers are what the breaker counts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/infer_request.h"
#include "common/mutex.h"
#include "metrics/latency_histogram.h"
#include "metrics/metrics_registry.h"
#include "pipeline/circuit_breaker.h"
#include "pipeline/run_gate.h"
#include "pipeline/ensemble_runner.h"
#include "pipeline/load_forecast.h"
#include "pipeline/remote_pool.h"
#include "pipeline/router_plan.h"

namespace inferd {

class RouterRun;

// What a router needs from the server, as narrow views.
struct RouterServices {
  StepDispatch dispatch;        // a local target's request, through the server's door
  RemotePoolFactory make_pool;  // null: a router with pools fails to load
  // A local model's queue depth now, and the forecast of its request rate; nullopt: unknown.
  std::function<std::optional<double>(const std::string& model, int64_t version)> queue_depth;
  std::function<std::optional<double>(const std::string& model)> predicted_rps;
  MetricsRegistry* metrics = nullptr;  // null: no metrics (unit tests)
  const Clock* clock = nullptr;
  ForecastOptions forecast;           // for pools' forecasts
  int64_t forecast_horizon_s = 10;
};

// One target's traffic from this router, as /stats shows it.
struct RouterTargetStats {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<int64_t> in_flight{0};
  LatencyHistogram latency;  // successful answers, sent to answered
  std::atomic<double> recent_p99_ms{0};    // over the last 10 s, set by Tick
  std::atomic<double> predicted_rps{0};    // pools: set by Tick
};

class RouterRunner : public std::enable_shared_from_this<RouterRunner> {
 public:
  // Connects the pools (gRPC connects lazily: a pool that is down now fails its calls, not the load).
  static StatusOr<std::shared_ptr<RouterRunner>> Create(std::shared_ptr<const RouterPlan> plan, int64_t version,
                                                        RouterServices services);

  // Routes `request` (validated for the router's config); `done` is called exactly once. Once
  // stopped, returns UNAVAILABLE and leaves `request` and `done` with the caller.
  Status Run(std::unique_ptr<InferRequest>& request, InferCallback& done);
  void StopAndDrain() { gate_.StopAndDrain(); }
  bool stopped() const { return gate_.stopped(); }
  int64_t runs_in_flight() const { return gate_.in_flight(); }

  // Once a second (the server's ticker): recent p99s, pools' request-rate forecasts.
  void Tick();

  const RouterPlan& plan() const { return *plan_; }
  // Every target a request may go to (the plan's ServingTargets), and its traffic.
  const std::vector<RouteTarget>& targets() const { return targets_; }
  const RouterTargetStats& target_stats(size_t index) const { return *stats_[index]; }
  uint64_t rule_matches(size_t rule) const { return rule_matches_[rule]->value(); }
  // A target's breaker (null when the config sets none), and a pool's channel state ("" for models).
  const CircuitBreaker* breaker(size_t target) const { return breakers_[target].get(); }
  std::string ChannelState(size_t target) const;

 private:
  friend class RouterRun;
  RouterRunner(std::shared_ptr<const RouterPlan> plan, int64_t version, RouterServices services);
  std::optional<size_t> TargetIndex(const RouteTarget& target) const;
  void RegisterMetrics();
  void RunAnswered() { gate_.Exit(); }

  const std::shared_ptr<const RouterPlan> plan_;
  const int64_t version_;
  const RouterServices services_;
  std::vector<RouteTarget> targets_;
  std::vector<std::unique_ptr<RouterTargetStats>> stats_;                  // per target
  std::vector<std::shared_ptr<CircuitBreaker>> breakers_;                  // per target
  std::vector<std::shared_ptr<RemotePool>> pools_;                         // per target; null for models
  std::vector<std::optional<size_t>> rule_targets_;                       // per rule; nullopt: the cascade
  std::vector<size_t> tier_targets_;                                      // per cascade tier
  std::vector<std::shared_ptr<Counter>> rule_matches_;                     // per rule
  std::vector<std::shared_ptr<Counter>> target_requests_, target_errors_;  // per target
  std::vector<std::shared_ptr<Histogram>> target_durations_;               // per target
  // Pools' forecasts: per target, fed by Tick from the requests counted since the last one.
  std::vector<uint64_t> counted_at_last_tick_;
  std::vector<LoadForecaster> forecasters_;
  std::vector<LatencyHistogram::Counts> latency_ring_;  // per target x 10 seconds, for recent p99
  size_t ticks_ = 0;
  RunGate gate_;
};

// Confidence of a cascade tier's answer: the lowest over the output's rows (axis 0 when it
// batches) of the max softmax probability, or of the top two's margin, over each row's values.
StatusOr<double> AnswerConfidence(const Tensor& output, bool batched, ConfidenceMeasure measure);
// Built-in complexity scores, in [0, 1]: a tensor's bytes' Shannon entropy / 8, or size / max.
double EntropyScore(const Tensor& tensor);

}  // namespace inferd
