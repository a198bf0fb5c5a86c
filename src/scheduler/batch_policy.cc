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

// The prefix of the queue that can run together: same shape, at most `max_rows` rows.
struct Prefix {
  size_t count = 0;
  int64_t rows = 0;
  bool closed = false;  // nothing further can join this batch
};

Prefix MergeablePrefix(std::span<const PendingView> pending, int64_t max_rows) {
  Prefix prefix;
  for (const auto& item : pending) {
    if (item.shape_key != pending.front().shape_key || prefix.rows + item.batch_size > max_rows) {
      prefix.closed = true;
      break;
    }
    prefix.rows += item.batch_size;
    ++prefix.count;
    if (prefix.rows == max_rows) {
      prefix.closed = true;
      break;
    }
  }
  return prefix;
}

// Share of the latency target the batcher plans with; the rest absorbs what it cannot see (the
// answer's way back, an execution slower than the estimate). A batch that waits is planned to
// finish right at the budget, so p99 lands near it: at 0.9, resnet50 on a 20/s burst had p99
// 407 ms against a 400 ms target (docs/BENCHMARKS.md, "Adaptive batching").
constexpr double kBudgetShare = 0.75;

Nanos Budget(const BatchingRules& rules) {
  return Nanos(static_cast<int64_t>(static_cast<double>(rules.latency_target.count()) * kBudgetShare));
}

// Rows per second the instances clear when every execution is `rows` rows.
double RowsClearedPerSecond(const BatchingRules& rules, const LatencyModel& model, int64_t rows) {
  const double seconds = std::chrono::duration<double>(*model.ExecutionTime(rows)).count();
  return static_cast<double>(rows * std::max(1, rules.instances)) / std::max(seconds, 1e-9);
}

BatchDecision DecideLatencyTargetBatch(std::span<const PendingView> pending, const BatchingRules& rules, TimePoint now,
                                       const LatencyModel& model) {
  const int64_t cap = static_cast<int64_t>(LatencyTargetBatchCap(rules, model, now));
  const Prefix prefix = MergeablePrefix(pending, cap);
  if (prefix.count == 0) return {.count = 1};
  if (prefix.closed) return {.count = prefix.count};
  // Before any execution was measured, or when the instances keep up at this size, go now.
  if (!model.ExecutionTime(prefix.rows)) return {.count = prefix.count};
  const double rate = model.ArrivalRate(now);
  if (rate <= RowsClearedPerSecond(rules, model, prefix.rows)) return {.count = prefix.count};

  const TimePoint oldest = pending.front().enqueued;
  TimePoint latest_wake = oldest + Budget(rules);
  if (rules.max_queue_delay.count() > 0) latest_wake = std::min(latest_wake, oldest + rules.max_queue_delay);
  std::optional<TimePoint> wake;
  for (int64_t rows = prefix.rows + 1; rows <= cap; ++rows) {
    const TimePoint must_go = std::min(latest_wake, oldest + Budget(rules) - *model.ExecutionTime(rows));
    const auto fill = std::chrono::duration_cast<Nanos>(
        std::chrono::duration<double>(static_cast<double>(rows - prefix.rows) / rate));
    if (now + fill <= must_go) wake = must_go;
  }
  if (!wake || now >= *wake) return {.count = prefix.count};
  return {.count = 0, .wake_at = *wake};
}

}  // namespace

size_t LatencyTargetBatchCap(const BatchingRules& rules, const LatencyModel& model, TimePoint now) {
  if (!model.ExecutionTime(1)) return static_cast<size_t>(rules.max_batch_size);  // nothing measured yet
  const Nanos half_budget = Budget(rules) / 2;
  int64_t cap = 1;
  while (cap < rules.max_batch_size && *model.ExecutionTime(cap + 1) <= half_budget) ++cap;
  // Overload: the target is lost at any size that cannot keep up, and a queue that grows without
  // end loses it for everyone after. Take the smallest batch that keeps up (or the largest there is).
  const double rate = model.ArrivalRate(now);
  while (cap < rules.max_batch_size && RowsClearedPerSecond(rules, model, cap) < rate) ++cap;
  return static_cast<size_t>(cap);
}

BatchDecision DecideBatch(std::span<const PendingView> pending, const BatchingRules& rules, TimePoint now,
                          const LatencyModel* model) {
  if (pending.empty()) return {};
  if (!rules.dynamic || rules.max_batch_size <= 0) return {.count = 1};
  if (rules.latency_target.count() > 0 && model != nullptr) return DecideLatencyTargetBatch(pending, rules, now, *model);

  const Prefix prefix = MergeablePrefix(pending, rules.max_batch_size);
  if (prefix.count == 0) return {.count = 1};  // a lone oversized request still runs (validated earlier)

  const TimePoint oldest_deadline = pending.front().enqueued + rules.max_queue_delay;
  if (prefix.closed) {
    // Full, or blocked by a request of another shape: waiting cannot grow the batch.
    return {.count = now >= oldest_deadline ? prefix.count : TrimToPreferred(pending, prefix.count, rules)};
  }
  if (IsPreferred(rules, prefix.rows) || now >= oldest_deadline) return {.count = prefix.count};
  return {.count = 0, .wake_at = oldest_deadline};
}

}  // namespace inferd
