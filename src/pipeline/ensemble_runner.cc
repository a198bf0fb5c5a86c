#include "pipeline/ensemble_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <vector>

namespace inferd {

uint64_t StepStats::MeanNs() const {
  const uint64_t count = success.load(std::memory_order_relaxed);
  return count == 0 ? 0 : total_ns.load(std::memory_order_relaxed) / count;
}

// One request through the plan. Holds the runner alive: a step may answer after the run ended.
class EnsembleRun : public std::enable_shared_from_this<EnsembleRun> {
 public:
  EnsembleRun(std::shared_ptr<EnsembleRunner> runner, std::unique_ptr<InferRequest> request, InferCallback done)
      : runner_(std::move(runner)),
        plan_(*runner_->plan_),
        request_(std::move(request)),
        done_(std::move(done)),
        start_(runner_->clock_->Now()) {
    if (const uint64_t budget_us = RequestBudgetUs(*request_); budget_us > 0) deadline_ = start_ + Micros(budget_us);
  }

  void Start() {
    std::vector<size_t> ready;
    {
      MutexLock lock(&mu_);
      // Time spent waiting for a run slot (max_runs_in_flight) is the ensemble's own queue time.
      queue_ns_ += static_cast<uint64_t>(std::max<int64_t>(0, NanosBetween(start_, runner_->clock_->Now())));
      for (const Tensor& input : request_->inputs) tensors_.emplace(input.name, input);
      for (size_t i = 0; i < plan_.steps.size(); ++i) {
        waiting_.push_back(plan_.steps[i].producers);
        if (waiting_[i] == 0) ready.push_back(i);
      }
    }
    Launch(ready);
  }

 private:
  // The step's request: its inputs are the ensemble tensors it maps, renamed, sharing their buffers.
  // Null once the run failed (a step may answer inside dispatch, before the next one launches).
  std::unique_ptr<InferRequest> StepRequest(size_t index) {
    const EnsembleStep& step = plan_.steps[index];
    auto request = std::make_unique<InferRequest>();
    request->model_name = step.model_name;
    request->model_version = step.model_version;
    request->id = request_->id;
    request->priority = request_->priority;
    MutexLock lock(&mu_);
    if (failed_) return nullptr;
    for (const auto& [member_input, tensor] : step.inputs) {
      Tensor input = tensors_.at(tensor);
      input.name = member_input;
      request->inputs.push_back(std::move(input));
    }
    for (const auto& [member_output, tensor] : step.outputs) request->requested_outputs.push_back(member_output);
    return request;
  }

  // Microseconds left before the deadline (at least 1), 0 without one; nullopt once it passed.
  std::optional<uint64_t> TimeLeftUs(TimePoint now) const {
    if (!deadline_) return 0;
    if (now >= *deadline_) return std::nullopt;
    return std::max<uint64_t>(1, static_cast<uint64_t>(std::chrono::duration_cast<Micros>(*deadline_ - now).count()));
  }

  void Launch(const std::vector<size_t>& steps) {
    for (size_t index : steps) {
      auto request = StepRequest(index);
      if (request == nullptr) return;
      const std::optional<uint64_t> left = TimeLeftUs(runner_->clock_->Now());
      if (!left) {
        return Fail(Status::DeadlineExceeded(StepLabel(plan_, index) +
                                             ": the request's deadline passed before the step could start"));
      }
      request->client_timeout_us = runner_->StepLimitUs(index, *left);
      if (request->client_timeout_us > 0) {
        MutexLock lock(&mu_);
        step_limits_[index] = {runner_->clock_->Now() + Micros(request->client_timeout_us), request->client_timeout_us};
      }
      runner_->SendStep(index, std::move(request), [self = shared_from_this(), index](StatusOr<InferResponse> result) {
        self->Answered(index, std::move(result));
      });
    }
  }

  void Answered(size_t index, StatusOr<InferResponse> result) {
    if (!result.ok()) {
      return Fail(Status(result.status().code(), StepLabel(plan_, index) + ": " + result.status().message()));
    }
    const TimePoint now = runner_->clock_->Now();
    if (!TimeLeftUs(now)) {
      return Fail(Status::DeadlineExceeded(StepLabel(plan_, index) +
                                           ": the request's deadline passed while the step ran"));
    }
    if (const uint64_t limit_us = ExceededStepLimitUs(index, now); limit_us > 0) {
      return Fail(Status::DeadlineExceeded(
          fmt::format("{}: the step took longer than its time limit of {} us", StepLabel(plan_, index), limit_us)));
    }
    std::vector<size_t> ready;
    bool finished = false;
    {
      MutexLock lock(&mu_);
      if (failed_) return;
      queue_ns_ += result->queue_ns;
      compute_ns_ += result->compute_ns;
      const EnsembleStep& step = plan_.steps[index];
      for (const auto& wiring : step.outputs) {
        const std::string& member_output = wiring.first;  // named: clang 14 captures no structured binding
        auto it = std::ranges::find_if(result->outputs, [&](const Tensor& t) { return t.name == member_output; });
        if (it == result->outputs.end()) {
          lock.Unlock();
          return Fail(Status::Internal(StepLabel(plan_, index) + ": the model's answer has no output '" + member_output + "'"));
        }
        tensors_[wiring.second] = std::move(*it);
      }
      for (size_t consumer : step.consumers) {
        if (--waiting_[consumer] == 0) ready.push_back(consumer);
      }
      finished = ++answered_ == plan_.steps.size();
    }
    if (finished) return Finish();
    Launch(ready);
  }

  // The step's time limit when it answered after it, else 0.
  uint64_t ExceededStepLimitUs(size_t index, TimePoint now) {
    MutexLock lock(&mu_);
    auto it = step_limits_.find(index);
    return it != step_limits_.end() && now > it->second.deadline ? it->second.limit_us : 0;
  }

  void Fail(Status status) {
    {
      MutexLock lock(&mu_);
      if (failed_) return;
      failed_ = true;
    }
    Answer(std::move(status));
  }

  void Finish() {
    InferResponse response;
    response.model_name = request_->model_name;
    response.model_version = runner_->version_;
    response.id = request_->id;
    const std::vector<std::string>& wanted =
        request_->requested_outputs.empty() ? plan_.outputs : request_->requested_outputs;
    {
      MutexLock lock(&mu_);
      response.queue_ns = queue_ns_;
      response.compute_ns = compute_ns_;
      for (const std::string& name : wanted) {
        auto it = tensors_.find(name);
        if (it == tensors_.end()) continue;  // validation let only the ensemble's outputs through
        Tensor output = it->second;
        output.name = name;
        response.outputs.push_back(std::move(output));
      }
    }
    Answer(std::move(response));
  }

  void Answer(StatusOr<InferResponse> result) {
    done_(std::move(result));
    runner_->ReleaseRunSlot();
    runner_->RunAnswered();
  }

  const std::shared_ptr<EnsembleRunner> runner_;
  const EnsemblePlan& plan_;  // the runner's
  const std::unique_ptr<InferRequest> request_;
  const InferCallback done_;
  const TimePoint start_;
  std::optional<TimePoint> deadline_;

  Mutex mu_;
  std::map<std::string, Tensor, std::less<>> tensors_ GUARDED_BY(mu_);
  std::vector<size_t> waiting_ GUARDED_BY(mu_);  // per step: producers not answered yet
  size_t answered_ GUARDED_BY(mu_) = 0;
  bool failed_ GUARDED_BY(mu_) = false;
  struct StepLimit {
    TimePoint deadline;
    uint64_t limit_us = 0;
  };
  std::map<size_t, StepLimit> step_limits_ GUARDED_BY(mu_);  // the steps sent with a time limit
  int64_t queue_ns_ GUARDED_BY(mu_) = 0;  // the steps' own, summed
  int64_t compute_ns_ GUARDED_BY(mu_) = 0;
};

std::shared_ptr<EnsembleRunner> EnsembleRunner::Create(std::shared_ptr<const EnsemblePlan> plan, int64_t version,
                                                       StepDispatch dispatch, const Clock* clock) {
  return std::shared_ptr<EnsembleRunner>(new EnsembleRunner(std::move(plan), version, std::move(dispatch), clock));
}

EnsembleRunner::EnsembleRunner(std::shared_ptr<const EnsemblePlan> plan, int64_t version, StepDispatch dispatch,
                               const Clock* clock)
    : plan_(std::move(plan)),
      version_(version),
      dispatch_(std::move(dispatch)),
      clock_(clock),
      steps_(std::make_unique<StepStats[]>(plan_->steps.size())),
      breakers_(plan_->steps.size()),
      free_run_slots_(plan_->max_runs_in_flight) {
  // Kahn's order (the plan is acyclic), reversed: every step after all of its consumers.
  std::vector<size_t> pending(plan_->steps.size());
  for (size_t i = 0; i < plan_->steps.size(); ++i) pending[i] = plan_->steps[i].producers;
  for (size_t i = 0; i < plan_->steps.size(); ++i) {
    if (pending[i] == 0) reverse_topological_.push_back(i);
  }
  for (size_t next = 0; next < reverse_topological_.size(); ++next) {
    for (size_t consumer : plan_->steps[reverse_topological_[next]].consumers) {
      if (--pending[consumer] == 0) reverse_topological_.push_back(consumer);
    }
  }
  std::reverse(reverse_topological_.begin(), reverse_topological_.end());
  std::map<std::string, std::shared_ptr<CircuitBreaker>> by_model;
  for (size_t i = 0; i < plan_->steps.size(); ++i) {
    const EnsembleStep& step = plan_->steps[i];
    if (!step.breaker) continue;
    auto& breaker = by_model[step.model_name];
    if (!breaker) breaker = std::make_shared<CircuitBreaker>(*step.breaker, clock_);
    breakers_[i] = breaker;
  }
}

Status EnsembleRunner::Run(std::unique_ptr<InferRequest>& request, InferCallback& done) {
  if (!gate_.TryEnter()) {
    return Status::Unavailable("ensemble '" + plan_->name + "' version " + std::to_string(version_) + " is unloading");
  }
  if (plan_->max_runs_in_flight == 0) {
    std::make_shared<EnsembleRun>(shared_from_this(), std::move(request), std::move(done))->Start();
    return Status::Ok();
  }
  std::shared_ptr<EnsembleRun> start_now;
  {
    MutexLock lock(&slots_mu_);
    if (free_run_slots_ == 0 || !waiting_runs_.empty()) {
      if (static_cast<int64_t>(waiting_runs_.size()) >= plan_->max_waiting_runs) {
        lock.Unlock();
        RunAnswered();
        return Status::Unavailable(fmt::format(
            "ensemble '{}' runs {} requests at once (parameters[max_runs_in_flight]) and {} more wait; try again later",
            plan_->name, plan_->max_runs_in_flight, plan_->max_waiting_runs));
      }
      waiting_runs_.push_back(std::make_shared<EnsembleRun>(shared_from_this(), std::move(request), std::move(done)));
      return Status::Ok();
    }
    --free_run_slots_;
    start_now = std::make_shared<EnsembleRun>(shared_from_this(), std::move(request), std::move(done));
  }
  start_now->Start();
  return Status::Ok();
}

void EnsembleRunner::ReleaseRunSlot() {
  if (plan_->max_runs_in_flight == 0) return;
  {
    MutexLock lock(&slots_mu_);
    ++free_run_slots_;
    // One thread at a time hands slots to waiting runs; another that frees a slot meanwhile (or a
    // run answering inside the Start below) leaves it to that thread's loop, which sees the slot
    // under this lock: the stack does not grow with the queue.
    if (starting_waiting_runs_) return;
    starting_waiting_runs_ = true;
  }
  while (true) {
    std::shared_ptr<EnsembleRun> next;
    {
      MutexLock lock(&slots_mu_);
      if (free_run_slots_ == 0 || waiting_runs_.empty()) {
        starting_waiting_runs_ = false;
        return;
      }
      --free_run_slots_;
      next = std::move(waiting_runs_.front());
      waiting_runs_.pop_front();
    }
    next->Start();
  }
}

void EnsembleRunner::SendStep(size_t step, std::unique_ptr<InferRequest> request, InferCallback done) {
  CircuitBreaker* breaker = breakers_[step].get();
  if (breaker != nullptr && !breaker->Allow()) {
    const std::string& fallback = breaker->policy().fallback;
    if (fallback.empty()) {
      steps_[step].fail.fetch_add(1, std::memory_order_relaxed);
      return done(Status::Unavailable("the circuit breaker of model '" + request->model_name +
                                      "' is open after its failures; failing fast until it cools down"));
    }
    request->model_name = fallback;  // the fallback takes the step's tensors as they are
    request->model_version = 0;
    breaker = nullptr;  // the fallback's answers say nothing about the model behind the breaker
  }
  if (breaker != nullptr) {
    done = [breaker = breakers_[step], done = std::move(done)](StatusOr<InferResponse> result) {
      breaker->Record(result.status());
      done(std::move(result));
    };
  }
  StepStats& stats = steps_[step];
  const int64_t capacity = StepCapacity(step);
  if (stats.in_flight.fetch_add(1, std::memory_order_relaxed) >= capacity && capacity > 0) {
    stats.in_flight.fetch_sub(1, std::memory_order_relaxed);
    stats.fail.fetch_add(1, std::memory_order_relaxed);
    return done(Status::Unavailable(fmt::format(
        "the step's queue is full: {} requests of this ensemble at model '{}' (its instances execute {} at once, "
        "its queue holds {})", capacity, request->model_name, plan_->steps[step].executing_capacity,
        capacity - plan_->steps[step].executing_capacity)));
  }
  const TimePoint sent = clock_->Now();
  // `self`: the answer may come after the run, and the runner's owner, are gone.
  dispatch_(std::move(request), [self = shared_from_this(), &stats, sent, done = std::move(done)](StatusOr<InferResponse> result) {
    stats.in_flight.fetch_sub(1, std::memory_order_relaxed);
    if (result.ok()) {
      stats.success.fetch_add(1, std::memory_order_relaxed);
      stats.queue_ns.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, result->queue_ns)), std::memory_order_relaxed);
      stats.compute_ns.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, result->compute_ns)), std::memory_order_relaxed);
      stats.total_ns.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, NanosBetween(sent, self->clock_->Now()))),
                               std::memory_order_relaxed);
    } else {
      stats.fail.fetch_add(1, std::memory_order_relaxed);
    }
    done(std::move(result));
  });
}

int64_t EnsembleRunner::StepCapacity(size_t step) const {
  const EnsembleStep& planned = plan_->steps[step];
  int64_t queue = planned.queue_capacity;
  if (queue == 0) {
    const StepStats& stats = steps_[step];
    const uint64_t answered = stats.success.load(std::memory_order_relaxed);
    if (plan_->target_qps <= 0 || answered == 0) return 0;
    // The seeds' rule: mean processing time (ms) x target QPS / 1000, rounded up.
    const double mean_ms = static_cast<double>(stats.compute_ns.load(std::memory_order_relaxed)) / answered / 1e6;
    queue = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(mean_ms * plan_->target_qps / 1000.0)));
  }
  return planned.executing_capacity + queue;
}

uint64_t EnsembleRunner::StepLimitUs(size_t step, uint64_t left_us) const {
  const EnsembleStep& planned = plan_->steps[step];
  if (planned.timeout_us > 0) return left_us == 0 ? planned.timeout_us : std::min(planned.timeout_us, left_us);
  if (left_us == 0) return 0;
  // The slowest path from `step` to the end, by mean latency. In reverse_topological_ (computed
  // once) a step comes after its consumers, so one pass fills each tail from theirs. 0: a step on
  // some path from it has not been measured yet.
  thread_local std::vector<uint64_t> tail;  // reused: no allocation per step launch
  tail.assign(plan_->steps.size(), 0);
  for (size_t from : reverse_topological_) {
    const uint64_t mean = steps_[from].MeanNs();
    if (mean == 0) continue;
    uint64_t after = 0;
    bool measured = true;
    for (size_t consumer : plan_->steps[from].consumers) {
      measured &= tail[consumer] != 0;
      after = std::max(after, tail[consumer]);
    }
    if (measured) tail[from] = mean + after;
    if (from == step) break;
  }
  const uint64_t path = tail[step];
  if (path == 0) return left_us;
  const double share = static_cast<double>(steps_[step].MeanNs()) / static_cast<double>(path);
  return std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(left_us) * share));
}

}  // namespace inferd
