// Mirrored traffic for a rollout's agreement guard (AgreementGuard, common/traffic_plan.h).
//
// While a rollout with the guard runs, a share of the model's routed requests is also sent to the
// other version of the pair: a request the baseline serves goes to the candidate too, and one the
// candidate serves (at 100% the only kind) goes to the baseline. The client gets only the answer
// of the version it was routed to; the mirrored answer is compared with it and counted: agreed,
// disagreed (including a candidate that failed where the baseline answered), or skipped (no free
// slot, or no baseline answer to compare with). The rollout judges the agreement ratio per step.
//
// Bounds: at most kMaxInFlight mirrored requests per rollout at once; beyond that a request is
// not mirrored (skipped). A mirrored request goes through the other version's own queue and
// counts in its stats and metrics like any request (it is one, in cost and in what it tells).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "common/traffic_plan.h"
#include "metrics/metrics_registry.h"

namespace inferd {

// Whether two versions' answers to one request agree under the guard's rule: the same output
// names, each with the same type and shape, and values that agree. Floating-point values agree
// within the tolerance (kClose: |a - b| <= tolerance * (1 + |a|)) or by the position of each
// row's largest element (kArgmax; rows along the last axis). Other types must be equal.
bool OutputsAgree(const AgreementGuard& guard, std::span<const Tensor> baseline, std::span<const Tensor> candidate);

class TrafficMirror {
 public:
  static constexpr int kMaxInFlight = 8;
  // Metrics of the outcomes; any may be null.
  struct Counters {
    std::shared_ptr<Counter> agreed, disagreed, skipped;
  };

  TrafficMirror(int64_t baseline, int64_t candidate, AgreementGuard guard, Counters counters);

  int64_t baseline() const { return baseline_; }
  int64_t candidate() const { return candidate_; }
  const AgreementGuard& guard() const { return guard_; }
  // The version a request served by `served` is mirrored to; 0 when `served` is neither.
  int64_t PeerOf(int64_t served) const;

  // Whether to mirror one more request: one in mirror_percent at random, while a slot is free. A
  // true takes a slot, which Finish gives back.
  bool TryBegin();
  // A TryBegin whose request was refused before it queued (its own validation): frees the slot.
  void Abandon() { in_flight_.fetch_sub(1, std::memory_order_relaxed); }
  // Both answers are in: counts the outcome and frees the slot. `baseline` failed: skipped.
  void Finish(const StatusOr<std::vector<Tensor>>& baseline, const StatusOr<std::vector<Tensor>>& candidate);
  MirrorCounts Counts() const;

 private:
  void Count(std::atomic<uint64_t>& count, const std::shared_ptr<Counter>& metric);

  const int64_t baseline_, candidate_;
  const AgreementGuard guard_;
  const Counters counters_;
  std::atomic<int> in_flight_{0};
  std::atomic<uint64_t> agreed_{0}, disagreed_{0}, skipped_{0};
};

// The two answers to one mirrored request, in whichever order they come (two instance threads);
// the second completes the comparison.
class MirrorPair {
 public:
  explicit MirrorPair(std::shared_ptr<TrafficMirror> mirror) : mirror_(std::move(mirror)) {}
  MirrorPair(const MirrorPair&) = delete;
  MirrorPair& operator=(const MirrorPair&) = delete;

  // The answer of `version` (the mirror's baseline or candidate), once each.
  void Record(int64_t version, StatusOr<std::vector<Tensor>> outputs);

 private:
  const std::shared_ptr<TrafficMirror> mirror_;
  std::optional<StatusOr<std::vector<Tensor>>> baseline_, candidate_;
  std::atomic<int> pending_{2};
};

}  // namespace inferd
