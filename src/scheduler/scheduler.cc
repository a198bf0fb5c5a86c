#include "scheduler/scheduler.h"

#include <algorithm>
#include <chrono>

namespace inferd {

namespace {

// The arrival rate the latency-target batcher plans with fades over twice the target: long enough
// to see a rate through a few batches, short enough to follow a burst as it starts and ends.
Nanos RateWindow(const BatchingRules& rules) {
  return std::clamp<Nanos>(rules.latency_target * 2, std::chrono::milliseconds(20), std::chrono::seconds(2));
}

}  // namespace

Scheduler::Scheduler(SchedulerOptions options, const Clock* clock)
    : options_(std::move(options)),
      level_count_(std::max<uint32_t>(1, options_.priority_levels)),
      clock_(clock),
      latency_model_(options_.rules.max_batch_size, RateWindow(options_.rules)) {
  MutexLock lock(&mu_);
  levels_.resize(level_count_);
}

Scheduler::~Scheduler() { Shutdown(); }

uint32_t Scheduler::LevelOf(const InferRequest& request) const {
  uint32_t level = request.priority == 0 ? options_.default_priority : request.priority;
  return std::clamp<uint32_t>(level, 1, level_count_);
}

Status Scheduler::Enqueue(PendingRequest& pending) {
  const uint32_t level = LevelOf(*pending.request);
  const QueuePolicy& policy =
      options_.level_policies.empty() ? QueuePolicy{} : options_.level_policies[level - 1];
  // As in Triton, a request's own timeout counts only when the policy allows overrides, and it
  // may shorten the default but not extend it.
  Nanos timeout = policy.default_timeout;
  if (policy.allow_timeout_override && pending.request->timeout_us > 0) {
    const Nanos requested = Micros(pending.request->timeout_us);
    timeout = timeout.count() == 0 ? requested : std::min(timeout, requested);
  }
  bool client_deadline_first = false;
  if (pending.request->client_timeout_us > 0) {
    const Nanos client = Micros(pending.request->client_timeout_us);
    client_deadline_first = timeout.count() == 0 || client <= timeout;
    if (client_deadline_first) timeout = client;
  }
  pending.enqueued = clock_->Now();
  if (timeout.count() > 0) pending.deadline = pending.enqueued + timeout;
  pending.delay_on_timeout = policy.delay_on_timeout && !client_deadline_first;
  const size_t bound = policy.max_queue_size == 0 ? kMaxQueueSizeBound : policy.max_queue_size;
  {
    MutexLock lock(&mu_);
    if (shutdown_) return Status::Unavailable("model is shutting down");
    Queue& queue = levels_[level - 1];
    if (queue.size() >= bound) {
      return Status::Unavailable("queue of model '" + pending.request->model_name +
                                 "' is full (max_queue_size " + std::to_string(bound) + ")");
    }
    // Only the latency-target batcher reads arrivals; Triton's rules pay nothing for them.
    if (options_.rules.latency_target.count() > 0) latency_model_.RecordArrival(pending.batch_size, pending.enqueued);
    queue.push_back(std::move(pending));
    ++depth_;
  }
  cv_.NotifyOne();
  return Status::Ok();
}

void Scheduler::TakeExpired(TimePoint now, std::vector<PendingRequest>* rejected) {
  for (Queue& queue : levels_) {
    for (auto it = queue.begin(); it != queue.end();) {
      if (!it->deadline || *it->deadline > now) {
        ++it;
        continue;
      }
      it->deadline.reset();
      if (it->delay_on_timeout) {
        delayed_.push_back(std::move(*it));
      } else {
        rejected->push_back(std::move(*it));
        --depth_;
      }
      it = queue.erase(it);
    }
  }
}

std::optional<TimePoint> Scheduler::NextDeadline() const {
  std::optional<TimePoint> next;
  for (const Queue& queue : levels_) {
    for (const auto& item : queue) {
      if (item.deadline && (!next || *item.deadline < *next)) next = item.deadline;
    }
  }
  return next;
}

std::vector<PendingRequest> Scheduler::TakeFront(size_t count) {
  std::vector<PendingRequest> batch;
  batch.reserve(count);
  auto take_from = [&](Queue& queue) {
    while (batch.size() < count && !queue.empty()) {
      batch.push_back(std::move(queue.front()));
      queue.pop_front();
    }
  };
  for (Queue& queue : levels_) take_from(queue);
  take_from(delayed_);
  depth_ -= batch.size();
  return batch;
}

std::vector<PendingRequest> Scheduler::NextBatch() {
  std::vector<PendingView> views;
  std::vector<PendingRequest> rejected;
  MutexLock lock(&mu_);
  while (true) {
    const TimePoint now = clock_->Now();
    TakeExpired(now, &rejected);
    if (!rejected.empty()) {
      // Answer expired requests outside the lock; their callbacks may take time.
      lock.Unlock();
      for (auto& item : rejected) {
        RequestTimings timings{.enqueued = item.enqueued};
        CompletionFn done = std::move(item.done);
        done(Status::DeadlineExceeded("request timed out in the queue of model '" + item.request->model_name +
                                      "'"),
             timings);
      }
      rejected.clear();
      lock.Lock();
      continue;
    }
    if (depth_ == 0) {
      if (shutdown_) return {};
      cv_.Wait(lock);
      continue;
    }
    // Only the head can matter: at most max_batch_size + 1 requests are looked at.
    views.clear();
    const size_t limit = static_cast<size_t>(std::max<int64_t>(1, options_.rules.max_batch_size)) + 1;
    auto collect = [&](const Queue& queue) {
      for (const auto& item : queue) {
        if (views.size() >= limit) return;
        views.push_back({item.batch_size, item.shape_key, item.enqueued});
      }
    };
    for (const Queue& queue : levels_) collect(queue);
    collect(delayed_);
    // At shutdown nothing more will arrive, so no delay is worth waiting for.
    BatchDecision decision = DecideBatch(views, options_.rules, shutdown_ ? TimePoint::max() : now, &latency_model_);
    if (decision.count > 0) return TakeFront(decision.count);
    std::optional<TimePoint> wake = decision.wake_at;
    if (auto deadline = NextDeadline(); deadline && (!wake || *deadline < *wake)) wake = deadline;
    if (wake) {
      // A duration, not an absolute time: the clock may be a test's ManualClock.
      cv_.WaitFor(lock, std::max(Nanos(0), std::chrono::duration_cast<Nanos>(*wake - now)));
    } else {
      cv_.Wait(lock);
    }
  }
}

void Scheduler::Shutdown() {
  {
    MutexLock lock(&mu_);
    shutdown_ = true;
  }
  cv_.NotifyAll();
}

bool Scheduler::IsShutDown() const {
  MutexLock lock(&mu_);
  return shutdown_;
}

void Scheduler::CancelQueued(const Status& status) {
  std::vector<PendingRequest> cancelled;
  {
    MutexLock lock(&mu_);
    for (Queue& queue : levels_) {
      for (auto& item : queue) cancelled.push_back(std::move(item));
      queue.clear();
    }
    for (auto& item : delayed_) cancelled.push_back(std::move(item));
    delayed_.clear();
    depth_ = 0;
  }
  for (auto& item : cancelled) {
    CompletionFn done = std::move(item.done);
    done(status, RequestTimings{.enqueued = item.enqueued});
  }
}

void Scheduler::Poke() { cv_.NotifyAll(); }

void Scheduler::RecordExecution(int64_t rows, Nanos took) {
  if (options_.rules.latency_target.count() == 0) return;
  MutexLock lock(&mu_);
  latency_model_.RecordExecution(rows, took);
}

size_t Scheduler::BatchSizeLimit() const {
  const auto max_rows = static_cast<size_t>(std::max<int64_t>(1, options_.rules.max_batch_size));
  if (options_.rules.latency_target.count() == 0 || !options_.rules.dynamic) return max_rows;
  MutexLock lock(&mu_);
  return LatencyTargetBatchCap(options_.rules, latency_model_, clock_->Now());
}

size_t Scheduler::QueueDepth() const {
  MutexLock lock(&mu_);
  return depth_;
}

}  // namespace inferd
