#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "pipeline/grpc_pool.h"
#include "pipeline/router_plan.h"
#include "pipeline/router_runner.h"

namespace inferd {
namespace {

ModelConfig Config(const std::string& text) {
  auto config = ParseModelConfigText(text, "test");
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.value_or(ModelConfig{});
}

// light and heavy take IMAGE FP32 [4] and give SCORES FP32 [3]; other gives LABEL INT32 instead.
std::map<std::string, ModelConfig> Members() {
  auto model = [](const std::string& name, const std::string& output) {
    return Config("name: \"" + name + R"(" max_batch_size: 8
        input [ { name: "IMAGE" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: ")" + output + R"(" data_type: TYPE_FP32 dims: [ 3 ] } ])");
  };
  return {{"light", model("light", "SCORES")}, {"heavy", model("heavy", "SCORES")}, {"other", model("other", "LABEL")},
          {"scorer", model("scorer", "SCORE")}};
}

MemberConfigs Lookup(std::map<std::string, ModelConfig> members = Members()) {
  return [members = std::move(members)](const std::string& name, int64_t) -> StatusOr<ModelConfig> {
    auto it = members.find(name);
    if (it == members.end()) return Status::NotFound("model '" + name + "' is not loaded");
    return it->second;
  };
}

std::string Router(const std::map<std::string, std::string>& parameters) {
  std::string text = R"(name: "R" platform: "router" max_batch_size: 8
      input [ { name: "IMAGE" data_type: TYPE_FP32 dims: [ 4 ] } ]
      output [ { name: "SCORES" data_type: TYPE_FP32 dims: [ 3 ] } ]
)";
  for (const auto& [key, value] : parameters) {
    text += "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } }\n";
  }
  return text;
}

std::string PlanError(const std::map<std::string, std::string>& parameters) {
  auto plan = PlanRouter(Config(Router(parameters)), Lookup());
  EXPECT_FALSE(plan.ok());
  return plan.ok() ? "" : plan.status().message();
}

TEST(RouterPlanTest, RulesInNumberOrderThenTheDefault) {
  auto plan = PlanRouter(Config(Router({{"route.10", "param.tier == 'big' -> model heavy"},
                                        {"route.2", "input_bytes < 100 -> model light"},
                                        {"route.default", "model heavy"}})),
                         Lookup());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->rules.size(), 3u);
  EXPECT_EQ(plan->rules[0].name, "route.2");  // 2 before 10: by number, not by text
  EXPECT_EQ(plan->rules[1].name, "route.10");
  EXPECT_EQ(plan->rules[2].name, "route.default");
  EXPECT_EQ(plan->rules[2].condition, nullptr);
  EXPECT_EQ(RouterMembers(Config(Router({{"route.1", "queue_depth(model other) > 3 -> model light"},
                                         {"route.default", "model heavy"}}))),
            (std::vector<std::string>{"light", "heavy", "other"}));
}

TEST(RouterPlanTest, EveryErrorNamesTheParameter) {
  EXPECT_NE(PlanError({{"route.1", "input_bytes < -> model light"}, {"route.default", "model heavy"}}).find("route.1"),
            std::string::npos);
  EXPECT_NE(PlanError({{"route.1", "input_bytes < 3 -> model light"}}).find("parameters[route.default]: missing"),
            std::string::npos);
  EXPECT_NE(PlanError({{"route.x", "input_bytes < 3 -> model light"}, {"route.default", "model heavy"}})
                .find("parameters[route.x]"),
            std::string::npos);
  EXPECT_NE(PlanError({{"route.default", "model missing"}}).find("target 'model missing': model 'missing' is not loaded"),
            std::string::npos);
  EXPECT_NE(PlanError({{"route.default", "model other"}}).find("target 'model other': it has no output 'SCORES'"),
            std::string::npos);
  EXPECT_NE(PlanError({{"route.default", "pool cloud"}}).find("no parameters[pool.cloud] defines it"), std::string::npos);
  EXPECT_NE(PlanError({{"route.default", "pool cloud"}, {"pool.cloud", "http://x:1"}}).find("parameters[pool.cloud]"),
            std::string::npos);
  EXPECT_NE(PlanError({{"route.default", "pool cloud"}, {"pool.cloud", "grpc://x:1"}, {"pool_options.cloud", "retries=2"}})
                .find("retries is 0 or 1"),
            std::string::npos);
  EXPECT_NE(PlanError({{"route.default", "model heavy"}, {"circuit_breaker.nothing", "consecutive_failures=2"}})
                .find("'nothing' is neither a pool nor a model"),
            std::string::npos);
  EXPECT_NE(PlanError({{"route.1", "complexity > 0.5 -> model heavy"}, {"route.default", "model light"}})
                .find("parameters[complexity]: missing"),
            std::string::npos);
  EXPECT_NE(PlanError({{"cascade.tiers", "model light, model heavy"}, {"cascade.thresholds", "0.5, 0.7"},
                       {"cascade.confidence", "max_softmax SCORES"}})
                .find("2 thresholds for 2 tiers"),
            std::string::npos);
  EXPECT_NE(PlanError({{"cascade.tiers", "model light, model heavy"}, {"cascade.thresholds", "0.5"},
                       {"cascade.confidence", "entropy SCORES"}})
                .find("cascade.confidence"),
            std::string::npos);
  EXPECT_NE(PlanError({{"route.default", "cascade"}}).find("cascade.tiers is not set"), std::string::npos);
}

TEST(RouterPlanTest, PoolsAndTheirServiceConfig) {
  auto plan = PlanRouter(Config(Router({{"route.default", "pool cloud"},
                                        {"pool.cloud", "grpc://127.0.0.1:9001"},
                                        {"pool_options.cloud", "model=big, version=2, timeout_ms=250, retries=0"},
                                        {"circuit_breaker.cloud", "consecutive_failures=3,fallback=light"}})),
                         Lookup());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const PoolSpec& pool = plan->pools.at(0);
  EXPECT_EQ(pool.channel_target, "dns:///127.0.0.1:9001");
  EXPECT_EQ(pool.model, "big");
  EXPECT_EQ(pool.model_version, 2);
  EXPECT_EQ(pool.timeout_us, 250'000u);
  EXPECT_EQ(pool.retries, 0);
  EXPECT_EQ(plan->breakers.at("cloud").fallback, "light");
  const std::string config = PoolServiceConfig(pool);
  EXPECT_NE(config.find(R"("round_robin")"), std::string::npos) << config;
  EXPECT_NE(config.find(R"("healthCheckConfig":{"serviceName":""})"), std::string::npos) << config;
  EXPECT_EQ(config.find("retryPolicy"), std::string::npos) << config;  // retries=0
  PoolSpec retrying = pool;
  retrying.retries = 1;
  EXPECT_NE(PoolServiceConfig(retrying).find(R"("maxAttempts":2)"), std::string::npos);
  EXPECT_NE(PoolServiceConfig(retrying).find(R"("retryThrottling":{"maxTokens":10,"tokenRatio":0.1})"), std::string::npos);
}

Tensor FloatTensor(const std::string& name, std::vector<float> values, Shape shape) {
  Tensor tensor{.name = name, .dtype = DataType::kFp32, .shape = std::move(shape)};
  MutableBuffer buffer = AllocateBuffer(values.size() * sizeof(float));
  std::memcpy(buffer.get(), values.data(), values.size() * sizeof(float));
  tensor.byte_size = values.size() * sizeof(float);
  tensor.data = std::shared_ptr<const uint8_t>(buffer.memory, buffer.get());
  return tensor;
}

TEST(RouterRunnerTest, ConfidenceIsTheLowestRowsSoftmax) {
  // Row 0: logits (0, 0, 0) -> 1/3 each; row 1: (10, 0, 0) -> ~0.9999.
  const Tensor scores = FloatTensor("SCORES", {0, 0, 0, 10, 0, 0}, {2, 3});
  EXPECT_NEAR(*AnswerConfidence(scores, true, ConfidenceMeasure::kMaxSoftmax), 1.0 / 3, 1e-9);
  EXPECT_NEAR(*AnswerConfidence(scores, true, ConfidenceMeasure::kMargin), 0.0, 1e-9);
  const Tensor one = FloatTensor("SCORES", {std::log(3.0f), 0, 0}, {1, 3});  // softmax (0.6, 0.2, 0.2)
  EXPECT_NEAR(*AnswerConfidence(one, true, ConfidenceMeasure::kMaxSoftmax), 0.6, 1e-6);
  EXPECT_NEAR(*AnswerConfidence(one, true, ConfidenceMeasure::kMargin), 0.4, 1e-6);
  Tensor ints = one;
  ints.dtype = DataType::kInt32;
  EXPECT_FALSE(AnswerConfidence(ints, true, ConfidenceMeasure::kMaxSoftmax).ok());
}

TEST(RouterRunnerTest, EntropyScore) {
  Tensor constant = FloatTensor("IMAGE", {1, 1, 1, 1}, {1, 4});
  EXPECT_LT(EntropyScore(constant), 0.26);  // 16 bytes of 4 distinct values: 2 bits of 8
  std::vector<float> spread(64);
  for (size_t i = 0; i < spread.size(); ++i) spread[i] = static_cast<float>(i) * 1.37f + 0.11f;
  EXPECT_GT(EntropyScore(FloatTensor("IMAGE", spread, {1, 64})), 0.5);
}

// A fake server door: answers each local target's request at once, with a SCORES tensor whose
// logits come from `logits` by model name.
struct FakeServer {
  std::map<std::string, std::vector<float>> logits;
  std::vector<std::string> calls;
  std::map<std::string, Status> failing;

  RouterServices Services(const Clock* clock) {
    RouterServices services;
    services.clock = clock;
    services.dispatch = [this](std::unique_ptr<InferRequest> request, InferCallback done) {
      calls.push_back(request->model_name);
      if (auto it = failing.find(request->model_name); it != failing.end()) return done(it->second);
      InferResponse response;
      response.model_name = request->model_name;
      const std::vector<float>& values = logits[request->model_name];
      response.outputs.push_back(FloatTensor("SCORES", values, {1, static_cast<int64_t>(values.size())}));
      response.outputs.push_back(FloatTensor("EXTRA", {1}, {1, 1}));
      done(std::move(response));
    };
    services.queue_depth = [](const std::string& model, int64_t) -> std::optional<double> {
      return model == "heavy" ? 7.0 : 0.0;
    };
    return services;
  }
};

std::unique_ptr<InferRequest> Request(size_t floats = 4, InferParameters parameters = {}) {
  auto request = std::make_unique<InferRequest>();
  request->model_name = "R";
  request->inputs.push_back(FloatTensor("IMAGE", std::vector<float>(floats, 0.5f), {1, static_cast<int64_t>(floats)}));
  request->parameters = std::move(parameters);
  return request;
}

StatusOr<InferResponse> RunOnce(RouterRunner& runner, std::unique_ptr<InferRequest> request) {
  std::optional<StatusOr<InferResponse>> answer;
  InferCallback done = [&](StatusOr<InferResponse> result) { answer = std::move(result); };
  Status status = runner.Run(request, done);
  if (!status.ok()) return status;
  EXPECT_TRUE(answer.has_value());
  return answer.value_or(Status::Internal("no answer"));
}

std::string Parameter(const InferResponse& response, const std::string& name) {
  const InferParameter* parameter = FindParameter(response.parameters, name);
  if (parameter == nullptr) return "";
  if (const auto* text = std::get_if<std::string>(&parameter->value)) return *text;
  if (const auto* number = std::get_if<int64_t>(&parameter->value)) return std::to_string(*number);
  return "?";
}

std::shared_ptr<RouterRunner> MakeRunner(const std::map<std::string, std::string>& parameters, FakeServer& server,
                                         const Clock* clock) {
  auto plan = PlanRouter(Config(Router(parameters)), Lookup());
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  auto runner = RouterRunner::Create(std::make_shared<const RouterPlan>(std::move(plan).value()), 1, server.Services(clock));
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  return runner.value_or(nullptr);
}

TEST(RouterRunnerTest, FirstMatchingRuleWinsAndTheAnswerSaysWhere) {
  ManualClock clock;
  FakeServer server;
  server.logits = {{"light", {1, 2, 3}}, {"heavy", {3, 2, 1}}};
  auto runner = MakeRunner({{"route.1", "input_bytes <= 16 and param.tier != 'gold' -> model light"},
                            {"route.2", "queue_depth(model heavy) > 5 -> model light"},
                            {"route.default", "model heavy"}},
                           server, &clock);
  ASSERT_NE(runner, nullptr);
  // (A missing parameter makes its comparison false, != included: the client names its tier.)
  auto small = RunOnce(*runner, Request(4, {{"tier", std::string("silver")}}));
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_EQ(Parameter(*small, "routed_to"), "model light");
  EXPECT_EQ(small->model_name, "R");
  EXPECT_EQ(small->model_version, 1);
  ASSERT_EQ(small->outputs.size(), 1u);  // only the router's outputs: EXTRA is dropped
  EXPECT_EQ(small->outputs[0].name, "SCORES");
  // 16 bytes but tier gold: rule 1 fails; heavy's queue is 7 > 5: rule 2 sends it to light.
  auto gold = RunOnce(*runner, Request(4, {{"tier", std::string("gold")}}));
  EXPECT_EQ(Parameter(*gold, "routed_to"), "model light");
  EXPECT_EQ(runner->rule_matches(0), 1u);
  EXPECT_EQ(runner->rule_matches(1), 1u);
  EXPECT_EQ(runner->rule_matches(2), 0u);
}

TEST(RouterRunnerTest, TargetErrorsNameTheTargetAndKeepTheirCode) {
  ManualClock clock;
  FakeServer server;
  server.failing["heavy"] = Status::InvalidArgument("bad shape");
  auto runner = MakeRunner({{"route.default", "model heavy"}}, server, &clock);
  auto answer = RunOnce(*runner, Request());
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(answer.status().message(), "router 'R' target 'model heavy': bad shape");
  EXPECT_EQ(runner->target_stats(0).errors.load(), 1u);
}

TEST(RouterRunnerTest, AnOpenBreakerSendsToItsFallback) {
  ManualClock clock;
  FakeServer server;
  server.logits = {{"light", {1, 2, 3}}};
  server.failing["heavy"] = Status::Unavailable("down");
  auto runner = MakeRunner({{"route.default", "model heavy"},
                            {"circuit_breaker.heavy", "consecutive_failures=2,cool_down_seconds=60,fallback=light"}},
                           server, &clock);
  EXPECT_FALSE(RunOnce(*runner, Request()).ok());
  EXPECT_FALSE(RunOnce(*runner, Request()).ok());
  auto fallback = RunOnce(*runner, Request());
  ASSERT_TRUE(fallback.ok()) << fallback.status().message();
  EXPECT_EQ(Parameter(*fallback, "routed_to"), "model light");
  EXPECT_EQ(server.calls, (std::vector<std::string>{"heavy", "heavy", "light"}));
}

TEST(RouterRunnerTest, CascadeEscalatesBelowTheThreshold) {
  ManualClock clock;
  FakeServer server;
  // light: softmax max 0.6; heavy: ~1.
  server.logits = {{"light", {std::log(3.0f), 0, 0}}, {"heavy", {20, 0, 0}}};
  auto make = [&](const std::string& threshold) {
    return MakeRunner({{"cascade.tiers", "model light, model heavy"},
                       {"cascade.thresholds", threshold},
                       {"cascade.confidence", "max_softmax SCORES"}},
                      server, &clock);
  };
  auto confident = RunOnce(*make("0.5"), Request());
  ASSERT_TRUE(confident.ok()) << confident.status().message();
  EXPECT_EQ(Parameter(*confident, "tier"), "1");
  EXPECT_EQ(Parameter(*confident, "routed_to"), "model light");
  auto escalated = RunOnce(*make("0.7"), Request());
  ASSERT_TRUE(escalated.ok());
  EXPECT_EQ(Parameter(*escalated, "tier"), "2");
  EXPECT_EQ(Parameter(*escalated, "routed_to"), "model heavy");
  EXPECT_EQ(RunOnce(*make("0"), Request())->parameters.size(), 2u);
  EXPECT_EQ(Parameter(*RunOnce(*make("1"), Request()), "tier"), "2");
}

// A router whose scoring model answers SCORE = `score` (after `on_score` runs), then routes
// complexity >= 0.7 to heavy and the rest to light; `seen` gets every request's time limit.
std::shared_ptr<RouterRunner> ScoredRouter(FakeServer& server, ManualClock& clock, float score,
                                           std::function<void()> on_score, std::vector<uint64_t>* seen) {
  server.logits = {{"light", {1}}, {"heavy", {1}}};
  RouterServices services = server.Services(&clock);
  services.dispatch = [inner = services.dispatch, score, on_score, seen](std::unique_ptr<InferRequest> request,
                                                                        InferCallback done) {
    seen->push_back(request->client_timeout_us);
    if (request->model_name != "scorer") return inner(std::move(request), std::move(done));
    on_score();
    InferResponse response;
    response.outputs.push_back(FloatTensor("SCORE", {score}, {1, 1}));
    done(std::move(response));
  };
  auto plan = PlanRouter(Config(Router({{"complexity", "model scorer SCORE"},
                                        {"route.1", "complexity >= 0.7 -> model heavy"},
                                        {"route.default", "model light"}})),
                         Lookup());
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  auto runner = RouterRunner::Create(std::make_shared<const RouterPlan>(std::move(plan).value()), 1, services);
  EXPECT_TRUE(runner.ok());
  return runner.value_or(nullptr);
}

TEST(RouterRunnerTest, AScoringModelGivesTheComplexity) {
  ManualClock clock;
  FakeServer server;
  std::vector<uint64_t> seen;
  auto runner = ScoredRouter(server, clock, 0.8f, [] {}, &seen);
  ASSERT_NE(runner, nullptr);
  auto answer = RunOnce(*runner, Request());
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_EQ(Parameter(*answer, "routed_to"), "model heavy");
}

TEST(RouterRunnerTest, TheTargetGetsWhatIsLeftOfTheDeadline) {
  ManualClock clock;
  FakeServer server;
  std::vector<uint64_t> limits;
  // Scoring takes 30 ms.
  auto runner = ScoredRouter(server, clock, 0.1f, [&clock] { clock.Advance(std::chrono::milliseconds(30)); }, &limits);
  ASSERT_NE(runner, nullptr);
  auto request = Request();
  request->timeout_us = 100'000;  // 100 ms
  ASSERT_TRUE(RunOnce(*runner, std::move(request)).ok());
  EXPECT_EQ(limits, (std::vector<uint64_t>{100'000, 70'000}));
  // A budget the scorer used up: the target is never sent the request.
  limits.clear();
  request = Request();
  request->timeout_us = 20'000;
  auto late = RunOnce(*runner, std::move(request));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(limits.size(), 1u);  // the scorer only
}

}  // namespace
}  // namespace inferd
