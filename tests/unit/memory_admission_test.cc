// Memory admission: loads within the budget go ahead and hold their reservation until loaded, a
// load past it is refused with the numbers that decided it, and a model's further instances are
// judged by what its first one holds.
#include "lifecycle/memory_admission.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "lifecycle/model_version.h"

namespace inferd {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(MemoryAdmissionTest, WithoutALimitEverythingIsAdmitted) {
  MemoryAdmission admission(0.9, [] { return std::nullopt; });
  EXPECT_TRUE(admission.Admit(int64_t{1} << 50, "model 'huge' version 1", "its files").ok());
}

TEST(MemoryAdmissionTest, RefusesWhatWouldPassTheFractionOfTheLimit) {
  MemoryAdmission admission(0.9, [] { return MemoryReading{1000 * kMiB, 500 * kMiB}; });
  EXPECT_TRUE(admission.Admit(400 * kMiB, "model 'a' version 1", "its files").ok());  // 900 of 900
  auto refused = admission.Admit(401 * kMiB, "model 'b' version 2", "its files' size");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(),
            "model 'b' version 2 needs about 401 MiB (its files' size), but the process uses 500 MiB of its "
            "1000 MiB memory limit, and --memory-limit-fraction 0.9 leaves 400 MiB: load refused, so that the OOM "
            "killer does not end the models already serving");
}

TEST(MemoryAdmissionTest, AReservationCountsUntilItsLoadHasFinished) {
  MemoryAdmission admission(0.5, [] { return MemoryReading{1000 * kMiB, 100 * kMiB}; });
  {
    auto first = admission.Admit(300 * kMiB, "model 'a' version 1", "its files");
    ASSERT_TRUE(first.ok());
    // A second load at the same time is judged with the first one's reservation counted.
    auto second = admission.Admit(200 * kMiB, "model 'b' version 1", "its files");
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.status().message().find("loads in progress have reserved 300 MiB"), std::string::npos)
        << second.status().message();
    MemoryAdmission::Reservation moved = std::move(first).value();  // moving keeps one reservation
    EXPECT_FALSE(admission.Admit(200 * kMiB, "model 'b' version 1", "its files").ok());
  }
  EXPECT_TRUE(admission.Admit(400 * kMiB, "model 'b' version 1", "its files").ok());
}

TEST(MemoryAdmissionTest, ModelFilesBytesSkipsTheBackendsOwnFiles) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "admission_files" / "1";
  std::filesystem::create_directories(dir / "assets");
  std::ofstream(dir / "model.onnx") << std::string(1000, 'x');
  std::ofstream(dir / "assets" / "vocab.txt") << std::string(24, 'y');
  std::ofstream(dir / "model.onnx.tuning") << std::string(5000, 'z');  // written by the ONNX backend
  EXPECT_EQ(ModelFilesBytes(dir), 1024);
  std::filesystem::remove_all(dir.parent_path());
}

// Each instance it loads adds `footprint` to a fake working set, as a real one would.
class HeavyModel final : public Model {
 public:
  explicit HeavyModel(MemoryFootprint footprint) : footprint_(footprint) {}
  Status Execute(const ExecutionBatch&, std::vector<Tensor>*) override { return Status::Ok(); }
  std::optional<MemoryFootprint> Footprint() const override { return footprint_; }

 private:
  MemoryFootprint footprint_;
};

class HeavyBackend final : public Backend {
 public:
  HeavyBackend(MemoryFootprint footprint, std::atomic<int64_t>* working_set)
      : footprint_(footprint), working_set_(working_set) {}
  std::string_view name() const override { return "heavy"; }
  StatusOr<std::unique_ptr<Model>> Load(const ModelConfig&, const LoadOptions&) override {
    ++loads;
    *working_set_ += footprint_.total();
    return std::unique_ptr<Model>(new HeavyModel(footprint_));
  }
  int loads = 0;

 private:
  MemoryFootprint footprint_;
  std::atomic<int64_t>* working_set_;
};

TEST(MemoryAdmissionTest, FurtherInstancesAreJudgedByWhatTheFirstHolds) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "admission_model" / "3";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "weights.bin").close();
  std::filesystem::resize_file(dir / "weights.bin", 50 * kMiB);  // sparse: its size is what counts
  std::atomic<int64_t> working_set{500 * kMiB};
  MemoryAdmission admission(0.9, [&] { return MemoryReading{1000 * kMiB, working_set.load()}; });
  HeavyBackend backend({.weights_bytes = 80 * kMiB, .working_bytes = 20 * kMiB}, &working_set);
  MetricsRegistry metrics;
  RegisterModelMetricFamilies(&metrics);
  RealClock clock;
  auto config_with = [](int count) {
    auto config = ParseModelConfigText("name: \"heavy\" backend: \"heavy\" instance_group [ { count: " +
                                           std::to_string(count) + " } ] input [ { name: \"IN\" data_type: TYPE_FP32 "
                                           "dims: [ 1 ] } ] output [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ 1 ] } ]",
                                       "t");
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    NormalizeModelConfig(&*config, "heavy");
    return *config;
  };
  // 500 + 100 x 4 = 900: four instances fit 0.9 of 1000 MiB.
  auto four = ModelVersion::Prepare(config_with(4), 3, dir, {&backend, &metrics, &clock, 1, &admission});
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  EXPECT_EQ(backend.loads, 4);

  working_set = 500 * kMiB;
  backend.loads = 0;
  auto five = ModelVersion::Prepare(config_with(5), 3, dir, {&backend, &metrics, &clock, 1, &admission});
  ASSERT_FALSE(five.ok());
  EXPECT_EQ(backend.loads, 4);  // the fifth was refused before it loaded
  EXPECT_EQ(five.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(five.status().message().substr(0, 140),
            "model 'heavy' version 3, instance 5 of 5, needs about 100 MiB (weights 80 MiB + working memory 20 MiB, "
            "as instance 1 holds), but the process");

  // The first instance is judged by twice its files' size: 100 MiB with 880 in use would pass 0.9 x 1000.
  working_set = 880 * kMiB;
  backend.loads = 0;
  auto first = ModelVersion::Prepare(config_with(1), 3, dir, {&backend, &metrics, &clock, 1, &admission});
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(backend.loads, 0);
  EXPECT_NE(first.status().message().find("model 'heavy' version 3 needs about 100 MiB (twice its files' size"),
            std::string::npos)
      << first.status().message();
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace inferd
