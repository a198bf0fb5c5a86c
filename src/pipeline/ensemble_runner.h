// Serves one loaded ensemble version (pipeline/ensemble_plan.h): runs requests through its steps.
// Each step's request goes to its model through `dispatch`, the server's own door for requests,
// so it queues, batches and counts with that model's direct traffic. A step starts as soon as the
// steps it takes tensors from have answered, so independent steps run at once; nothing here waits
// on a thread (a step's answer starts the steps behind it from the thread that answered), so a
// request in its last step never holds up another request's first.
//
// Tensors move between steps by pointer: a step's request holds its producers' output buffers,
// never a copy. A step that fails ends the run with its error, naming the step; steps not yet
// started are not started.
//
// Deadlines: a request's deadline is its client deadline (gRPC), else its KServe `timeout`. Each
// step is sent with a time limit (as its client deadline, which binds in the member's queue):
//   - the step's own step_timeout_ms when the config sets one, capped by what is left;
//   - else, once every step has answered at least once, a share of what is left proportional to
//     the step's mean latency on the slowest path from it to the end:
//       limit = left x mean(step) / max over paths from the step of the sum of their means;
//   - else what is left.
// A step that would start after the deadline is not run, and one that answers after it ends the
// run: DEADLINE_EXCEEDED naming the step.
//
// Queues (pipeline sizing): a step holds at most StepCapacity of this ensemble's requests; one
// more fails at once with UNAVAILABLE naming the step, so overload sheds instead of queueing past
// every deadline.
//
// Runs at once: with parameters[max_runs_in_flight] N, at most N requests run through the steps at
// a time; later ones wait in arrival order (at most max_waiting_runs, default 1000, then
// UNAVAILABLE), their wait counting against their deadline and as the ensemble's queue time. N = 1
// is the synchronous pipeline: each request through every stage before the next starts.
//
// Circuit breakers (pipeline/circuit_breaker.h): a step whose model's breaker is open fails at once
// with UNAVAILABLE naming the breaker, or goes to the breaker's fallback model; its answers are
// what the breaker counts.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "common/infer_request.h"
#include "common/mutex.h"
#include "pipeline/circuit_breaker.h"
#include "pipeline/run_gate.h"
#include "pipeline/ensemble_plan.h"

namespace inferd {

class EnsembleRun;

// Sends a step's request to its model; `done` is called exactly once.
using StepDispatch = std::function<void(std::unique_ptr<InferRequest> request, InferCallback done)>;

// One step's traffic, as /stats shows it: which stage is the bottleneck. Times are those the
// member's answers report (its queue and its compute), summed over successful answers.
struct StepStats {
  std::atomic<int64_t> in_flight{0};  // sent, not answered
  std::atomic<uint64_t> success{0};
  std::atomic<uint64_t> fail{0};
  std::atomic<uint64_t> queue_ns{0};
  std::atomic<uint64_t> compute_ns{0};
  std::atomic<uint64_t> total_ns{0};  // sent to answered
  // Mean sent-to-answered time of successful answers; 0 before the first.
  uint64_t MeanNs() const;
};

class EnsembleRunner : public std::enable_shared_from_this<EnsembleRunner> {
 public:
  static std::shared_ptr<EnsembleRunner> Create(std::shared_ptr<const EnsemblePlan> plan, int64_t version,
                                                StepDispatch dispatch, const Clock* clock);

  // Runs `request` (validated for the ensemble's config); `done` is called exactly once, with the
  // ensemble's requested outputs (all of them when the request names none). Once stopped, returns
  // UNAVAILABLE and leaves `request` and `done` with the caller.
  Status Run(std::unique_ptr<InferRequest>& request, InferCallback& done);

  // Takes no new runs, and waits until every run started has answered.
  void StopAndDrain() { gate_.StopAndDrain(); }
  bool stopped() const { return gate_.stopped(); }
  int64_t runs_in_flight() const { return gate_.in_flight(); }

  const EnsemblePlan& plan() const { return *plan_; }
  const StepStats& step_stats(size_t step) const { return steps_[step]; }
  // The time limit step `step` is sent with when `left_us` remains of the deadline (0: no
  // deadline), by the rule above; 0: none.
  uint64_t StepLimitUs(size_t step, uint64_t left_us) const;
  // How many of this ensemble's requests step `step` may hold (in its model's queue or executing)
  // now; 0: unbounded. A step request beyond it fails with UNAVAILABLE (503), as a full queue does:
  //   executing_capacity + (queue_capacity, or with target_qps: ceil(mean compute ms x QPS / 1000)).
  int64_t StepCapacity(size_t step) const;
  // The breaker of a step's model; null when the config sets none.
  const CircuitBreaker* breaker(size_t step) const { return breakers_[step].get(); }

 private:
  friend class EnsembleRun;
  EnsembleRunner(std::shared_ptr<const EnsemblePlan> plan, int64_t version, StepDispatch dispatch, const Clock* clock);
  void SendStep(size_t step, std::unique_ptr<InferRequest> request, InferCallback done);
  void RunAnswered() { gate_.Exit(); }
  // A run answered: its slot goes to the oldest waiting run (parameters[max_runs_in_flight]).
  void ReleaseRunSlot();

  const std::shared_ptr<const EnsemblePlan> plan_;
  const int64_t version_;
  const StepDispatch dispatch_;
  const Clock* const clock_;
  std::unique_ptr<StepStats[]> steps_;
  std::vector<std::shared_ptr<CircuitBreaker>> breakers_;  // per step; shared by steps of one model
  std::vector<size_t> reverse_topological_;  // each step after every step that consumes its outputs
  RunGate gate_;
  Mutex slots_mu_;
  int64_t free_run_slots_ GUARDED_BY(slots_mu_);
  std::deque<std::shared_ptr<EnsembleRun>> waiting_runs_ GUARDED_BY(slots_mu_);
  bool starting_waiting_runs_ GUARDED_BY(slots_mu_) = false;  // a thread is in ReleaseRunSlot's loop
};

}  // namespace inferd
