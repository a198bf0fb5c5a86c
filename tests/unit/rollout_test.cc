#include "lifecycle/rollout.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/request_validation.h"
#include "lifecycle/model_manager.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Verdict = StepJudgement::Verdict;

RolloutPlan Plan() {
  RolloutPlan plan;
  plan.version = 2;
  plan.baseline = 1;
  plan.dwell = milliseconds(1000);
  plan.min_requests = 10;
  plan.max_error_rate = 0.1;
  plan.max_p99_ratio = 2;
  return plan;
}

TEST(JudgeStepTest, TooFewRequestsHoldTheStepPastItsDwell) {
  EXPECT_EQ(JudgeStep(Plan(), {9, 9, 0}, {}, 0.001, milliseconds(5000)).verdict, Verdict::kHold);
}

TEST(JudgeStepTest, AdvancesAfterTheDwellInsideTheGuards) {
  EXPECT_EQ(JudgeStep(Plan(), {100, 10, 0.0019}, {}, 0.001, milliseconds(999)).verdict, Verdict::kHold);
  EXPECT_EQ(JudgeStep(Plan(), {100, 10, 0.0019}, {}, 0.001, milliseconds(1000)).verdict, Verdict::kAdvance);
}

TEST(JudgeStepTest, ErrorsAboveTheRateRollBackBeforeTheDwell) {
  const StepJudgement judgement = JudgeStep(Plan(), {10, 2, 0.001}, {}, 0.001, milliseconds(10));
  EXPECT_EQ(judgement.verdict, Verdict::kRollBack);
  EXPECT_EQ(judgement.cause, "error_rate");
  EXPECT_NE(judgement.reason.find("2 of 10"), std::string::npos) << judgement.reason;
}

TEST(JudgeStepTest, ASlowerP99RollsBackAndAnUnknownBaselineWaits) {
  const StepJudgement judgement = JudgeStep(Plan(), {50, 0, 0.0031}, {}, 0.001, milliseconds(10));
  EXPECT_EQ(judgement.verdict, Verdict::kRollBack);
  EXPECT_EQ(judgement.cause, "latency");
  EXPECT_EQ(JudgeStep(Plan(), {50, 0, 0.0031}, {}, 0, milliseconds(10)).verdict, Verdict::kHold);
}

RolloutPlan PlanWithAgreement(double min_agreement) {
  RolloutPlan plan = Plan();
  plan.agreement = AgreementGuard{};
  plan.agreement->min_agreement = min_agreement;
  return plan;
}

TEST(JudgeStepTest, DisagreeingMirroredAnswersRollBackOnceEnoughWereCompared) {
  const RolloutPlan plan = PlanWithAgreement(0.9);
  EXPECT_EQ(JudgeStep(plan, {100, 0, 0.001}, {9, 0, 0}, 0.001, milliseconds(10)).verdict, Verdict::kHold);
  const StepJudgement judgement = JudgeStep(plan, {100, 0, 0.001}, {10, 8, 0}, 0.001, milliseconds(10));
  EXPECT_EQ(judgement.verdict, Verdict::kRollBack);
  EXPECT_EQ(judgement.cause, "agreement");
  EXPECT_NE(judgement.reason.find("8 of 10"), std::string::npos) << judgement.reason;
  EXPECT_EQ(JudgeStep(plan, {100, 0, 0.001}, {10, 9, 0}, 0.001, milliseconds(10)).verdict, Verdict::kHold);
}

TEST(JudgeStepTest, WithAnAgreementGuardAStepAdvancesOnlyAfterEnoughComparedPairs) {
  const RolloutPlan plan = PlanWithAgreement(0.9);
  EXPECT_EQ(JudgeStep(plan, {100, 0, 0.001}, {9, 9, 40}, 0.001, milliseconds(5000)).verdict, Verdict::kHold);
  EXPECT_EQ(JudgeStep(plan, {100, 0, 0.001}, {10, 10, 0}, 0.001, milliseconds(5000)).verdict, Verdict::kAdvance);
  // Without the guard the mirrored counts do not matter.
  EXPECT_EQ(JudgeStep(Plan(), {100, 0, 0.001}, {10, 0, 0}, 0.001, milliseconds(5000)).verdict, Verdict::kAdvance);
}

TEST(RolloutPlanTest, ValidationNamesTheField) {
  EXPECT_TRUE(ValidateRolloutPlan(Plan()).ok());
  auto message = [](auto change) {
    RolloutPlan plan = Plan();
    change(plan);
    return ValidateRolloutPlan(plan).message();
  };
  EXPECT_NE(message([](RolloutPlan& p) { p.steps = {5, 20}; }).find("steps"), std::string::npos);
  EXPECT_NE(message([](RolloutPlan& p) { p.steps = {20, 5, 100}; }).find("steps"), std::string::npos);
  EXPECT_NE(message([](RolloutPlan& p) { p.baseline = 2; }).find("baseline"), std::string::npos);
  EXPECT_NE(message([](RolloutPlan& p) { p.dwell = milliseconds(0); }).find("dwell"), std::string::npos);
  EXPECT_NE(message([](RolloutPlan& p) { p.max_error_rate = 2; }).find("max_error_rate"), std::string::npos);
  EXPECT_NE(message([](RolloutPlan& p) { p.min_requests = 0; }).find("min_requests"), std::string::npos);
  EXPECT_NE(message([](RolloutPlan& p) { p = PlanWithAgreement(0); }).find("'min'"), std::string::npos);
  EXPECT_NE(message([](RolloutPlan& p) { p = PlanWithAgreement(1.5); }).find("'min'"), std::string::npos);
  EXPECT_NE(message([](RolloutPlan& p) {
              p = PlanWithAgreement(0.9);
              p.agreement->mirror_percent = 0;
            }).find("mirror_percent"),
            std::string::npos);
  EXPECT_NE(message([](RolloutPlan& p) {
              p = PlanWithAgreement(0.9);
              p.agreement->tolerance = -1;
            }).find("tolerance"),
            std::string::npos);
}

// Answers its input; fails when the input is negative. Stands in for a bad new version.
class FlakyModel final : public Model {
 public:
  Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) override {
    if (batch.inputs[0].values<float>()[0] < 0) return Status::Internal("negative input");
    Tensor out = batch.inputs[0];
    out.name = "OUT";
    outputs->push_back(out);
    return Status::Ok();
  }
};

class FlakyBackend final : public Backend {
 public:
  std::string_view name() const override { return "flaky"; }
  StatusOr<std::unique_ptr<Model>> Load(const ModelConfig&, const LoadOptions&) override {
    return std::unique_ptr<Model>(new FlakyModel());
  }
};

class RolloutControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() / ("inferd_rollout_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(repo_);
    fs::create_directories(repo_ / "m" / "1");
    fs::create_directories(repo_ / "m" / "2");
    std::ofstream(repo_ / "m" / "config.pbtxt")
        << "backend: \"flaky\" max_batch_size: 0 version_policy { all {} }"
           " input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 1 ] } ]"
           " output [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 1 ] } ]"
           " parameters { key: \"traffic_split\" value: { string_value: \"1:100\" } }";
    backends_.Register(std::make_unique<FlakyBackend>());
    RegisterModelMetricFamilies(&metrics_);
    RegisterRolloutMetricFamilies(&metrics_);
    manager_ = std::make_unique<ModelManager>(ModelManager::Options{{repo_}, 1}, &backends_, &metrics_, &clock_);
    manager_->LoadAll();
    ASSERT_TRUE(manager_->AllReady());
    controller_ = std::make_unique<RolloutController>(manager_.get(), &metrics_,
                                                      [this](const std::string&, int64_t version) { retired_ = version; });
  }
  void TearDown() override {
    controller_.reset();
    manager_.reset();
    fs::remove_all(repo_);
  }

  // Sends `count` requests to one version and waits for their answers.
  void Send(int64_t version, int count, float value) {
    std::atomic<int> answered{0};
    for (int i = 0; i < count; ++i) {
      auto storage = std::make_shared<float>(value);
      auto request = std::make_unique<InferRequest>();
      request->inputs.push_back({"IN", DataType::kFp32, {1}, AliasData(storage, storage.get()), 4});
      auto model = manager_->Find("m", version);
      ASSERT_TRUE(model.ok());
      auto validated = ValidateRequest((*model)->config(), std::move(request));
      ASSERT_TRUE(validated.ok()) << validated.status().message();
      ASSERT_TRUE((*model)->Enqueue(std::move(validated).value(), [&](StatusOr<InferResponse>) { answered++; }).ok());
    }
    while (answered.load() < count) std::this_thread::sleep_for(milliseconds(1));
  }

  TrafficSplit Split() { return manager_->Traffic("m").value().split; }

  fs::path repo_;
  BackendRegistry backends_ = BackendRegistry::WithBuiltins();
  MetricsRegistry metrics_;
  RealClock clock_;
  std::unique_ptr<ModelManager> manager_;
  std::unique_ptr<RolloutController> controller_;
  int64_t retired_ = 0;
};

TEST_F(RolloutControllerTest, AHealthyVersionAdvancesToAllTrafficThenTheBaselineIsRetired) {
  RolloutPlan plan = Plan();
  plan.steps = {10, 100};
  plan.max_p99_ratio = 1000;  // this test is about steps; latency on a shared machine is noise
  plan.retention_seconds = 5;
  auto started = controller_->Start("m", plan);
  ASSERT_TRUE(started.ok()) << started.status().message();
  EXPECT_EQ(Split(), (TrafficSplit{{1, 90}, {2, 10}}));
  const auto start = RolloutController::Clock::now();
  Send(1, 20, 1);
  Send(2, 20, 1);
  controller_->Tick(start + milliseconds(500));
  EXPECT_EQ(controller_->Get("m")->step, 0u);  // inside the dwell
  controller_->Tick(start + milliseconds(1100));
  EXPECT_EQ(controller_->Get("m")->step, 1u);
  EXPECT_EQ(Split(), (TrafficSplit{{2, 100}}));
  controller_->Tick(start + milliseconds(2300));
  EXPECT_EQ(controller_->Get("m")->phase, RolloutPhase::kRunning);  // the new step has no requests yet
  Send(2, 20, 1);
  controller_->Tick(start + milliseconds(2400));
  EXPECT_EQ(controller_->Get("m")->phase, RolloutPhase::kCompleted);
  EXPECT_EQ(retired_, 0);
  controller_->Tick(start + milliseconds(8000));
  EXPECT_EQ(retired_, 1);
  EXPECT_TRUE(controller_->Get("m")->baseline_retired);
  EXPECT_EQ(controller_->Rollback("m").status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(RolloutControllerTest, ErrorsRollBackAtOnceAndAreCounted) {
  ASSERT_TRUE(controller_->Start("m", Plan()).ok());
  const auto start = RolloutController::Clock::now();
  Send(2, 8, 1);
  Send(2, 4, -1);
  controller_->Tick(start + milliseconds(100));
  auto status = controller_->Get("m");
  EXPECT_EQ(status->phase, RolloutPhase::kRolledBack);
  EXPECT_NE(status->reason.find("error rate"), std::string::npos) << status->reason;
  EXPECT_EQ(Split(), (TrafficSplit{{1, 100}}));
  EXPECT_NE(metrics_.RenderText().find("inferd_rollout_rollbacks_total{model=\"m\",version=\"2\",cause=\"error_rate\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics_.RenderText().find("inferd_rollout_state{model=\"m\",version=\"2\",state=\"rolled_back\"} 1"),
            std::string::npos);
}

TEST_F(RolloutControllerTest, AnAgreementGuardMirrorsRoutedRequestsWhileItRuns) {
  RolloutPlan plan = PlanWithAgreement(0.9);
  plan.agreement->mirror_percent = 100;
  plan.max_p99_ratio = 1000;
  ASSERT_TRUE(controller_->Start("m", plan).ok());
  // Routed requests of either version may be mirrored to the other; named ones never are.
  for (int i = 0; i < 20; ++i) {
    auto routed = manager_->Route("m", 0, std::to_string(i));
    ASSERT_TRUE(routed.ok());
    ASSERT_NE(routed->mirror, nullptr);
    EXPECT_EQ(routed->mirror->PeerOf(routed->model->version()), 3 - routed->model->version());
  }
  EXPECT_EQ(manager_->Route("m", 1, "x")->mirror, nullptr);
  // Answers that disagree (the candidate failed where the baseline answered) roll it back.
  auto mirror = manager_->Route("m", 0, "x")->mirror;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(mirror->TryBegin());
    MirrorPair pair(mirror);
    pair.Record(1, std::vector<Tensor>{});
    pair.Record(2, Status::Internal("wrong"));
  }
  controller_->Tick(RolloutController::Clock::now());
  auto status = controller_->Get("m");
  EXPECT_EQ(status->phase, RolloutPhase::kRolledBack);
  EXPECT_EQ(status->mirrored.compared, 10u);
  EXPECT_NE(status->reason.find("agreement"), std::string::npos) << status->reason;
  EXPECT_EQ(manager_->Route("m", 0, "x")->mirror, nullptr);  // mirroring stops with the rollout
  const std::string text = metrics_.RenderText();
  EXPECT_NE(text.find("inferd_rollout_mirrored_total{model=\"m\",version=\"2\",outcome=\"disagreed\"} 10"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("inferd_rollout_rollbacks_total{model=\"m\",version=\"2\",cause=\"agreement\"} 1"),
            std::string::npos);
}

TEST_F(RolloutControllerTest, OneRunningRolloutAtATimeAndAManualRollback) {
  RolloutPlan plan = Plan();
  plan.baseline = 0;  // resolved: the busiest version other than 2
  auto started = controller_->Start("m", plan);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->plan.baseline, 1);
  EXPECT_EQ(started->plan.retention_seconds, 86400);
  EXPECT_EQ(controller_->Start("m", Plan()).status().code(), StatusCode::kFailedPrecondition);
  plan.version = 7;
  ASSERT_TRUE(controller_->Rollback("m").ok());
  EXPECT_EQ(controller_->Get("m")->phase, RolloutPhase::kRolledBack);
  EXPECT_EQ(Split(), (TrafficSplit{{1, 100}}));
  EXPECT_EQ(controller_->Start("m", plan).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(controller_->Start("m", Plan()).ok());  // a finished rollout may be replaced
}

TEST(ModelManagerTrafficTest, RetiredVersionsStayOutOfReloadsAndRoutingFollowsTheSplit) {
  const fs::path repo = fs::temp_directory_path() / ("inferd_traffic_" + std::to_string(::getpid()));
  fs::remove_all(repo);
  for (const char* v : {"1", "2"}) fs::create_directories(repo / "m" / v);
  std::ofstream(repo / "m" / "config.pbtxt")
      << "backend: \"identity\" max_batch_size: 0 version_policy { all {} }"
         " input [ { name: \"I\" data_type: TYPE_FP32 dims: [ 1 ] } ] output [ { name: \"O\" data_type: TYPE_FP32 dims: [ 1 ] } ]";
  BackendRegistry backends = BackendRegistry::WithBuiltins();
  MetricsRegistry metrics;
  RegisterModelMetricFamilies(&metrics);
  RealClock clock;
  ModelManager manager({{repo}, 1}, &backends, &metrics, &clock);
  manager.LoadAll();
  EXPECT_EQ(manager.Route("m", 0, "x").value().model->version(), 2);  // no split: the newest
  EXPECT_EQ(manager.SetTraffic("m", TrafficSplit{{3, 10}}, std::nullopt).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager.SetTraffic("m", TrafficSplit{{1, 0}}, std::nullopt).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager.SetTraffic("m", std::nullopt, VersionLabelMap{{"stable", 3}}).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(manager.SetTraffic("m", TrafficSplit{{1, 100}}, VersionLabelMap{{"stable", 1}}).ok());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(manager.Route("m", 0, std::to_string(i)).value().model->version(), 1);
  EXPECT_EQ(manager.Route("m", 2, "x").value().model->version(), 2);  // a named version bypasses the split
  ASSERT_TRUE(manager.SetTraffic("m", TrafficSplit{{2, 100}}, std::nullopt).ok());
  ASSERT_TRUE(manager.RetireVersion("m", 1).ok());
  EXPECT_FALSE(manager.Find("m", 1).ok());
  EXPECT_EQ(manager.RetireVersion("m", 2).code(), StatusCode::kFailedPrecondition);  // its last version
  ASSERT_TRUE(manager.Reload("m", {}).ok());
  EXPECT_FALSE(manager.Find("m", 1).ok());  // a poll's reload keeps it retired
  ASSERT_TRUE(manager.Reload("m", {1}).ok());  // until its folder changes
  EXPECT_TRUE(manager.Find("m", 1).ok());
  ASSERT_TRUE(manager.RetireVersion("m", 1).ok());
  ASSERT_TRUE(manager.Load("m").ok());  // or the load API asks for the model
  EXPECT_TRUE(manager.Find("m", 1).ok());
  EXPECT_EQ(manager.Traffic("m").value().split, (TrafficSplit{{2, 100}}));  // the reload left the split alone
  fs::remove_all(repo);
}

}  // namespace
}  // namespace inferd
