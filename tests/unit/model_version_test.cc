#include "lifecycle/model_version.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/request_validation.h"
#include "lifecycle/response_orderer.h"

namespace inferd {
namespace {

TEST(ResponseOrdererTest, DeliversInTicketOrder) {
  ResponseOrderer orderer;
  std::vector<int> delivered;
  uint64_t a = orderer.Admit(), b = orderer.Admit(), c = orderer.Admit(), d = orderer.Admit();
  orderer.Complete(c, [&] { delivered.push_back(2); });
  orderer.Complete(b, [&] { delivered.push_back(1); });
  EXPECT_TRUE(delivered.empty());  // a is still out
  orderer.Withdraw(a);
  EXPECT_EQ(delivered, (std::vector<int>{1, 2}));
  orderer.Complete(d, [&] { delivered.push_back(3); });
  EXPECT_EQ(delivered, (std::vector<int>{1, 2, 3}));
}

// Echoes its input after sleeping as many milliseconds as the input's first value.
class SleepyModel final : public Model {
 public:
  Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) override {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(static_cast<int>(batch.inputs[0].values<float>()[0])));
    Tensor out = batch.inputs[0];
    out.name = "OUT";
    outputs->push_back(out);
    return Status::Ok();
  }
};

class SleepyBackend final : public Backend {
 public:
  std::string_view name() const override { return "sleepy"; }
  StatusOr<std::unique_ptr<Model>> Load(const ModelConfig&, const LoadOptions&) override {
    return std::unique_ptr<Model>(new SleepyModel());
  }
};

// Two instances; the first request takes 200 ms, the second 0 ms. Returns the order of answers.
std::vector<float> AnswerOrder(bool preserve_ordering) {
  auto config = ParseModelConfigText(
      "name: \"sleepy\" backend: \"sleepy\" max_batch_size: 1 instance_group [ { count: 2 } ] "
      "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 1 ] } ] "
      "output [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 1 ] } ] dynamic_batching { preserve_ordering: " +
          std::string(preserve_ordering ? "true" : "false") + " }",
      "t");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  NormalizeModelConfig(&*config, "sleepy");
  SleepyBackend backend;
  MetricsRegistry metrics;
  RegisterModelMetricFamilies(&metrics);
  RealClock clock;
  auto model = ModelVersion::Load(*config, 1, "/nonexistent/1", {&backend, &metrics, &clock, 1});
  EXPECT_TRUE(model.ok()) << model.status().ToString();

  std::mutex mu;
  std::vector<float> order;
  std::atomic<int> answered{0};
  for (float sleep_ms : {200.0f, 0.0f}) {
    auto storage = std::make_shared<float>(sleep_ms);
    auto request = std::make_unique<InferRequest>();
    request->inputs.push_back({"IN", DataType::kFp32, {1, 1}, AliasData(storage, storage.get()), 4});
    auto validated = ValidateRequest(*config, std::move(request));
    EXPECT_TRUE(validated.ok());
    Status status = (*model)->Enqueue(std::move(validated).value(), [&](StatusOr<InferResponse> result) {
      std::lock_guard lock(mu);
      order.push_back(result->outputs[0].values<float>()[0]);
      answered++;
    });
    EXPECT_TRUE(status.ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the first reaches its instance first
  }
  while (answered.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return order;
}

TEST(ModelVersionTest, InstancesMayAnswerOutOfOrder) {
  EXPECT_EQ(AnswerOrder(false), (std::vector<float>{0, 200}));
}

TEST(ModelVersionTest, PreserveOrderingHoldsLaterAnswers) {
  EXPECT_EQ(AnswerOrder(true), (std::vector<float>{200, 0}));
}

}  // namespace
}  // namespace inferd
