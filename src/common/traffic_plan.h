// The vocabulary of traffic between a model's versions, shared by the frontends (which parse it
// from requests) and lifecycle (which applies it): splits, labels and rollout plans.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace inferd {

using TrafficSplit = std::map<int64_t, uint32_t>;  // version -> weight
using VersionLabelMap = std::map<std::string, int64_t, std::less<>>;

// A change of a model's traffic (POST /v2/models/M/traffic): what is set changes, the rest stays.
// An empty split clears it (the newest version takes every request).
struct TrafficChange {
  std::optional<TrafficSplit> split;
  std::optional<VersionLabelMap> labels;
};

// A rollout's optional guard on answers (lifecycle/mirror.h): a share of the model's requests is
// mirrored to the other version of the pair and the two answers compared; within a step, the
// agreeing share of the compared pairs must stay at or above `min_agreement`.
struct AgreementGuard {
  double min_agreement = 0.99;
  uint32_t mirror_percent = 10;  // of the model's requests that name no version, in (0, 100]
  // kClose: every value within `tolerance` (|a - b| <= tolerance * (1 + |a|)); kArgmax: the same
  // largest element in every row (the last axis), for classifiers.
  enum class Compare { kClose, kArgmax } compare = Compare::kClose;
  double tolerance = 1e-4;
};

// What an agreement guard's mirrored requests gave (in a step, or since the rollout began).
struct MirrorCounts {
  uint64_t compared = 0;  // pairs with a baseline answer: agreed + disagreed
  uint64_t agreed = 0;
  uint64_t skipped = 0;   // not mirrored (no free slot) or nothing to compare with (the baseline failed)
};

// A canary rollout (lifecycle/rollout.h).
struct RolloutPlan {
  int64_t version = 0;   // the new version
  int64_t baseline = 0;  // 0: the version that takes the most traffic now (the newest without a split)
  std::vector<uint32_t> steps{5, 20, 100};  // the new version's percent of traffic, rising, ending at 100
  std::chrono::milliseconds dwell{std::chrono::seconds(60)};
  double max_error_rate = 0.01;  // errors / requests of the new version within a step
  double max_p99_ratio = 1.5;    // the new version's p99 / the baseline's, within a step
  uint64_t min_requests = 20;    // requests of the new version in a step before its guards are judged
  std::optional<int64_t> retention_seconds;  // unset: the config's rollback_retention_seconds (default 86400)
  std::optional<AgreementGuard> agreement;   // unset: no mirroring
};

// POST /v2/models/M/rollout: a plan to start, or {"action": "rollback"}.
struct RolloutRequest {
  bool rollback = false;
  RolloutPlan plan;
};

}  // namespace inferd
