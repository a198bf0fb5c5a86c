// inferd's routers (`platform: "router"`): a model whose requests go, whole, to one of its
// targets (a local model or ensemble, or a remote pool of KServe v2 gRPC servers), chosen per
// request by rules (pipeline/route_rules.h), or to a cascade of tiers escalated on low confidence.
// A router declares inputs and outputs like any model; its requests are validated against them,
// then forwarded unchanged (tensors by pointer) to the chosen target.
//
// Its config.pbtxt parameters:
//   route.N = "CONDITION -> TARGET"  rules, tried in the order of N (positive integers), first match wins
//   route.default = "TARGET"         when no rule matches (with a cascade, default: the cascade)
//   pool.NAME = "grpc://host:port" | "dns:///host:port"   a remote pool
//   pool_options.NAME = "model=M,version=V,timeout_ms=500,retries=1,retry_max_tokens=10,
//                        retry_token_ratio=0.1"            every key optional:
//       model (default: the router's own name) and version are what the pool is asked to run;
//       timeout_ms caps the call below the request's deadline; retries (0 or 1) is gRPC's own retry
//       policy on UNAVAILABLE, throttled by gRPC's retry budget (retryThrottling: each failure costs
//       a token, each success returns token_ratio of one, retries stop below half of max_tokens)
//   circuit_breaker.NAME = "consecutive_failures=5,...,fallback=MODEL"   (pipeline/circuit_breaker.h)
//       for pool NAME, or for the local model NAME when a target; while open, its requests go to
//       the fallback model, or fail fast with UNAVAILABLE
//   cascade.tiers = "model small, model large, pool cloud"
//   cascade.thresholds = "0.8, 0.9"  one per tier but the last: a tier's answer is final when its
//       confidence is >= its threshold, else the next tier runs
//   cascade.confidence = "max_softmax OUTPUT" | "margin OUTPUT"   over that output's last
//       dimension, per batch row (softmax of the values, then the top probability, or the top two's
//       difference); a request escalates when any of its rows is below the threshold
//   complexity = "entropy INPUT" | "bytes INPUT MAX_BYTES" | "model NAME OUTPUT"   what `complexity`
//       in a rule reads, in [0, 1]: the Shannon entropy of the input's bytes / 8; its size / MAX
//       (capped at 1); or the first value of a scoring model's OUTPUT (clamped), the model run on
//       the request's inputs it declares before the rules are tried
//
// PlanRouter checks everything at load, against the local targets' configs as loaded now; every
// error names the parameter.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/model_config.h"
#include "pipeline/circuit_breaker.h"
#include "pipeline/ensemble_plan.h"
#include "pipeline/route_rules.h"

namespace inferd {

struct PoolSpec {
  std::string name;
  std::string address;         // as configured: "grpc://host:port" or "dns:///host:port"
  std::string channel_target;  // what gRPC resolves: "dns:///host:port" for both forms
  std::string model;           // asked of the pool; default: the router's name
  int64_t model_version = 0;   // 0: the pool's newest
  uint64_t timeout_us = 0;     // 0: the request's deadline only
  int retries = 1;             // 0 or 1
  int retry_max_tokens = 10;
  double retry_token_ratio = 0.1;
};

enum class ConfidenceMeasure { kMaxSoftmax, kMargin };

struct CascadePlan {
  std::vector<RouteTarget> tiers;  // at least two
  std::vector<double> thresholds;  // tiers.size() - 1
  std::string output;              // the output confidence is read from
  ConfidenceMeasure measure = ConfidenceMeasure::kMaxSoftmax;
};

struct ComplexityScore {
  enum class Kind { kNone, kEntropy, kBytes, kModel };
  Kind kind = Kind::kNone;
  std::string input;             // kEntropy, kBytes
  double max_bytes = 0;          // kBytes
  RouteTarget scorer;            // kModel
  std::string output;            // kModel
  std::vector<std::string> scorer_inputs;  // kModel: the router inputs the scorer takes
};

struct RouterPlan {
  std::string name;
  std::vector<RouteRule> rules;  // route.N by N; the default last (its condition is null)
  std::vector<PoolSpec> pools;
  // circuit_breaker.NAME, by NAME: a pool's name or a local target model's.
  std::map<std::string, BreakerPolicy> breakers;
  std::optional<CascadePlan> cascade;
  ComplexityScore complexity;
  std::vector<std::string> outputs;  // the router's outputs, config order
  bool batched = false;              // max_batch_size > 0: axis 0 of tensors is the batch

  const PoolSpec* FindPool(const std::string& name) const;
  // Every target a request may be sent to: the rules', the cascade's tiers, the fallbacks.
  std::vector<RouteTarget> ServingTargets() const;
};

StatusOr<RouterPlan> PlanRouter(const ModelConfig& router, const MemberConfigs& members);

// The local models a router's config names (to load them before it), once each.
std::vector<std::string> RouterMembers(const ModelConfig& router);

}  // namespace inferd
