// The 3-sigma detector: a spike in a noisy series is flagged and noise is not, nothing before the
// minimum window, a flat series only past min_deviation, the cool-down after an alert clears, and
// the rules it refuses.
#include "metrics/anomaly_detector.h"

#include <gtest/gtest.h>

#include <random>

namespace inferd {
namespace {

AnomalyRule Rule() {
  AnomalyRule rule;
  rule.window = 60;
  rule.min_samples = 20;
  rule.cool_down = 10;
  return rule;
}

TEST(AnomalyDetectorTest, NoiseIsNotFlaggedAndASpikeIs) {
  AnomalyDetector detector(Rule());
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(100, 5);
  int flagged = 0;
  // Gaussian noise breaks 3 sigma about 0.27% of the time: 0 or 1 of these 200.
  for (int t = 0; t < 200; ++t) flagged += detector.Add(noise(rng)).anomalous;
  EXPECT_LE(flagged, 1);
  const AnomalyDetector::Verdict spike = detector.Add(140);  // 8 sigma
  EXPECT_TRUE(spike.anomalous);
  EXPECT_TRUE(spike.raised);
  EXPECT_TRUE(detector.alerting());
  EXPECT_NEAR(spike.mean, 100, 2);
  EXPECT_NEAR(spike.stddev, 5, 1.5);
  // Still anomalous: the alert stays up, raised once.
  const AnomalyDetector::Verdict again = detector.Add(145);
  EXPECT_TRUE(again.alerting);
  EXPECT_FALSE(again.raised);
  // Back to normal: it clears.
  EXPECT_FALSE(detector.Add(101).alerting);
}

TEST(AnomalyDetectorTest, NothingIsFlaggedBeforeTheMinimumWindow) {
  AnomalyDetector detector(Rule());
  for (int t = 0; t < 19; ++t) detector.Add(t % 2 ? 10 : 11);
  EXPECT_FALSE(detector.Add(1000).anomalous);  // 19 samples before it: not judged
  EXPECT_TRUE(detector.Add(1000).anomalous);   // 20 before it
}

TEST(AnomalyDetectorTest, AFlatSeriesNeedsTheMinimumDeviation) {
  AnomalyRule rule = Rule();
  rule.min_deviation = 5;
  AnomalyDetector detector(rule);
  for (int t = 0; t < 30; ++t) detector.Add(0);  // no errors at all: stddev 0
  EXPECT_FALSE(detector.Add(1).anomalous);      // one error is infinitely many sigmas, not 5 errors
  AnomalyDetector fresh(rule);
  for (int t = 0; t < 30; ++t) fresh.Add(0);
  EXPECT_TRUE(fresh.Add(6).anomalous);
}

TEST(AnomalyDetectorTest, AfterAnAlertClearsNoneIsRaisedDuringTheCoolDown) {
  AnomalyRule rule = Rule();
  rule.window = 1000;  // the spikes below barely move the baseline
  AnomalyDetector detector(rule);
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(50, 1);
  for (int t = 0; t < 300; ++t) detector.Add(noise(rng));
  EXPECT_TRUE(detector.Add(80).raised);
  EXPECT_FALSE(detector.Add(50).alerting);  // cleared: the cool-down of 10 samples starts
  for (int t = 0; t < 10; ++t) {
    const AnomalyDetector::Verdict inside = detector.Add(80);
    EXPECT_TRUE(inside.anomalous) << t;
    EXPECT_FALSE(inside.alerting) << t;
  }
  EXPECT_TRUE(detector.Add(80).raised);  // the 11th sample after clearing
}

TEST(AnomalyDetectorTest, TheWindowForgetsOldSamples) {
  AnomalyRule rule = Rule();
  rule.window = 30;
  AnomalyDetector detector(rule);
  for (int t = 0; t < 30; ++t) detector.Add(t % 2 ? 0 : 1000);  // wild
  for (int t = 0; t < 30; ++t) detector.Add(t % 2 ? 10 : 11);   // calm: replaces all of it
  EXPECT_EQ(detector.samples(), 30u);
  EXPECT_TRUE(detector.Add(20).anomalous);  // 19 sigma of the calm half, nothing of the wild one
}

TEST(AnomalyDetectorTest, MalformedRulesAreRefused) {
  AnomalyRule rule;
  EXPECT_TRUE(rule.Validate().ok());
  rule.window = 1;
  EXPECT_FALSE(rule.Validate().ok());
  rule = AnomalyRule();
  rule.min_samples = rule.window + 1;
  EXPECT_FALSE(rule.Validate().ok());
  rule = AnomalyRule();
  rule.sigmas = 0;
  EXPECT_FALSE(rule.Validate().ok());
  rule = AnomalyRule();
  rule.min_deviation = -1;
  EXPECT_FALSE(rule.Validate().ok());
}

}  // namespace
}  // namespace inferd
