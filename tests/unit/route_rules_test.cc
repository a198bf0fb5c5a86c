// Router rules: the seeds' two examples written in the syntax, what they match, precedence and
// negation, unknown facts, and errors that name the rule and the place.
#include "pipeline/route_rules.h"

#include <gtest/gtest.h>

#include <map>

namespace inferd {
namespace {

// Facts by term: input_bytes[(NAME)], dim(NAME,I), param.NAME, queue_depth(TARGET), complexity.
class FakeFacts : public RouteFacts {
 public:
  std::map<std::string, RouteValue> values;
  std::optional<RouteValue> Read(const RouteTerm& term) const override {
    auto it = values.find(Key(term));
    if (it == values.end()) return std::nullopt;
    return it->second;
  }
  static std::string Key(const RouteTerm& term) {
    switch (term.kind) {
      case RouteTermKind::kInputBytes: return "input_bytes(" + term.name + ")";
      case RouteTermKind::kDim: return "dim(" + term.name + "," + std::to_string(term.index) + ")";
      case RouteTermKind::kParam: return "param." + term.name;
      case RouteTermKind::kQueueDepth: return "queue_depth(" + DescribeTarget(term.target) + ")";
      case RouteTermKind::kP99Ms: return "p99_ms(" + DescribeTarget(term.target) + ")";
      case RouteTermKind::kPredictedRps: return "predicted_rps(" + DescribeTarget(term.target) + ")";
      case RouteTermKind::kComplexity: return "complexity";
    }
    return "";
  }
};

RouteRule Parse(const std::string& text, bool is_default = false) {
  auto rule = ParseRouteRule("route.1", text, is_default);
  EXPECT_TRUE(rule.ok()) << rule.status().message();
  return rule.value_or(RouteRule{});
}

std::string ParseError(const std::string& text, bool is_default = false) {
  auto rule = ParseRouteRule("route.7", text, is_default);
  EXPECT_FALSE(rule.ok()) << text;
  return rule.ok() ? "" : rule.status().message();
}

TEST(RouteRulesTest, TheSeedsSizeAndBudgetRules) {
  // Small inputs for the light model go to the edge; a budget above 200 ms for the large model
  // goes to the GPU cluster; everything else to the default pool (route.default).
  RouteRule edge = Parse("input_bytes < 65536 and param.model == 'light' -> pool edge");
  RouteRule gpu = Parse("param.latency_budget_ms > 200 and param.model == 'large' -> pool gpu_cluster");
  RouteRule rest = Parse("pool default", /*is_default=*/true);
  FakeFacts small_light;
  small_light.values = {{"input_bytes()", 4096.0}, {"param.model", std::string("light")}};
  EXPECT_TRUE(RuleMatches(edge, small_light));
  EXPECT_FALSE(RuleMatches(gpu, small_light));
  FakeFacts patient_large;
  patient_large.values = {{"input_bytes()", 1e6}, {"param.model", std::string("large")},
                          {"param.latency_budget_ms", std::string("500")}};  // a string parameter reads as a number
  EXPECT_FALSE(RuleMatches(edge, patient_large));
  EXPECT_TRUE(RuleMatches(gpu, patient_large));
  EXPECT_TRUE(RuleMatches(rest, patient_large));
  EXPECT_EQ(gpu.target, (RouteTarget{RouteTarget::Kind::kPool, "gpu_cluster", 0}));
}

TEST(RouteRulesTest, TheSeedsComplexityTiers) {
  RouteRule device = Parse("complexity < 0.3 -> model mobilenet_v3_large");
  RouteRule edge = Parse("complexity >= 0.3 and complexity < 0.7 -> model efficientnet_b0@2");
  RouteRule cloud = Parse("pool cloud", true);
  FakeFacts facts;
  facts.values["complexity"] = 0.5;
  EXPECT_FALSE(RuleMatches(device, facts));
  EXPECT_TRUE(RuleMatches(edge, facts));
  EXPECT_EQ(DescribeTarget(edge.target), "model efficientnet_b0@2");
  EXPECT_TRUE(RuleMatches(cloud, facts));
}

TEST(RouteRulesTest, AndBindsTighterThanOrAndNotAndParenthesesWork) {
  FakeFacts facts;
  facts.values = {{"param.a", 1.0}, {"param.b", 0.0}, {"param.c", 1.0}};
  EXPECT_TRUE(RuleMatches(Parse("param.a == 1 or param.b == 1 and param.c == 0 -> model m"), facts));
  EXPECT_FALSE(RuleMatches(Parse("(param.a == 1 or param.b == 1) and param.c == 0 -> model m"), facts));
  EXPECT_TRUE(RuleMatches(Parse("not param.b == 1 -> model m"), facts));
}

TEST(RouteRulesTest, MetricsOfTargetsAndComparingTwoTerms) {
  RouteRule overflow = Parse("predicted_rps(model local) > queue_depth(pool remote) -> pool remote");
  EXPECT_EQ(TargetsRead(overflow).size(), 2u);
  EXPECT_EQ(TargetsRead(overflow)[0], (RouteTarget{RouteTarget::Kind::kModel, "local", 0}));
  FakeFacts facts;
  facts.values = {{"predicted_rps(model local)", 900.0}, {"queue_depth(pool remote)", 3.0}};
  EXPECT_TRUE(RuleMatches(overflow, facts));
  RouteRule wide = Parse("dim(IMAGE, 2) >= 1024 -> model big");
  facts.values["dim(IMAGE,2)"] = 2048.0;
  EXPECT_TRUE(RuleMatches(wide, facts));
}

TEST(RouteRulesTest, AnUnknownFactMatchesNothing) {
  FakeFacts none;
  EXPECT_FALSE(RuleMatches(Parse("param.tier == 'edge' -> model m"), none));
  EXPECT_FALSE(RuleMatches(Parse("param.tier != 'edge' -> model m"), none));
  FakeFacts number;
  number.values["param.tier"] = 3.0;
  EXPECT_TRUE(RuleMatches(Parse("param.tier != 'edge' -> model m"), number));
  EXPECT_FALSE(RuleMatches(Parse("param.tier == 'edge' -> model m"), number));
}

TEST(RouteRulesTest, ErrorsNameTheRuleAndThePlace) {
  EXPECT_EQ(ParseError("input_bytes < 10"),
            "router rule 'route.7': expected '->' and a target after the condition, found the end at character 17 "
            "of \"input_bytes < 10\"");
  EXPECT_NE(ParseError("size < 10 -> model m").find("unknown term, found 'size' at character 1"), std::string::npos);
  EXPECT_NE(ParseError("input_bytes = 10 -> model m").find("an unexpected character '='"), std::string::npos);
  EXPECT_NE(ParseError("param.t < 'x' -> model m").find("strings compare only with == and !="), std::string::npos);
  EXPECT_NE(ParseError("1 < 2 -> model m").find("two constants"), std::string::npos);
  EXPECT_NE(ParseError("input_bytes < 10 -> server x").find("expected a target"), std::string::npos);
  EXPECT_NE(ParseError("input_bytes < 10 -> model m@0").find("version number"), std::string::npos);
  EXPECT_NE(ParseError("param.t == 'x -> model m").find("no closing quote"), std::string::npos);
  EXPECT_NE(ParseError("model m extra", true).find("unexpected text after the target"), std::string::npos);
  EXPECT_NE(ParseError("(param.a == 1 -> model m").find("expected ')'"), std::string::npos);
  EXPECT_NE(ParseError("dim(IMAGE) > 3 -> model m").find("expected ','"), std::string::npos);
}

TEST(RouteRulesTest, NamesMayHoldDashesButNotTheArrow) {
  RouteRule rule = Parse("param.t == 'x'->model light-v2");
  EXPECT_EQ(rule.target.name, "light-v2");
}

}  // namespace
}  // namespace inferd
