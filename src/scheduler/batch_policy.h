// Batch formation as a pure function: a snapshot of the queue head plus the rules and the time
// decide how many requests to take now, or when to look again. No threads, no locks, no clock:
// tests call it directly.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/clock.h"

namespace inferd {

struct BatchingRules {
  bool dynamic = false;                  // dynamic_batching present in the config
  int64_t max_batch_size = 0;            // 0: the model does not batch; one request per execution
  std::vector<int64_t> preferred_sizes;  // ascending; may be empty
  Nanos max_queue_delay{0};
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

// `pending` is in service order (priority, then arrival).
BatchDecision DecideBatch(std::span<const PendingView> pending, const BatchingRules& rules, TimePoint now);

}  // namespace inferd
