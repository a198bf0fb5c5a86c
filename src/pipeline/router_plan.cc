#include "pipeline/router_plan.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

namespace inferd {
namespace {

using ParameterMap = google::protobuf::Map<std::string, inference::ModelParameter>;

Status Invalid(const ModelConfig& router, const std::string& key, const std::string& what) {
  return Status::InvalidArgument("router '" + router.name() + "' parameters[" + key + "]: " + what);
}

std::string Trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t"), last = text.find_last_not_of(" \t");
  return first == std::string::npos ? "" : text.substr(first, last - first + 1);
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) items.push_back(Trim(item));
  return items;
}

std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> words;
  std::stringstream stream(text);
  std::string word;
  while (stream >> word) words.push_back(word);
  return words;
}

// route.N for N a positive integer: N; 0 otherwise.
int64_t RuleNumber(const std::string& key) {
  int64_t number = 0;
  const char* begin = key.data() + 6;
  auto [end, error] = std::from_chars(begin, key.data() + key.size(), number);
  return error == std::errc() && end == key.data() + key.size() && number > 0 ? number : 0;
}

Status ParseRules(const ModelConfig& router, RouterPlan* plan) {
  std::map<int64_t, RouteRule> numbered;
  std::optional<RouteRule> fallback;
  for (const auto& [key, value] : router.parameters()) {
    if (!key.starts_with("route.")) continue;
    if (key == "route.default") {
      ASSIGN_OR_RETURN(fallback, ParseRouteRule(key, value.string_value(), /*is_default=*/true));
      continue;
    }
    const int64_t number = RuleNumber(key);
    if (number == 0) return Invalid(router, key, "a rule's key is route.N with N a positive integer, or route.default");
    ASSIGN_OR_RETURN(numbered[number], ParseRouteRule(key, value.string_value(), /*is_default=*/false));
  }
  for (auto& [number, rule] : numbered) plan->rules.push_back(std::move(rule));
  if (!fallback && plan->cascade) {
    fallback = RouteRule{.name = "route.default", .condition = nullptr, .target = {RouteTarget::Kind::kCascade, "", 0}};
  }
  if (!fallback) {
    return Invalid(router, "route.default", "missing: the target of the requests no rule matches (or set cascade.tiers)");
  }
  plan->rules.push_back(std::move(*fallback));
  return Status::Ok();
}

StatusOr<PoolSpec> ParsePool(const ModelConfig& router, const std::string& name, const std::string& address,
                             const ParameterMap& parameters) {
  PoolSpec pool{.name = name, .address = address, .model = router.name()};
  const std::string key = "pool." + name;
  if (address.starts_with("grpc://")) {
    const std::string host_port = address.substr(7);
    if (host_port.empty() || host_port.find(':') == std::string::npos || host_port.find('/') != std::string::npos) {
      return Invalid(router, key, "'" + address + "' is not grpc://HOST:PORT");
    }
    pool.channel_target = "dns:///" + host_port;
  } else if (address.starts_with("dns:///") && address.size() > 7) {
    pool.channel_target = address;
  } else {
    return Invalid(router, key, "'" + address + "' is neither grpc://HOST:PORT nor dns:///NAME:PORT");
  }
  auto options_it = parameters.find("pool_options." + name);
  if (options_it == parameters.end()) return pool;
  const std::string options_key = "pool_options." + name;
  auto options = ParseOptionList(options_it->second.string_value());
  if (!options.ok()) return Invalid(router, options_key, options.status().message());
  for (const auto& [option, value] : *options) {
    if (option == "model") {
      if (value.empty()) return Invalid(router, options_key, "model names no model");
      pool.model = value;
      continue;
    }
    auto number = ParseNonNegativeNumber(option, value);
    if (!number.ok()) return Invalid(router, options_key, number.status().message());
    if (option == "version") {
      pool.model_version = static_cast<int64_t>(*number);
    } else if (option == "timeout_ms") {
      pool.timeout_us = static_cast<uint64_t>(*number * 1000);
    } else if (option == "retries") {
      if (*number > 1) return Invalid(router, options_key, "retries is 0 or 1 (at most one retry)");
      pool.retries = static_cast<int>(*number);
    } else if (option == "retry_max_tokens") {
      if (*number < 1 || *number > 1000) return Invalid(router, options_key, "retry_max_tokens is in [1, 1000]");
      pool.retry_max_tokens = static_cast<int>(*number);
    } else if (option == "retry_token_ratio") {
      if (*number <= 0) return Invalid(router, options_key, "retry_token_ratio must be above 0");
      pool.retry_token_ratio = *number;
    } else {
      return Invalid(router, options_key,
                     "unknown option '" + option + "' (expected model, version, timeout_ms, retries, "
                     "retry_max_tokens, retry_token_ratio)");
    }
  }
  return pool;
}

Status ParsePools(const ModelConfig& router, RouterPlan* plan) {
  for (const auto& [key, value] : router.parameters()) {
    if (key.starts_with("pool_options.")) {
      if (!router.parameters().contains("pool." + key.substr(13))) {
        return Invalid(router, key, "no pool." + key.substr(13) + " gives this pool an address");
      }
      continue;
    }
    if (!key.starts_with("pool.")) continue;
    const std::string name = key.substr(5);
    if (name.empty()) return Invalid(router, key, "a pool needs a name: pool.NAME");
    ASSIGN_OR_RETURN(PoolSpec pool, ParsePool(router, name, value.string_value(), router.parameters()));
    plan->pools.push_back(std::move(pool));
  }
  return Status::Ok();
}

Status ParseCascade(const ModelConfig& router, RouterPlan* plan) {
  const auto& parameters = router.parameters();
  auto tiers = parameters.find("cascade.tiers");
  if (tiers == parameters.end()) {
    for (const char* key : {"cascade.thresholds", "cascade.confidence"}) {
      if (parameters.contains(key)) return Invalid(router, key, "set without cascade.tiers");
    }
    return Status::Ok();
  }
  CascadePlan cascade;
  for (const std::string& tier : SplitList(tiers->second.string_value())) {
    ASSIGN_OR_RETURN(RouteTarget target, ParseRouteTarget("cascade.tiers", tier));
    cascade.tiers.push_back(std::move(target));
  }
  if (cascade.tiers.size() < 2) return Invalid(router, "cascade.tiers", "a cascade needs at least two tiers");
  auto thresholds = parameters.find("cascade.thresholds");
  if (thresholds == parameters.end()) return Invalid(router, "cascade.thresholds", "missing: one threshold per tier but the last");
  for (const std::string& item : SplitList(thresholds->second.string_value())) {
    auto threshold = ParseNonNegativeNumber("cascade.thresholds", item);
    if (!threshold.ok()) return Invalid(router, "cascade.thresholds", threshold.status().message());
    if (*threshold > 1) return Invalid(router, "cascade.thresholds", "a threshold is in [0, 1], not " + item);
    cascade.thresholds.push_back(*threshold);
  }
  if (cascade.thresholds.size() != cascade.tiers.size() - 1) {
    return Invalid(router, "cascade.thresholds",
                   std::to_string(cascade.thresholds.size()) + " thresholds for " + std::to_string(cascade.tiers.size()) +
                       " tiers: give one per tier but the last");
  }
  auto confidence = parameters.find("cascade.confidence");
  const std::vector<std::string> words =
      confidence == parameters.end() ? std::vector<std::string>() : SplitWords(confidence->second.string_value());
  if (words.size() != 2 || (words[0] != "max_softmax" && words[0] != "margin")) {
    return Invalid(router, "cascade.confidence", "expected 'max_softmax OUTPUT' or 'margin OUTPUT'");
  }
  cascade.measure = words[0] == "margin" ? ConfidenceMeasure::kMargin : ConfidenceMeasure::kMaxSoftmax;
  cascade.output = words[1];
  plan->cascade = std::move(cascade);
  return Status::Ok();
}

bool HasInput(const ModelConfig& config, const std::string& name) {
  return std::ranges::any_of(config.input(), [&](const auto& input) { return input.name() == name; });
}

Status ParseComplexity(const ModelConfig& router, RouterPlan* plan) {
  auto it = router.parameters().find("complexity");
  if (it == router.parameters().end()) return Status::Ok();
  const std::vector<std::string> words = SplitWords(it->second.string_value());
  ComplexityScore& score = plan->complexity;
  const char* expected = "expected 'entropy INPUT', 'bytes INPUT MAX_BYTES' or 'model NAME OUTPUT'";
  if (words.empty()) return Invalid(router, "complexity", expected);
  if (words[0] == "entropy" && words.size() == 2) {
    score.kind = ComplexityScore::Kind::kEntropy;
    score.input = words[1];
  } else if (words[0] == "bytes" && words.size() == 3) {
    score.kind = ComplexityScore::Kind::kBytes;
    score.input = words[1];
    auto max = ParseNonNegativeNumber("MAX_BYTES", words[2]);
    if (!max.ok() || *max == 0) return Invalid(router, "complexity", "MAX_BYTES must be a number above 0");
    score.max_bytes = *max;
  } else if (words[0] == "model" && words.size() == 3) {
    score.kind = ComplexityScore::Kind::kModel;
    ASSIGN_OR_RETURN(score.scorer, ParseRouteTarget("complexity", "model " + words[1]));
    score.output = words[2];
  } else {
    return Invalid(router, "complexity", expected);
  }
  if (score.kind != ComplexityScore::Kind::kModel && !HasInput(router, score.input)) {
    return Invalid(router, "complexity", "the router has no input '" + score.input + "'");
  }
  return Status::Ok();
}

Status ParseBreakers(const ModelConfig& router, RouterPlan* plan) {
  for (const auto& [key, value] : router.parameters()) {
    if (!key.starts_with("circuit_breaker.")) continue;
    auto policy = ParseBreakerPolicy(value.string_value());
    if (!policy.ok()) return Invalid(router, key, policy.status().message());
    plan->breakers[key.substr(16)] = std::move(policy).value();
  }
  return Status::Ok();
}

std::string TargetLabel(const ModelConfig& router, const RouteTarget& target) {
  return "router '" + router.name() + "' target '" + DescribeTarget(target) + "'";
}

// A local target takes the router's requests as they are: each of its inputs is one of the
// router's, with the same datatype, and it gives every output of the router (and `extra`).
Status CheckServes(const ModelConfig& router, const RouteTarget& target, const ModelConfig& member,
                   const std::string& extra_output) {
  for (const auto& input : member.input()) {
    if (input.optional()) continue;
    auto it = std::ranges::find_if(router.input(), [&](const auto& own) { return own.name() == input.name(); });
    if (it == router.input().end()) {
      return Status::InvalidArgument(TargetLabel(router, target) + ": its input '" + input.name() +
                                     "' is not an input of the router");
    }
    if (it->data_type() != input.data_type()) {
      return Status::InvalidArgument(TargetLabel(router, target) + ": input '" + input.name() + "' is " +
                                     inference::DataType_Name(input.data_type()) + ", the router's is " +
                                     inference::DataType_Name(it->data_type()));
    }
  }
  std::vector<const inference::ModelOutput*> wanted;
  for (const auto& output : router.output()) wanted.push_back(&output);
  for (const auto* output : wanted) {
    auto it = std::ranges::find_if(member.output(), [&](const auto& own) { return own.name() == output->name(); });
    if (it == member.output().end()) {
      return Status::InvalidArgument(TargetLabel(router, target) + ": it has no output '" + output->name() + "'");
    }
    if (it->data_type() != output->data_type()) {
      return Status::InvalidArgument(TargetLabel(router, target) + ": output '" + output->name() + "' is " +
                                     inference::DataType_Name(it->data_type()) + ", the router's is " +
                                     inference::DataType_Name(output->data_type()));
    }
  }
  if (!extra_output.empty() &&
      std::ranges::none_of(member.output(), [&](const auto& own) { return own.name() == extra_output; })) {
    return Status::InvalidArgument(TargetLabel(router, target) + ": it has no output '" + extra_output +
                                   "' (cascade.confidence)");
  }
  return Status::Ok();
}

// Every target the plan names exists: pools are defined, local models are loaded; serving local
// targets fit the router.
Status CheckTargets(const ModelConfig& router, const RouterPlan& plan, const MemberConfigs& members) {
  auto check = [&](const RouteTarget& target, bool serves, const std::string& extra_output) -> Status {
    if (target.kind == RouteTarget::Kind::kCascade) {
      if (!plan.cascade) return Status::InvalidArgument("router '" + router.name() + "': a rule's target is 'cascade' but cascade.tiers is not set");
      return Status::Ok();
    }
    if (target.kind == RouteTarget::Kind::kPool) {
      if (plan.FindPool(target.name) == nullptr) {
        return Status::InvalidArgument(TargetLabel(router, target) + ": no parameters[pool." + target.name + "] defines it");
      }
      return Status::Ok();
    }
    if (target.name == router.name()) return Status::InvalidArgument(TargetLabel(router, target) + ": a router cannot route to itself");
    auto member = members(target.name, target.version);
    if (!member.ok()) return member.status().WithPrefix(TargetLabel(router, target));
    if (IsRouter(*member)) {
      return Status::InvalidArgument(TargetLabel(router, target) + ": a router's target cannot be another router");
    }
    return serves ? CheckServes(router, target, *member, extra_output) : Status::Ok();
  };
  const std::string confidence_output = plan.cascade ? plan.cascade->output : "";
  for (const RouteRule& rule : plan.rules) {
    RETURN_IF_ERROR(check(rule.target, true, "").WithPrefix("parameters[" + rule.name + "]"));
    for (const RouteTarget& read : TargetsRead(rule)) {
      RETURN_IF_ERROR(check(read, false, "").WithPrefix("parameters[" + rule.name + "]"));
    }
  }
  if (plan.cascade) {
    for (const RouteTarget& tier : plan.cascade->tiers) {
      RETURN_IF_ERROR(check(tier, true, confidence_output).WithPrefix("parameters[cascade.tiers]"));
    }
  }
  for (const auto& entry : plan.breakers) {
    const std::string& name = entry.first;  // named: clang 14 captures no structured binding
    const BreakerPolicy& policy = entry.second;
    const bool is_pool = plan.FindPool(name) != nullptr;
    const auto targets = plan.ServingTargets();
    const bool is_model = std::ranges::any_of(
        targets, [&](const RouteTarget& t) { return t.kind == RouteTarget::Kind::kModel && t.name == name; });
    if (!is_pool && !is_model) {
      return Invalid(router, "circuit_breaker." + name, "'" + name + "' is neither a pool nor a model this router sends to");
    }
    if (!policy.fallback.empty()) {
      RETURN_IF_ERROR(check({RouteTarget::Kind::kModel, policy.fallback, 0}, true, "")
                          .WithPrefix("parameters[circuit_breaker." + name + "] fallback"));
    }
  }
  return Status::Ok();
}

Status CheckScorer(const ModelConfig& router, RouterPlan* plan, const MemberConfigs& members) {
  ComplexityScore& score = plan->complexity;
  if (score.kind != ComplexityScore::Kind::kModel) return Status::Ok();
  auto member = members(score.scorer.name, 0);
  if (!member.ok()) return member.status().WithPrefix("router '" + router.name() + "' parameters[complexity]");
  for (const auto& input : member->input()) {
    if (!HasInput(router, input.name())) {
      return Invalid(router, "complexity", "the scoring model's input '" + input.name() + "' is not an input of the router");
    }
    score.scorer_inputs.push_back(input.name());
  }
  if (std::ranges::none_of(member->output(), [&](const auto& output) { return output.name() == score.output; })) {
    return Invalid(router, "complexity", "the scoring model '" + score.scorer.name + "' has no output '" + score.output + "'");
  }
  return Status::Ok();
}

}  // namespace

const PoolSpec* RouterPlan::FindPool(const std::string& name) const {
  auto it = std::ranges::find_if(pools, [&](const PoolSpec& pool) { return pool.name == name; });
  return it == pools.end() ? nullptr : &*it;
}

std::vector<RouteTarget> RouterPlan::ServingTargets() const {
  std::vector<RouteTarget> targets;
  auto add = [&](const RouteTarget& target) {
    if (target.kind != RouteTarget::Kind::kCascade && std::ranges::find(targets, target) == targets.end()) {
      targets.push_back(target);
    }
  };
  for (const RouteRule& rule : rules) add(rule.target);
  if (cascade) {
    for (const RouteTarget& tier : cascade->tiers) add(tier);
  }
  for (const auto& [name, policy] : breakers) {
    if (!policy.fallback.empty()) add({RouteTarget::Kind::kModel, policy.fallback, 0});
  }
  return targets;
}

namespace {

// Everything that needs no member config.
StatusOr<RouterPlan> ParseRouterConfig(const ModelConfig& router) {
  RouterPlan plan;
  plan.name = router.name();
  if (router.input().empty() || router.output().empty()) {
    return Status::InvalidArgument("router '" + router.name() + "': declare its inputs and outputs (every target takes and gives them)");
  }
  for (const auto& output : router.output()) plan.outputs.push_back(output.name());
  plan.batched = router.max_batch_size() > 0;
  RETURN_IF_ERROR(ParseCascade(router, &plan));
  RETURN_IF_ERROR(ParsePools(router, &plan));
  RETURN_IF_ERROR(ParseRules(router, &plan));
  RETURN_IF_ERROR(ParseComplexity(router, &plan));
  RETURN_IF_ERROR(ParseBreakers(router, &plan));
  const bool reads_complexity = std::ranges::any_of(plan.rules, [](const RouteRule& rule) { return ReadsComplexity(rule); });
  if (reads_complexity && plan.complexity.kind == ComplexityScore::Kind::kNone) {
    return Invalid(router, "complexity", "missing: a rule reads complexity");
  }
  return plan;
}

}  // namespace

StatusOr<RouterPlan> PlanRouter(const ModelConfig& router, const MemberConfigs& members) {
  ASSIGN_OR_RETURN(RouterPlan plan, ParseRouterConfig(router));
  RETURN_IF_ERROR(CheckTargets(router, plan, members));
  RETURN_IF_ERROR(CheckScorer(router, &plan, members));
  return plan;
}

std::vector<std::string> RouterMembers(const ModelConfig& router) {
  auto plan = ParseRouterConfig(router);
  std::vector<std::string> names;
  if (!plan.ok()) return names;  // the real plan, at load, reports the error
  auto add = [&](const std::string& name) {
    if (std::ranges::find(names, name) == names.end()) names.push_back(name);
  };
  for (const RouteTarget& target : plan->ServingTargets()) {
    if (target.kind == RouteTarget::Kind::kModel) add(target.name);
  }
  for (const RouteRule& rule : plan->rules) {
    for (const RouteTarget& target : TargetsRead(rule)) {
      if (target.kind == RouteTarget::Kind::kModel) add(target.name);
    }
  }
  if (plan->complexity.kind == ComplexityScore::Kind::kModel) add(plan->complexity.scorer.name);
  return names;
}

}  // namespace inferd
