// A router's rules (issue 17: `platform: "router"`), parsed and checked at load. One rule per
// config parameter, tried in the order of their keys' numbers, first match wins:
//
//   parameters { key: "route.1" value { string_value:
//       "input_bytes < 65536 and param.tier == 'edge' -> model mobilenet" } }
//   parameters { key: "route.2" value { string_value:
//       "param.latency_budget_ms > 200 -> pool gpu_cluster" } }
//   parameters { key: "route.default" value { string_value: "model resnet50@2" } }
//
// A rule is `CONDITION -> TARGET`; the default is just a TARGET. Conditions:
//   TERM OP VALUE, joined by `and` / `or` (and binds tighter), `not`, parentheses;
//   OP is < <= > >= == !=; VALUE a number, a 'quoted string', or another TERM.
// Terms:
//   input_bytes                 every input's bytes together
//   input_bytes(NAME)           one input's bytes
//   dim(NAME, I)                dimension I of input NAME (0 is the batch dimension when batching)
//   param.NAME                  a request parameter (number or string); a missing one makes the
//                               comparison false
//   queue_depth(TARGET)         requests waiting at a target now
//   p99_ms(TARGET)              its recent p99 latency
//   predicted_rps(TARGET)       its forecast request rate (pipeline/load_forecast.h)
//   complexity                  the request's complexity score, in [0, 1]
// where a TARGET is `model NAME[@VERSION]` or `pool NAME`; a rule's own target may also be
// `cascade` (the router's cascade.tiers, pipeline/router_plan.h). Any error names the rule.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"

namespace inferd {

struct RouteTarget {
  enum class Kind { kModel, kPool, kCascade };  // kCascade: the router's cascade (a rule's target only)
  Kind kind = Kind::kModel;
  std::string name;
  int64_t version = 0;  // models only; 0: the newest
  bool operator==(const RouteTarget&) const = default;
};
std::string DescribeTarget(const RouteTarget& target);

enum class RouteTermKind { kInputBytes, kDim, kParam, kQueueDepth, kP99Ms, kPredictedRps, kComplexity };

struct RouteTerm {
  RouteTermKind kind = RouteTermKind::kInputBytes;
  std::string name;   // input or parameter name; empty input_bytes: all inputs
  int64_t index = 0;  // dim
  RouteTarget target; // queue_depth, p99_ms, predicted_rps
};

using RouteValue = std::variant<double, std::string>;

// What a rule's terms read, for one request at one moment. Any may be unknown (nullopt).
class RouteFacts {
 public:
  virtual ~RouteFacts() = default;
  virtual std::optional<RouteValue> Read(const RouteTerm& term) const = 0;
};

struct RouteCondition;  // a node of the condition's tree

struct RouteRule {
  std::string name;  // the parameter key: "route.1", "route.default"
  std::shared_ptr<const RouteCondition> condition;  // null: always (the default)
  RouteTarget target;
};

// Parses one rule's text; `name` goes into every error.
StatusOr<RouteRule> ParseRouteRule(const std::string& name, const std::string& text, bool is_default);
// One target alone (a cascade tier): `model NAME[@VERSION]` or `pool NAME`.
StatusOr<RouteTarget> ParseRouteTarget(const std::string& name, const std::string& text);
bool RuleMatches(const RouteRule& rule, const RouteFacts& facts);

// Every target a condition reads a metric of (to check they exist at load).
std::vector<RouteTarget> TargetsRead(const RouteRule& rule);
// Whether a condition reads `complexity` (so the router computes it).
bool ReadsComplexity(const RouteRule& rule);

}  // namespace inferd
