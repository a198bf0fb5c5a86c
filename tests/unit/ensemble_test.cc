#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <thread>

#include "pipeline/ensemble_plan.h"
#include "pipeline/ensemble_runner.h"

namespace inferd {
namespace {

ModelConfig Config(const std::string& text) {
  auto config = ParseModelConfigText(text, "test");
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.value_or(ModelConfig{});
}

// pre: IN FP32 [4] -> OUT FP32 [4]; net: X FP32 [4] -> Y FP32 [2]; post: S FP32 [2] -> LABEL INT32 [1].
std::map<std::string, ModelConfig> Members() {
  return {{"pre", Config(R"(name: "pre" max_batch_size: 8
             input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
             output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ])")},
          {"net", Config(R"(name: "net" max_batch_size: 8
             input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
             output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ])")},
          {"post", Config(R"(name: "post" max_batch_size: 8
             input [ { name: "S" data_type: TYPE_FP32 dims: [ 2 ] } ]
             output [ { name: "LABEL" data_type: TYPE_INT32 dims: [ 1 ] } ])")}};
}

MemberConfigs Lookup(std::map<std::string, ModelConfig> members) {
  return [members = std::move(members)](const std::string& name, int64_t) -> StatusOr<ModelConfig> {
    auto it = members.find(name);
    if (it == members.end()) return Status::NotFound("model '" + name + "' is not loaded");
    return it->second;
  };
}

constexpr const char* kHead = R"(name: "E" platform: "ensemble" max_batch_size: 8
    input [ { name: "IMAGE" data_type: TYPE_FP32 dims: [ 4 ] } ]
    output [ { name: "CLASS" data_type: TYPE_INT32 dims: [ 1 ] } ]
)";

std::string Chain(const std::string& pre = R"(input_map { key: "IN" value: "IMAGE" } output_map { key: "OUT" value: "features" })",
                  const std::string& net = R"(input_map { key: "X" value: "features" } output_map { key: "Y" value: "scores" })",
                  const std::string& post = R"(input_map { key: "S" value: "scores" } output_map { key: "LABEL" value: "CLASS" })") {
  return std::string(kHead) + "ensemble_scheduling { step [ { model_name: \"pre\" model_version: -1 " + pre +
         " }, { model_name: \"net\" " + net + " }, { model_name: \"post\" " + post + " } ] }";
}

std::string PlanError(const std::string& ensemble, std::map<std::string, ModelConfig> members = Members()) {
  auto plan = PlanEnsemble(Config(ensemble), Lookup(std::move(members)));
  EXPECT_FALSE(plan.ok());
  if (!plan.ok()) {
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  }
  return plan.ok() ? "" : plan.status().message();
}

TEST(EnsemblePlanTest, AChainIsWiredStepByStep) {
  auto plan = PlanEnsemble(Config(Chain()), Lookup(Members()));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->steps.size(), 3u);
  EXPECT_EQ(plan->steps[0].model_version, 0);  // -1: the newest
  EXPECT_EQ(plan->steps[0].producers, 0u);
  EXPECT_EQ(plan->steps[0].consumers, std::vector<size_t>{1});
  EXPECT_EQ(plan->steps[2].producers, 1u);
  EXPECT_EQ(plan->steps[1].inputs, (std::vector<std::pair<std::string, std::string>>{{"X", "features"}}));
  EXPECT_EQ(plan->outputs, std::vector<std::string>{"CLASS"});
  EXPECT_EQ(EnsembleMembers(Config(Chain())), (std::vector<std::string>{"pre", "net", "post"}));
}

TEST(EnsemblePlanTest, EveryErrorNamesTheStep) {
  auto members = Members();
  members.erase("net");
  EXPECT_NE(PlanError(Chain(), members).find("step 2 (model 'net'): model 'net' is not loaded"), std::string::npos);
  EXPECT_NE(PlanError(Chain(R"(output_map { key: "OUT" value: "features" })")).find("step 1 (model 'pre'): the model's input 'IN'"),
            std::string::npos);
  EXPECT_NE(PlanError(Chain(R"(input_map { key: "IN" value: "IMAGE" } input_map { key: "EXTRA" value: "IMAGE" } output_map { key: "OUT" value: "features" })"))
                .find("'EXTRA', which the model has no input of"),
            std::string::npos);
  EXPECT_NE(PlanError(Chain(R"(input_map { key: "IN" value: "IMAGE" } output_map { key: "NOPE" value: "features" })"))
                .find("step 1 (model 'pre'): output_map names 'NOPE'"),
            std::string::npos);
  EXPECT_NE(PlanError(Chain(R"(input_map { key: "IN" value: "PHOTO" } output_map { key: "OUT" value: "features" })"))
                .find("tensor 'PHOTO', which is neither an input of the ensemble nor an output of any step"),
            std::string::npos);
  EXPECT_NE(PlanError(Chain(R"(input_map { key: "IN" value: "IMAGE" } output_map { key: "OUT" value: "IMAGE" })"))
                .find("tensor 'IMAGE' is already an input of the ensemble"),
            std::string::npos);
  EXPECT_NE(PlanError(Chain(R"(input_map { key: "IN" value: "IMAGE" } output_map { key: "OUT" value: "scores" })"))
                .find("step 2 (model 'net'): tensor 'scores' is already produced by ensemble 'E' step 1"),
            std::string::npos);
  // The ensemble's output comes from no step.
  EXPECT_NE(PlanError(Chain(R"(input_map { key: "IN" value: "IMAGE" } output_map { key: "OUT" value: "features" })",
                            R"(input_map { key: "X" value: "features" } output_map { key: "Y" value: "scores" })",
                            R"(input_map { key: "S" value: "scores" } output_map { key: "LABEL" value: "LABEL" })"))
                .find("its output 'CLASS' is produced by no step"),
            std::string::npos);
}

TEST(EnsemblePlanTest, TypesShapesAndBatchingMustMatchBetweenSteps) {
  auto members = Members();
  members["post"].mutable_input(0)->set_data_type(inference::TYPE_INT64);
  EXPECT_NE(PlanError(Chain(), members).find("step 3 (model 'post'): input 'S' is INT64 [-1,2] but tensor 'scores' is FP32 [-1,2]"),
            std::string::npos)
      << PlanError(Chain(), members);
  members = Members();
  members["post"].mutable_input(0)->set_dims(0, 3);
  EXPECT_NE(PlanError(Chain(), members).find("input 'S' is FP32 [-1,3]"), std::string::npos);
  members = Members();
  members["net"].set_max_batch_size(4);
  EXPECT_NE(PlanError(Chain(), members).find("step 2 (model 'net'): the ensemble batches up to 8 but the model's max_batch_size is 4"),
            std::string::npos);
  // A declared ensemble output of another type than its producer makes.
  std::string wrong_output = Chain();
  wrong_output.replace(wrong_output.find("TYPE_INT32"), 10, "TYPE_FP32");
  EXPECT_NE(PlanError(wrong_output).find("its output 'CLASS' is declared FP32 [-1,1] but ensemble 'E' step 3 (model 'post') makes it INT32 [-1,1]"),
            std::string::npos)
      << PlanError(wrong_output);
}

TEST(EnsemblePlanTest, CyclesAreRefused) {
  // net takes post's output and post takes net's: neither can ever start.
  std::map<std::string, ModelConfig> members = Members();
  members["post"] = Config(R"(name: "post" max_batch_size: 8
      input [ { name: "S" data_type: TYPE_FP32 dims: [ 2 ] } ]
      output [ { name: "LABEL" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "BACK" data_type: TYPE_FP32 dims: [ 4 ] } ])");
  members["net"] = Config(R"(name: "net" max_batch_size: 8
      input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "Z" data_type: TYPE_FP32 dims: [ 4 ] } ]
      output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ])");
  const std::string cyclic = Chain(
      R"(input_map { key: "IN" value: "IMAGE" } output_map { key: "OUT" value: "features" })",
      R"(input_map { key: "X" value: "features" } input_map { key: "Z" value: "loop" } output_map { key: "Y" value: "scores" })",
      R"(input_map { key: "S" value: "scores" } output_map { key: "LABEL" value: "CLASS" } output_map { key: "BACK" value: "loop" })");
  EXPECT_NE(PlanError(cyclic, members).find("step 2 (model 'net'): its inputs depend on its own outputs"), std::string::npos)
      << PlanError(cyclic, members);
  members = Members();
  members["pre"] = Config(R"(name: "pre" max_batch_size: 8
      input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
      output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ])");
  const std::string self_loop = Chain(R"(input_map { key: "IN" value: "features" } output_map { key: "OUT" value: "features" })");
  EXPECT_NE(PlanError(self_loop, members).find("step 1 (model 'pre'): input 'IN' takes the step's own output"), std::string::npos);
}

// A fake server: records each step's request and answers when the test says so.
struct Steps {
  struct Call {
    std::unique_ptr<InferRequest> request;
    InferCallback done;
  };
  std::vector<Call> calls;
  StepDispatch Dispatch() {
    return [this](std::unique_ptr<InferRequest> request, InferCallback done) {
      calls.push_back({std::move(request), std::move(done)});
    };
  }
  // Answers call `i` with one FP32 output per requested output, each the call's first input + `add`.
  void Answer(size_t i, float add, int64_t compute_ns = 0) {
    const InferRequest& request = *calls[i].request;
    InferResponse response;
    response.compute_ns = compute_ns;
    for (const std::string& name : request.requested_outputs) {
      auto value = std::make_shared<float>(request.inputs[0].values<float>()[0] + add);
      response.outputs.push_back({name, DataType::kFp32, {1, 1}, AliasData(value, value.get()), 4});
    }
    calls[i].done(std::move(response));
  }
};

Tensor Scalar(const std::string& name, float value) {
  auto storage = std::make_shared<float>(value);
  return {name, DataType::kFp32, {1, 1}, AliasData(storage, storage.get()), 4};
}

// A diamond: a -> (b, c) -> d, built by hand (the runner needs only the plan).
std::shared_ptr<EnsemblePlan> Diamond() {
  auto plan = std::make_shared<EnsemblePlan>();
  plan->name = "E";
  plan->steps = {{"a", 0, {{"x", "IN"}}, {{"y", "t1"}}, {1, 2}, 0},
                 {"b", 3, {{"x", "t1"}}, {{"y", "t2"}}, {3}, 1},
                 {"c", 0, {{"x", "t1"}}, {{"y", "t3"}}, {3}, 1},
                 {"d", 0, {{"x", "t2"}, {"z", "t3"}}, {{"y", "OUT"}}, {}, 2}};
  plan->outputs = {"OUT"};
  return plan;
}

// Starts one run on a new runner; returns the runner (its stats and limits are what tests read).
std::shared_ptr<EnsembleRunner> RunEnsemble(std::shared_ptr<const EnsemblePlan> plan, int64_t version,
                                            std::unique_ptr<InferRequest> request, StepDispatch dispatch,
                                            const Clock* clock, InferCallback done) {
  auto runner = EnsembleRunner::Create(std::move(plan), version, std::move(dispatch), clock);
  EXPECT_TRUE(runner->Run(request, done).ok());
  return runner;
}

std::unique_ptr<InferRequest> Request(uint64_t client_timeout_us = 0) {
  auto request = std::make_unique<InferRequest>();
  request->model_name = "E";
  request->id = "r1";
  request->client_timeout_us = client_timeout_us;
  request->inputs.push_back(Scalar("IN", 1));
  return request;
}

TEST(EnsembleRunTest, StepsStartWhenTheirInputsAreInAndIndependentOnesRunAtOnce) {
  Steps steps;
  ManualClock clock;
  std::optional<StatusOr<InferResponse>> answer;
  RunEnsemble(Diamond(), 1, Request(), steps.Dispatch(), &clock, [&](StatusOr<InferResponse> r) { answer = std::move(r); });
  ASSERT_EQ(steps.calls.size(), 1u);  // only a: the others wait for it
  EXPECT_EQ(steps.calls[0].request->model_name, "a");
  EXPECT_EQ(steps.calls[0].request->inputs[0].name, "x");
  EXPECT_EQ(steps.calls[0].request->requested_outputs, std::vector<std::string>{"y"});
  steps.Answer(0, 1);  // t1 = 2
  ASSERT_EQ(steps.calls.size(), 3u);  // b and c at once, neither answered
  EXPECT_EQ(steps.calls[1].request->model_name, "b");
  EXPECT_EQ(steps.calls[1].request->model_version, 3);
  EXPECT_EQ(steps.calls[2].request->model_name, "c");
  // b and c read the same buffer a answered with: no copy between steps.
  EXPECT_EQ(steps.calls[1].request->inputs[0].data.get(), steps.calls[2].request->inputs[0].data.get());
  steps.Answer(2, 10);  // t3 = 12
  EXPECT_EQ(steps.calls.size(), 3u);  // d waits for b too
  steps.Answer(1, 100);  // t2 = 102
  ASSERT_EQ(steps.calls.size(), 4u);
  EXPECT_EQ(steps.calls[3].request->inputs[0].values<float>()[0], 102);
  EXPECT_EQ(steps.calls[3].request->inputs[1].name, "z");
  EXPECT_EQ(steps.calls[3].request->inputs[1].values<float>()[0], 12);
  EXPECT_FALSE(answer);
  steps.Answer(3, 0.5f);
  ASSERT_TRUE(answer && answer->ok()) << (answer ? answer->status().message() : "no answer");
  EXPECT_EQ((*answer)->model_name, "E");
  EXPECT_EQ((*answer)->model_version, 1);
  EXPECT_EQ((*answer)->id, "r1");
  ASSERT_EQ((*answer)->outputs.size(), 1u);
  EXPECT_EQ((*answer)->outputs[0].name, "OUT");
  EXPECT_EQ((*answer)->outputs[0].values<float>()[0], 102.5f);
}

TEST(EnsembleRunTest, AFailingStepEndsTheRunNamingItAndNothingAfterItStarts) {
  Steps steps;
  ManualClock clock;
  std::optional<StatusOr<InferResponse>> answer;
  RunEnsemble(Diamond(), 1, Request(), steps.Dispatch(), &clock, [&](StatusOr<InferResponse> r) { answer = std::move(r); });
  steps.Answer(0, 1);
  steps.calls[1].done(Status::InvalidArgument("bad row"));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(answer->status().message(), "ensemble 'E' step 2 (model 'b'): bad row");
  steps.Answer(2, 1);  // c still answers; d never starts and the run answers once
  EXPECT_EQ(steps.calls.size(), 3u);
}

TEST(EnsembleRunTest, StepsGetWhatIsLeftOfTheDeadlineAndOneThatWouldStartAfterItIsNotRun) {
  Steps steps;
  ManualClock clock;
  std::optional<StatusOr<InferResponse>> answer;
  RunEnsemble(Diamond(), 1, Request(/*client_timeout_us=*/50'000), steps.Dispatch(), &clock,
              [&](StatusOr<InferResponse> r) { answer = std::move(r); });
  EXPECT_EQ(steps.calls[0].request->client_timeout_us, 50'000u);
  clock.Advance(std::chrono::milliseconds(20));
  steps.Answer(0, 1);
  EXPECT_EQ(steps.calls[1].request->client_timeout_us, 30'000u);
  steps.Answer(2, 1);
  clock.Advance(std::chrono::milliseconds(40));
  steps.Answer(1, 1);  // b answers 10 ms after the deadline: the run ends there, naming b
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(answer->status().message(), "ensemble 'E' step 2 (model 'b'): the request's deadline passed while the step ran");
  EXPECT_EQ(steps.calls.size(), 3u);  // d was not run
}

TEST(EnsembleRunTest, WithMeasuredStepsEachGetsItsShareOfWhatIsLeft) {
  Steps steps;
  ManualClock clock;
  auto runner = RunEnsemble(Diamond(), 1, Request(), steps.Dispatch(), &clock, [](StatusOr<InferResponse>) {});
  EXPECT_EQ(runner->StepLimitUs(0, 100'000), 100'000u);  // nothing measured yet: all that is left
  EXPECT_EQ(runner->StepLimitUs(0, 0), 0u);               // no deadline, no step timeout: none
  clock.Advance(std::chrono::milliseconds(10));
  steps.Answer(0, 1);  // a: 10 ms
  clock.Advance(std::chrono::milliseconds(30));
  steps.Answer(2, 1);  // c: 30 ms
  clock.Advance(std::chrono::milliseconds(10));
  steps.Answer(1, 1);  // b: 40 ms
  clock.Advance(std::chrono::milliseconds(10));
  steps.Answer(3, 1);  // d: 10 ms
  // From a, the slowest path is a -> b -> d: 10 + 40 + 10 = 60 ms, of which a takes 1/6.
  EXPECT_EQ(runner->StepLimitUs(0, 60'000), 10'000u);
  EXPECT_EQ(runner->StepLimitUs(1, 50'000), 40'000u);  // b: 40 of 50
  EXPECT_EQ(runner->StepLimitUs(2, 40'000), 30'000u);  // c: 30 of 40
  EXPECT_EQ(runner->StepLimitUs(3, 7'000), 7'000u);    // the last step gets all that is left
  const StepStats& b = runner->step_stats(1);
  EXPECT_EQ(b.success.load(), 1u);
  EXPECT_EQ(b.in_flight.load(), 0);
  EXPECT_EQ(b.MeanNs(), 40'000'000u);
}

TEST(EnsembleRunTest, AStepTimeoutCapsItsLimit) {
  auto plan = Diamond();
  plan->steps[1].timeout_us = 5'000;
  auto runner = EnsembleRunner::Create(plan, 1, [](std::unique_ptr<InferRequest>, InferCallback) {}, nullptr);
  EXPECT_EQ(runner->StepLimitUs(1, 0), 5'000u);       // no deadline: the step's own
  EXPECT_EQ(runner->StepLimitUs(1, 3'000), 3'000u);   // never past the request's deadline
  EXPECT_EQ(runner->StepLimitUs(1, 90'000), 5'000u);
}

TEST(EnsembleRunTest, AStepThatAnswersPastItsOwnTimeLimitEndsTheRun) {
  auto plan = Diamond();
  plan->steps[0].timeout_us = 5'000;
  Steps steps;
  ManualClock clock;
  std::optional<StatusOr<InferResponse>> answer;
  RunEnsemble(plan, 1, Request(), steps.Dispatch(), &clock, [&](StatusOr<InferResponse> r) { answer = std::move(r); });
  EXPECT_EQ(steps.calls[0].request->client_timeout_us, 5'000u);  // binds in the member's queue
  clock.Advance(std::chrono::milliseconds(10));
  steps.Answer(0, 1);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(answer->status().message(), "ensemble 'E' step 1 (model 'a'): the step took longer than its time limit of 5000 us");
  EXPECT_EQ(steps.calls.size(), 1u);
}

TEST(EnsembleRunTest, AStoppedRunnerRefusesRunsAndDrainWaitsForTheStartedOnes) {
  Steps steps;
  ManualClock clock;
  int answers = 0;
  auto runner = RunEnsemble(Diamond(), 1, Request(), steps.Dispatch(), &clock, [&](StatusOr<InferResponse>) { ++answers; });
  std::thread drain([&] { runner->StopAndDrain(); });
  while (!runner->stopped()) std::this_thread::yield();
  auto request = Request();
  InferCallback done = [](StatusOr<InferResponse>) {};
  Status refused = runner->Run(request, done);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(request, nullptr);  // still the caller's
  EXPECT_EQ(runner->runs_in_flight(), 1);
  steps.calls[0].done(Status::Internal("boom"));
  drain.join();
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(runner->runs_in_flight(), 0);
}

TEST(EnsemblePlanTest, StepTimeoutsAreReadFromTheEnsemblesParameters) {
  std::string config = Chain() + R"( parameters { key: "step_timeout_ms" value { string_value: "net=30,post=5" } })";
  auto plan = PlanEnsemble(Config(config), Lookup(Members()));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->steps[0].timeout_us, 0u);
  EXPECT_EQ(plan->steps[1].timeout_us, 30'000u);
  EXPECT_EQ(plan->steps[2].timeout_us, 5'000u);
  EXPECT_NE(PlanError(Chain() + R"( parameters { key: "step_timeout_ms" value { string_value: "nope=3" } })")
                .find("names model 'nope', which no step runs"),
            std::string::npos);
  EXPECT_NE(PlanError(Chain() + R"( parameters { key: "step_timeout_ms" value { string_value: "net=fast" } })")
                .find("write model=N"),
            std::string::npos);
}

TEST(EnsembleRunTest, StepsAnsweredInsideTheDispatchRunToTheEnd) {
  // A server that answers at once (an error path, or a model on the calling thread).
  int calls = 0;
  auto answer_now = [&](std::unique_ptr<InferRequest> request, InferCallback done) {
    ++calls;
    if (request->model_name == "fail") return done(Status::Unavailable("queue full"));
    InferResponse response;
    auto value = std::make_shared<float>(request->inputs[0].values<float>()[0] + 1);
    response.outputs.push_back({"y", DataType::kFp32, {1, 1}, AliasData(value, value.get()), 4});
    done(std::move(response));
  };
  ManualClock clock;
  int answers = 0;
  RunEnsemble(Diamond(), 1, Request(), answer_now, &clock, [&](StatusOr<InferResponse> r) {
    ++answers;
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->outputs[0].values<float>()[0], 4);  // a: 2, b and c: 3, d: 3 + 1
  });
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(calls, 4);
  auto failing = Diamond();
  failing->steps[1].model_name = "fail";
  calls = 0;
  RunEnsemble(failing, 1, Request(), answer_now, &clock, [&](StatusOr<InferResponse> r) {
    ++answers;
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(r.status().message(), "ensemble 'E' step 2 (model 'fail'): queue full");
  });
  EXPECT_EQ(answers, 2);
  EXPECT_EQ(calls, 2);  // a, then b failed before c was sent
}

}  // namespace
}  // namespace inferd

namespace inferd {
namespace {

TEST(EnsemblePlanTest, PipelineSizingIsReadFromTheEnsemblesParameters) {
  std::map<std::string, ModelConfig> members = Members();
  members["net"].add_instance_group()->set_count(3);
  auto plan = PlanEnsemble(Config(Chain() + R"( parameters [
      { key: "target_qps" value { string_value: "250" } },
      { key: "step_queue_capacity" value { string_value: "post=16" } } ])"),
                           Lookup(members));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->target_qps, 250);
  EXPECT_EQ(plan->steps[0].executing_capacity, 8);   // 1 instance x max_batch_size 8
  EXPECT_EQ(plan->steps[1].executing_capacity, 24);  // 3 instances x 8
  EXPECT_EQ(plan->steps[2].queue_capacity, 16);
  EXPECT_EQ(plan->steps[0].queue_capacity, 0);  // the seeds' rule, once measured
  EXPECT_NE(PlanError(Chain() + R"( parameters { key: "target_qps" value { string_value: "-5" } })")
                .find("parameters[target_qps] '-5' is not a positive number"),
            std::string::npos);
  EXPECT_NE(PlanError(Chain() + R"( parameters { key: "step_queue_capacity" value { string_value: "net=0" } })")
                .find("write model=N"),
            std::string::npos);
}

TEST(EnsembleRunTest, AFullStepQueueFailsTheRunAtOnceNamingTheStep) {
  auto plan = Diamond();
  plan->steps[0].queue_capacity = 1;  // executing_capacity 1: step a holds 2 of this ensemble's requests
  Steps steps;
  ManualClock clock;
  auto runner = EnsembleRunner::Create(plan, 1, steps.Dispatch(), &clock);
  EXPECT_EQ(runner->StepCapacity(0), 2);
  EXPECT_EQ(runner->StepCapacity(1), 0);  // no capacity set and no target_qps: unbounded
  std::vector<std::optional<StatusOr<InferResponse>>> answers(3);
  for (auto& answer : answers) {
    auto request = Request();
    InferCallback done = [&answer](StatusOr<InferResponse> r) { answer = std::move(r); };
    ASSERT_TRUE(runner->Run(request, done).ok());
  }
  EXPECT_EQ(steps.calls.size(), 2u);  // the third never reached step a's model
  ASSERT_TRUE(answers[2]);
  EXPECT_EQ(answers[2]->status().code(), StatusCode::kUnavailable);
  EXPECT_NE(answers[2]->status().message().find("ensemble 'E' step 1 (model 'a'): the step's queue is full"),
            std::string::npos)
      << answers[2]->status().message();
  EXPECT_FALSE(answers[0] || answers[1]);
}

TEST(EnsembleRunTest, WithATargetQpsTheQueueFollowsMeanProcessingTimeTimesQps) {
  auto plan = Diamond();
  plan->target_qps = 500;
  plan->steps[0].executing_capacity = 4;
  Steps steps;
  ManualClock clock;
  auto runner = RunEnsemble(plan, 1, Request(), steps.Dispatch(), &clock, [](StatusOr<InferResponse>) {});
  EXPECT_EQ(runner->StepCapacity(0), 0);  // nothing measured: unbounded
  steps.Answer(0, 1, /*compute_ns=*/10'000'000);
  // 10 ms x 500 QPS / 1000 = 5 waiting, beside the 4 its instances execute.
  EXPECT_EQ(runner->StepCapacity(0), 9);
  steps.Answer(2, 1, 1'000'000);
  EXPECT_EQ(runner->StepCapacity(2), 2);  // 1 ms x 500 / 1000 = 0.5, rounded up; executing 1
}

TEST(EnsembleRunTest, MaxRunsInFlightRunsRequestsOneAtATimeInArrivalOrder) {
  auto plan = Diamond();
  plan->max_runs_in_flight = 1;
  plan->max_waiting_runs = 1;
  Steps steps;
  ManualClock clock;
  auto runner = EnsembleRunner::Create(plan, 1, steps.Dispatch(), &clock);
  std::vector<std::optional<StatusOr<InferResponse>>> answers(2);
  for (auto& answer : answers) {
    auto request = Request();
    InferCallback done = [&answer](StatusOr<InferResponse> r) { answer = std::move(r); };
    ASSERT_TRUE(runner->Run(request, done).ok());
  }
  auto third = Request();
  InferCallback third_done = [](StatusOr<InferResponse>) { FAIL() << "a refused run is not answered"; };
  Status refused = runner->Run(third, third_done);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("parameters[max_runs_in_flight]"), std::string::npos) << refused.message();
  EXPECT_NE(third, nullptr);  // left with the caller
  EXPECT_EQ(steps.calls.size(), 1u);  // only the first run's step a: the second waits
  EXPECT_EQ(runner->runs_in_flight(), 2);
  clock.Advance(std::chrono::milliseconds(5));
  steps.Answer(0, 1);
  steps.Answer(1, 1);
  steps.Answer(2, 1);
  EXPECT_EQ(steps.calls.size(), 4u);
  steps.Answer(3, 1);  // the first run answers: the second starts
  ASSERT_TRUE(answers[0] && answers[0]->ok());
  ASSERT_EQ(steps.calls.size(), 5u);
  EXPECT_EQ(steps.calls[4].request->model_name, "a");
  for (size_t i = 4; i < 8; ++i) steps.Answer(i, 1);
  ASSERT_TRUE(answers[1] && answers[1]->ok());
  EXPECT_EQ((*answers[1])->queue_ns, 5'000'000);  // it waited 5 ms for the slot
  EXPECT_EQ(runner->runs_in_flight(), 0);
}

TEST(EnsemblePlanTest, MaxRunsInFlightIsAPositiveInteger) {
  auto plan = PlanEnsemble(Config(Chain() + R"( parameters { key: "max_runs_in_flight" value { string_value: "2" } })"),
                           Lookup(Members()));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->max_runs_in_flight, 2);
  EXPECT_NE(PlanError(Chain() + R"( parameters { key: "max_runs_in_flight" value { string_value: "0" } })")
                .find("not a positive integer"),
            std::string::npos);
}

}  // namespace
}  // namespace inferd
