// One scheduler per model version: a bounded, prioritised request queue that the model's instance
// threads pull batches from. An idle instance forms the next batch itself (DecideBatch), so there
// is no separate batcher thread and no hand-off between threads.
//
// Ownership: Enqueue takes the request on success; on failure the caller still owns it and must
// answer it. Once queued, the request's `done` is called exactly once: by an instance after
// execution, or by the scheduler when the request expires (REJECT) or is cancelled at shutdown.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "common/clock.h"
#include "common/infer_request.h"
#include "common/mutex.h"
#include "scheduler/batch_policy.h"

namespace inferd {

// Timestamps of one request through the server, for stats and metrics.
struct RequestTimings {
  TimePoint enqueued{};
  TimePoint exec_start{};
  TimePoint input_done{};
  TimePoint infer_done{};
  TimePoint output_done{};
  int64_t execution_batch_size = 0;
};

using CompletionFn = std::function<void(StatusOr<InferResponse>, const RequestTimings&)>;

struct PendingRequest {
  std::unique_ptr<InferRequest> request;
  CompletionFn done;
  int64_t batch_size = 1;
  uint64_t shape_key = 0;
  TimePoint enqueued{};
  std::optional<TimePoint> deadline;
  bool delay_on_timeout = false;  // DELAY: an expired request still runs, after the others
};

struct QueuePolicy {
  bool delay_on_timeout = false;
  Nanos default_timeout{0};  // 0: no timeout
  bool allow_timeout_override = false;
  size_t max_queue_size = 0;  // 0: the server-wide bound kMaxQueueSizeBound
};

struct SchedulerOptions {
  BatchingRules rules;
  uint32_t priority_levels = 1;  // levels are 1..priority_levels; 1 runs first
  uint32_t default_priority = 1;
  std::vector<QueuePolicy> level_policies;  // index level-1; size priority_levels
};

// Every queue has a bound even when the config gives none.
inline constexpr size_t kMaxQueueSizeBound = 100000;

class Scheduler {
 public:
  Scheduler(SchedulerOptions options, const Clock* clock);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues the request, computing its deadline from the request and the level's policy.
  // kUnavailable when the level's queue is full or the scheduler is shut down.
  Status Enqueue(PendingRequest& pending);

  // Blocks until a batch is ready (returned in service order), or returns an empty vector once
  // Shutdown() was called and the queue is empty.
  std::vector<PendingRequest> NextBatch();

  // No new requests; queued ones still run. Wakes every waiting instance.
  void Shutdown();
  bool IsShutDown() const;
  // Answers every queued request with `status` (used when the exit timeout has passed).
  void CancelQueued(const Status& status);
  // Wakes waiting instances so they re-check the queue (tests with a ManualClock).
  void Poke();

  // An instance ran `rows` rows in `took`: what the latency-target batcher plans with.
  void RecordExecution(int64_t rows, Nanos took);
  // The batch size the latency target allows now (max_batch_size without a target).
  size_t BatchSizeLimit() const;

  size_t QueueDepth() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  using Queue = std::deque<PendingRequest>;

  void TakeExpired(TimePoint now, std::vector<PendingRequest>* rejected) REQUIRES(mu_);
  std::optional<TimePoint> NextDeadline() const REQUIRES(mu_);
  std::vector<PendingRequest> TakeFront(size_t count) REQUIRES(mu_);

  uint32_t LevelOf(const InferRequest& request) const;

  const SchedulerOptions options_;
  const uint32_t level_count_;  // levels_.size(), readable without the lock
  const Clock* clock_;

  mutable Mutex mu_;
  CondVar cv_;
  std::vector<Queue> levels_ GUARDED_BY(mu_);
  Queue delayed_ GUARDED_BY(mu_);  // expired DELAY requests, served last
  size_t depth_ GUARDED_BY(mu_) = 0;
  bool shutdown_ GUARDED_BY(mu_) = false;
  LatencyModel latency_model_ GUARDED_BY(mu_);
};

}  // namespace inferd
