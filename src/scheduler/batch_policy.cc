#include "scheduler/batch_policy.h"

#include <algorithm>

namespace inferd {
namespace {

bool IsPreferred(const BatchingRules& rules, int64_t size) {
  return std::binary_search(rules.preferred_sizes.begin(), rules.preferred_sizes.end(), size);
}

// When a batch must go now but its size is not preferred, the largest prefix whose size is
// preferred is taken instead (the rest waits for the next instance), as Triton does.
size_t TrimToPreferred(std::span<const PendingView> pending, size_t count, const BatchingRules& rules) {
  if (rules.preferred_sizes.empty()) return count;
  int64_t total = 0;
  size_t best = 0;
  for (size_t i = 0; i < count; ++i) {
    total += pending[i].batch_size;
    if (IsPreferred(rules, total)) best = i + 1;
  }
  return best == 0 ? count : best;
}

}  // namespace

BatchDecision DecideBatch(std::span<const PendingView> pending, const BatchingRules& rules, TimePoint now) {
  if (pending.empty()) return {};
  if (!rules.dynamic || rules.max_batch_size <= 0) return {.count = 1};

  int64_t total = 0;
  size_t count = 0;
  bool closed = false;  // nothing further can join this batch
  for (const auto& item : pending) {
    if (item.shape_key != pending.front().shape_key || total + item.batch_size > rules.max_batch_size) {
      closed = true;
      break;
    }
    total += item.batch_size;
    ++count;
    if (total == rules.max_batch_size) {
      closed = true;
      break;
    }
  }
  if (count == 0) return {.count = 1};  // a lone oversized request still runs (validated earlier)

  const TimePoint oldest_deadline = pending.front().enqueued + rules.max_queue_delay;
  if (closed) {
    // Full, or blocked by a request of another shape: waiting cannot grow the batch.
    return {.count = now >= oldest_deadline ? count : TrimToPreferred(pending, count, rules)};
  }
  if (IsPreferred(rules, total) || now >= oldest_deadline) return {.count = count};
  return {.count = 0, .wake_at = oldest_deadline};
}

}  // namespace inferd
