// Batch formation as a pure function: a snapshot of the queue head plus the rules and the time
// decide how many requests to take now, or when to look again. No threads, no locks, no clock:
// tests call it directly.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/clock.h"
#include "scheduler/latency_model.h"

namespace inferd {

struct BatchingRules {
  bool dynamic = false;                  // dynamic_batching present in the config
  int64_t max_batch_size = 0;            // 0: the model does not batch; one request per execution
  std::vector<int64_t> preferred_sizes;  // ascending; may be empty
  Nanos max_queue_delay{0};
  // parameters { key: "latency_target_ms" }: when set, the batch size and the wait are chosen to
  // meet this latency (queue plus execution) instead of by preferred sizes; max_queue_delay, when
  // set, still bounds the wait. 0: Triton's rules, unchanged.
  Nanos latency_target{0};
  int instances = 1;  // executions that can run at once (the version's instance count)
};

// What the policy needs to know about one queued request.
struct PendingView {
  int64_t batch_size = 1;  // the request's dim 0 (1 when the model does not batch)
  uint64_t shape_key = 0;  // equal keys <=> equal non-batch dims and dtypes: only those merge
  TimePoint enqueued{};
};

struct BatchDecision {
  size_t count = 0;                  // take the first `count` pending requests now; 0: wait
  std::optional<TimePoint> wake_at;  // when waiting: decide again at this time at the latest
};

// `pending` is in service order (priority, then arrival). `model` is read only when
// rules.latency_target is set.
BatchDecision DecideBatch(std::span<const PendingView> pending, const BatchingRules& rules, TimePoint now,
                          const LatencyModel* model = nullptr);

// With a latency target (a model-based choice, not a feedback loop): the batch size is the
// largest whose execution fits half the budget (a request may wait for one running execution and
// then run in the next), the budget being 75% of the target. When rows arrive faster than the
// instances clear them at that size, the target is lost at any size, so the size grows to the
// smallest that keeps up (or max_batch_size): the queue stays bounded and latency degrades
// gracefully instead of growing without end. A batch goes at once unless rows arrive faster than
// the instances clear them at its current size; then it waits for the largest batch expected to
// fill before the oldest request must go to finish within the budget, and goes then with what it
// has. Execution times and the arrival rate come from `model` (scheduler/latency_model.h).
size_t LatencyTargetBatchCap(const BatchingRules& rules, const LatencyModel& model, TimePoint now);

}  // namespace inferd
