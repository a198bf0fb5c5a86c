#include "lifecycle/model_manager.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "common/low_priority.h"
#include "core/request_validation.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

class ModelManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() / ("inferd_mm_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(repo_);
    fs::create_directories(repo_);
    RegisterModelMetricFamilies(&metrics_);
  }
  void TearDown() override { fs::remove_all(repo_); }

  void AddModel(const std::string& name, const std::string& config, std::vector<int> versions) {
    fs::create_directories(repo_ / name);
    std::ofstream(repo_ / name / "config.pbtxt") << config;
    for (int v : versions) fs::create_directories(repo_ / name / std::to_string(v));
  }

  std::unique_ptr<ModelManager> Manager() {
    return std::make_unique<ModelManager>(ModelManager::Options{{repo_}, 2}, &backends_, &metrics_, &clock_);
  }

  static constexpr const char* kIdentity =
      "backend: \"identity\" max_batch_size: 4 input [ { name: \"I\" data_type: TYPE_FP32 dims: [ 1 ] } ]"
      " output [ { name: \"O\" data_type: TYPE_FP32 dims: [ 1 ] } ]";

  fs::path repo_;
  BackendRegistry backends_ = BackendRegistry::WithBuiltins();
  MetricsRegistry metrics_;
  RealClock clock_;
};

TEST_F(ModelManagerTest, LoadsLatestVersionByDefault) {
  AddModel("good", kIdentity, {1, 3, 2});
  auto manager = Manager();
  manager->LoadAll();
  EXPECT_TRUE(manager->AllReady());
  auto latest = manager->Find("good", 0);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ((*latest)->version(), 3);
  EXPECT_EQ(manager->Find("good", 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(manager->Find("nope", 0).status().code(), StatusCode::kNotFound);
}

// Readiness probes ask State() every few seconds: it answers from memory, so it answers the same
// with the repository gone from disk.
TEST_F(ModelManagerTest, StateComesFromMemoryNotFromTheRepository) {
  AddModel("good", kIdentity, {1, 2});
  AddModel("broken", "backend: \"identity\" what: 1", {1});
  AddModel("idle", kIdentity, {1});
  auto manager = Manager();
  manager->ScanNames();
  ASSERT_TRUE(manager->Load("good").ok());
  ASSERT_FALSE(manager->Load("broken").ok());
  fs::remove_all(repo_);
  EXPECT_EQ(manager->State("good", 0).state, ModelState::kReady);
  EXPECT_EQ(manager->State("good", 2).state, ModelState::kReady);
  const ModelReadiness missing_version = manager->State("good", 7);
  EXPECT_EQ(missing_version.state, ModelState::kUnknown);
  EXPECT_NE(missing_version.reason.find("no version 7"), std::string::npos) << missing_version.reason;
  const ModelReadiness broken = manager->State("broken", 0);
  EXPECT_EQ(broken.state, ModelState::kUnavailable);
  EXPECT_NE(broken.reason.find("what"), std::string::npos) << broken.reason;
  EXPECT_EQ(manager->State("broken", 1).state, ModelState::kUnavailable);
  EXPECT_EQ(manager->State("idle", 0).state, ModelState::kNotLoaded);
  EXPECT_EQ(manager->State("nope", 0).state, ModelState::kUnknown);
  ASSERT_TRUE(manager->Unload("good").ok());
  EXPECT_EQ(manager->State("good", 0).state, ModelState::kNotLoaded);
  EXPECT_EQ(manager->Entries("good").size(), 1u);
  EXPECT_TRUE(manager->Entries("nope").empty());
}

TEST_F(ModelManagerTest, BrokenModelsAreReportedAndOthersServe) {
  AddModel("good", kIdentity, {1});
  AddModel("bad_field", "backend: \"identity\" what: 1", {1});
  AddModel("no_versions", kIdentity, {});
  AddModel("no_file", std::string(kIdentity) + " default_model_filename: \"model.bin\"", {1});
  auto manager = Manager();
  manager->LoadAll();
  EXPECT_FALSE(manager->AllReady());
  EXPECT_TRUE(manager->Find("good", 0).ok());
  std::map<std::string, std::string> reasons;
  for (const auto& entry : manager->Index()) {
    if (entry.state == ModelState::kUnavailable) reasons[entry.name] = entry.reason;
  }
  EXPECT_NE(reasons["bad_field"].find("what"), std::string::npos);
  EXPECT_NE(reasons["no_versions"].find("no version folder"), std::string::npos);
  EXPECT_NE(reasons["no_file"].find("model.bin"), std::string::npos);
  EXPECT_FALSE(reasons.contains("good"));
}

TEST_F(ModelManagerTest, ARequestRoutedToARetiredVersionIsServedByTheOneInItsPlace) {
  AddModel("m", kIdentity, {1});
  auto manager = Manager();
  ASSERT_TRUE(manager->Load("m").ok());
  auto old = *manager->Find("m", 0);
  // Routed to version 1 and validated for it; then a reload retires it before the request queues.
  auto storage = std::make_shared<float>(7.0f);
  auto request = std::make_unique<InferRequest>();
  request->model_name = "m";
  request->inputs.push_back({"I", DataType::kFp32, {1, 1}, AliasData(storage, storage.get()), 4});
  auto validated = ValidateRequest(old->config(), std::move(request));
  ASSERT_TRUE(validated.ok()) << validated.status().message();
  ASSERT_TRUE(manager->Reload("m", {1}).ok());  // version 1's files changed: loaded anew
  ASSERT_TRUE(old->stopped());
  ValidatedRequest ready = std::move(validated).value();
  std::promise<StatusOr<InferResponse>> answered;
  auto done = [&](StatusOr<InferResponse> result) { answered.set_value(std::move(result)); };
  EXPECT_EQ(old->Enqueue(std::move(ready), done).code(), StatusCode::kUnavailable);
  ASSERT_NE(ready.request, nullptr);  // the refused request is given back
  auto replacement = manager->Replacement(*old, *ready.request);
  ASSERT_TRUE(replacement.ok()) << replacement.status().message();
  EXPECT_NE(replacement->get(), old.get());
  ASSERT_TRUE((*replacement)->Enqueue(std::move(ready), done).ok());
  auto result = answered.get_future().get();
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->outputs[0].values<float>()[0], 7.0f);
  // A replacement with another serving config (a request validated for the old one may not fit).
  std::ofstream(repo_ / "m" / "config.pbtxt") << std::string(kIdentity).replace(
      std::string(kIdentity).find("max_batch_size: 4"), 17, "max_batch_size: 2");
  ASSERT_TRUE(manager->Load("m").ok());
  InferRequest again;
  again.model_name = "m";
  EXPECT_EQ(manager->Replacement(**replacement, again).status().code(), StatusCode::kNotFound);
}

TEST_F(ModelManagerTest, ExplicitLoadUnloadAndReload) {
  AddModel("m", std::string(kIdentity) + " version_policy { all {} }", {1});
  auto manager = Manager();
  EXPECT_EQ(manager->Load("absent").code(), StatusCode::kNotFound);
  ASSERT_TRUE(manager->Load("m").ok());
  auto first = *manager->Find("m", 1);
  fs::create_directories(repo_ / "m" / "2");
  ASSERT_TRUE(manager->Load("m").ok());
  EXPECT_EQ(*manager->Find("m", 1), first);  // unchanged version kept, not reloaded
  EXPECT_TRUE(manager->Find("m", 2).ok());
  ASSERT_TRUE(manager->Unload("m").ok());
  EXPECT_FALSE(manager->Find("m", 0).ok());
  EXPECT_EQ(manager->Unload("m").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace inferd

namespace inferd {
namespace {

bool HasSeries(const MetricsRegistry& metrics, const std::string& model, const std::string& version) {
  return metrics.RenderText().find("inferd_executions_total{model=\"" + model + "\",version=\"" + version +
                                   "\"}") != std::string::npos;
}

TEST_F(ModelManagerTest, MetricsFollowTheVersionThroughReloadsAndUnload) {
  AddModel("m", kIdentity, {1});
  auto manager = Manager();
  ASSERT_TRUE(manager->Load("m").ok());
  EXPECT_TRUE(HasSeries(metrics_, "m", "1"));
  // A changed config reloads version 1; the replaced instance must not take the series with it.
  std::ofstream(repo_ / "m" / "config.pbtxt")
      << kIdentity << " parameters { key: \"k\" value: { string_value: \"v\" } }";
  ASSERT_TRUE(manager->Load("m").ok());
  EXPECT_TRUE(HasSeries(metrics_, "m", "1"));
  // A reload that fails keeps the old version serving, and its series.
  std::ofstream(repo_ / "m" / "config.pbtxt") << "backend: \"add_sub\" max_batch_size: 1";
  EXPECT_FALSE(manager->Load("m").ok());
  EXPECT_TRUE(manager->Find("m", 1).ok());
  EXPECT_TRUE(HasSeries(metrics_, "m", "1"));
  ASSERT_TRUE(manager->Unload("m").ok());
  EXPECT_FALSE(HasSeries(metrics_, "m", "1"));
}

TEST_F(ModelManagerTest, FailedFirstLoadLeavesNoSeries) {
  AddModel("broken", "backend: \"add_sub\" max_batch_size: 1", {1});
  auto manager = Manager();
  EXPECT_FALSE(manager->Load("broken").ok());
  EXPECT_FALSE(HasSeries(metrics_, "broken", "1"));
}

// Blocks each load until the test opens the gate; records the CPU policy the load ran at.
class GatedBackend final : public Backend {
 public:
  std::string_view name() const override { return "gated"; }
  StatusOr<std::unique_ptr<Model>> Load(const ModelConfig& config, const LoadOptions& options) override {
    policy.store(sched_getscheduler(0));
    started.store(true);
    gate.wait();
    return identity_->Load(config, options);
  }
  std::shared_future<void> gate;
  std::atomic<bool> started{false};
  std::atomic<int> policy{-1};
  Backend* identity_ = nullptr;
};

// A slow load of one model neither waits for nor delays the load of another, nor finding what
// serves; and the load's work ran at idle CPU priority.
TEST_F(ModelManagerTest, ModelsLoadAtOnceAndALoadRunsAtIdlePriority) {
  AddModel("fast", kIdentity, {1});
  AddModel("slow", std::string(kIdentity).replace(0, std::string("backend: \"identity\"").size(), "backend: \"gated\""), {1});
  auto identity = BackendRegistry::WithBuiltins();
  auto gated = std::make_unique<GatedBackend>();
  GatedBackend* gate = gated.get();
  gate->identity_ = *identity.Select(ParseModelConfigText(kIdentity, "t").value());
  std::promise<void> open;
  gate->gate = open.get_future().share();
  backends_.Register(std::move(gated));
  ModelManager manager(ModelManager::Options{{repo_}, 2}, &backends_, &metrics_, &clock_);
  manager.SetLoadsAtIdlePriority(true);
  ASSERT_TRUE(manager.Load("fast").ok());
  auto slow = std::async(std::launch::async, [&] { return manager.Load("slow"); });
  while (!gate->started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(manager.Reload("fast", {1}).ok());  // while "slow" is still loading
  ASSERT_TRUE(manager.Unload("fast").ok());
  ASSERT_TRUE(manager.Load("fast").ok());
  EXPECT_TRUE(manager.Find("fast", 0).ok());
  EXPECT_FALSE(manager.Find("slow", 0).ok());
  open.set_value();
  EXPECT_TRUE(slow.get().ok());
  EXPECT_TRUE(manager.Find("slow", 0).ok());
  EXPECT_EQ(gate->policy.load(), SCHED_IDLE);
}

TEST(LowPriorityTest, TheWorkRunsAtIdlePriorityAndTheCallerKeepsItsOwn) {
  int inside = -1;
  EXPECT_TRUE(RunAtIdlePriority(true, [&] { inside = sched_getscheduler(0); }));
  EXPECT_EQ(inside, SCHED_IDLE);
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  EXPECT_FALSE(RunAtIdlePriority(false, [&] { inside = sched_getscheduler(0); }));
  EXPECT_EQ(inside, SCHED_OTHER);
  std::thread::id first, second;
  RunAtIdlePriority(true, [&] { first = std::this_thread::get_id(); });
  RunAtIdlePriority(true, [&] { second = std::this_thread::get_id(); });
  EXPECT_EQ(first, second);  // the caller's worker is kept
  EXPECT_NE(first, std::this_thread::get_id());
}

}  // namespace
}  // namespace inferd
