// Drift: PSI and KS against hand-computed values; a monitor's reference from the first rows or from
// .npy files; a shifted input raises an alert (PSI and KS), the same distribution does not; the
// class histogram of an output; the parameter is checked.
#include "metrics/drift_monitor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/npy.h"

namespace inferd {
namespace {

template <typename T>
Tensor Make(const std::string& name, DataType type, Shape shape, std::vector<T> values) {
  auto storage = std::make_shared<std::vector<T>>(std::move(values));
  return {name, type, std::move(shape), AliasData(storage, storage->data()), storage->size() * sizeof(T)};
}

TEST(DriftStatisticsTest, PsiAndKsMatchHandComputedValues) {
  // Proportions (0.5, 0.5) against (0.9, 0.1): 0.4 ln(1.8) + (-0.4) ln(0.2).
  EXPECT_NEAR(PopulationStabilityIndex({50, 50}, {90, 10}), 0.4 * std::log(1.8) - 0.4 * std::log(0.2), 1e-12);
  EXPECT_DOUBLE_EQ(PopulationStabilityIndex({10, 20, 30}, {1, 2, 3}), 0.0);
  // An empty bin is floored at 1e-4, not infinite.
  EXPECT_TRUE(std::isfinite(PopulationStabilityIndex({10, 0}, {5, 5})));
  EXPECT_DOUBLE_EQ(KolmogorovSmirnov({1, 2, 3, 4}, {1, 2, 3, 4}), 0.0);
  EXPECT_DOUBLE_EQ(KolmogorovSmirnov({1, 2, 3, 4}, {5, 6, 7, 8}), 1.0);
  EXPECT_DOUBLE_EQ(KolmogorovSmirnov({1, 2, 3, 4}, {3, 4, 5, 6}), 0.5);
  EXPECT_DOUBLE_EQ(KolmogorovSmirnov({1, 1, 1, 2}, {1, 2, 2, 2}), 0.5);  // ties move together
  // c(0.05) = 1.358: the textbook critical value.
  EXPECT_NEAR(KolmogorovSmirnovCritical(100, 100, 0.05), 1.358 * std::sqrt(0.02), 1e-3);
  EXPECT_EQ(QuantileEdges({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 5), (std::vector<double>{3, 5, 7, 9}));
  EXPECT_EQ(QuantileEdges({1, 1, 1, 1, 2}, 4), (std::vector<double>{1}));  // equal edges merged: {1} and {2}
}

class DriftMonitorTest : public ::testing::Test {
 protected:
  std::unique_ptr<DriftMonitor> Make(const std::string& text, std::vector<std::pair<std::string, int64_t>> sizes,
                                     const std::filesystem::path& dir = {}) {
    auto spec = ParseDriftSpec(text);
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    auto monitor = DriftMonitor::Create(*spec, sizes, dir);
    EXPECT_TRUE(monitor.ok()) << monitor.status().message();
    return monitor.ok() ? std::move(monitor).value() : nullptr;
  }
  // `rows` rows of 2 values: feature 0 ~ N(mean, 1), feature 1 ~ N(0, 1).
  void Send(DriftMonitor& monitor, int rows, double mean) {
    std::normal_distribution<float> noise(0, 1);
    for (int i = 0; i < rows; ++i) {
      monitor.Record({inferd::DriftMonitorTest::Input({static_cast<float>(mean) + noise(random_), noise(random_)})}, {}, 1);
    }
  }
  static Tensor Input(std::vector<float> row) {
    const int64_t width = static_cast<int64_t>(row.size());
    return inferd::Make("X", DataType::kFp32, {1, width}, std::move(row));
  }
  static const DriftScore* Score(const DriftReport& report, const std::string& feature, const std::string& method) {
    for (const DriftScore& s : report.scores) {
      if (s.feature == feature && s.method == method) return &s;
    }
    return nullptr;
  }
  std::mt19937 random_{7};
};

TEST_F(DriftMonitorTest, AShiftedFeatureDriftsAndTheOtherDoesNot) {
  auto monitor = Make("features=X,continuous=X,reference_rows=1000,window=500", {{"X", 2}});
  Send(*monitor, 1000, 0);
  EXPECT_TRUE(monitor->Report().reference_complete);
  Send(*monitor, 499, 0);
  monitor->Evaluate(1);
  EXPECT_TRUE(monitor->Report().scores.empty());  // the window is not full yet
  Send(*monitor, 1, 0);
  monitor->Evaluate(2);
  DriftReport same = monitor->Report();
  ASSERT_EQ(same.scores.size(), 4u);  // [0] and [1], psi and ks
  for (const DriftScore& s : same.scores) EXPECT_FALSE(s.alert) << s.feature << " " << s.method << " " << s.score;
  Send(*monitor, 500, 1.0);  // feature [0] moves by one standard deviation
  monitor->Evaluate(3);
  DriftReport shifted = monitor->Report();
  EXPECT_TRUE(Score(shifted, "[0]", "psi")->alert) << Score(shifted, "[0]", "psi")->score;
  EXPECT_GT(Score(shifted, "[0]", "psi")->score, 0.2);
  EXPECT_TRUE(Score(shifted, "[0]", "ks")->alert);
  EXPECT_NEAR(Score(shifted, "[0]", "ks")->score, 0.38, 0.06);  // Phi(0.5) - Phi(-0.5)
  EXPECT_EQ(Score(shifted, "[0]", "psi")->alert_since_unix_ms, 3);
  EXPECT_FALSE(Score(shifted, "[1]", "psi")->alert);
  EXPECT_FALSE(Score(shifted, "[1]", "ks")->alert);
  Send(*monitor, 500, 0);  // back: the shifted rows have left the window
  monitor->Evaluate(4);
  for (const DriftScore& s : monitor->Report().scores) EXPECT_FALSE(s.alert) << s.feature << " " << s.method << " " << s.score;
  EXPECT_EQ(monitor->Report().window_rows, 500u);
}

TEST_F(DriftMonitorTest, TheClassHistogramOfAnOutputDrifts) {
  auto monitor = Make("classes=P,reference_rows=100,window=100", {{"P", 3}});
  auto send = [&](int cls, int rows) {
    for (int i = 0; i < rows; ++i) {
      std::vector<float> scores(3, 0.1f);
      scores[static_cast<size_t>(cls)] = 0.8f;
      monitor->Record({}, {inferd::Make("P", DataType::kFp32, {1, 3}, scores)}, 1);
    }
  };
  for (int i = 0; i < 50; ++i) send(i % 2, 2);  // classes 0 and 1, evenly
  send(0, 50);
  send(1, 50);
  monitor->Evaluate(1);
  EXPECT_FALSE(monitor->Report().scores.at(0).alert);
  send(2, 100);  // now everything is class 2
  monitor->Evaluate(2);
  EXPECT_TRUE(monitor->Report().scores.at(0).alert);
  EXPECT_EQ(monitor->Report().scores.at(0).feature, "class");
  send(0, 50);  // the class-2 rows leave the window, their counts with them
  send(1, 50);
  monitor->Evaluate(3);
  EXPECT_FALSE(monitor->Report().scores.at(0).alert) << monitor->Report().scores.at(0).score;
  EXPECT_NEAR(monitor->Report().scores.at(0).score, 0, 1e-9);
}

TEST_F(DriftMonitorTest, AReferenceFromFilesIsCompleteAtLoad) {
  const auto dir = std::filesystem::temp_directory_path() / ("drift_ref_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "reference");
  std::vector<float> rows;
  std::normal_distribution<float> noise(0, 1);
  for (int i = 0; i < 400; ++i) rows.push_back(noise(random_)), rows.push_back(noise(random_));
  ASSERT_TRUE(WriteNpy(dir / "reference" / "X.npy", inferd::Make("X", DataType::kFp32, {400, 2}, rows)).ok());
  auto monitor = Make("features=X,reference=reference,window=200", {{"X", 2}}, dir);
  ASSERT_NE(monitor, nullptr);
  EXPECT_TRUE(monitor->Report().reference_complete);
  EXPECT_TRUE(monitor->Report().reference_from_file);
  EXPECT_EQ(monitor->Report().reference_rows, 400u);
  Send(*monitor, 200, 3.0);
  monitor->Evaluate(1);
  EXPECT_TRUE(Score(monitor->Report(), "[0]", "psi")->alert);
  auto missing = DriftMonitor::Create(*ParseDriftSpec("features=X,reference=nowhere"), {{"X", 2}}, dir);
  EXPECT_FALSE(missing.ok());
  std::filesystem::remove_all(dir);
}

TEST_F(DriftMonitorTest, WideRowsAreOneFeatureAndBadSpecsAreRefused) {
  auto wide = Make("features=IMG", {{"IMG", 3 * 224 * 224}});
  wide->Record({inferd::Make("IMG", DataType::kFp32, {1, 3 * 224 * 224}, std::vector<float>(3 * 224 * 224, 0.5f))}, {}, 1);
  EXPECT_EQ(wide->Report().reference_rows, 1u);
  for (const char* bad : {"", "window=10", "features=X,bins=1", "features=X,colour=red", "features=X,reference=../up",
                          "features=X,psi_threshold=-1", "features=X,window"}) {
    EXPECT_FALSE(ParseDriftSpec(bad).ok()) << bad;
  }
  EXPECT_FALSE(DriftMonitor::Create(*ParseDriftSpec("features=NOPE"), {{"X", 2}}, {}).ok());
  EXPECT_FALSE(DriftMonitor::Create(*ParseDriftSpec("features=X"), {{"X", -1}}, {}).ok());
  EXPECT_FALSE(DriftMonitor::Create(*ParseDriftSpec("features=A|B|C|D|E"), {{"A", 16}, {"B", 16}, {"C", 16}, {"D", 16}, {"E", 1}}, {}).ok());
}

}  // namespace
}  // namespace inferd
