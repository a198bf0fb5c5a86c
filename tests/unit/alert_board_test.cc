// The alert board: a model's error burst raises an error_ratio alert (and nothing else), a latency
// jump a p99 alert, both clear, a model that leaves takes its alerts along, and a total that goes
// back (a version left) is a restart, not a burst.
#include "metrics/alert_board.h"

#include <gtest/gtest.h>

#include <random>

namespace inferd {
namespace {

// Running totals a model accumulates second by second.
class FakeModel {
 public:
  // One second of traffic: `requests` answered, `failures` of them failed, the rest taking
  // about `latency_ms`.
  ModelTotals Second(uint64_t requests, uint64_t failures, double latency_ms) {
    std::normal_distribution<double> jitter(latency_ms, latency_ms * 0.05);
    for (uint64_t i = failures; i < requests; ++i) latency_.Observe(static_cast<int64_t>(jitter(rng_) * 1e6));
    totals_.requests += requests;
    totals_.failures += failures;
    totals_.latency = latency_.Snapshot();
    return totals_;
  }

 private:
  std::mt19937 rng_{9};
  LatencyHistogram latency_;
  ModelTotals totals_;
};

std::vector<std::string> ActiveSeries(const AlertBoard& board, const std::string& model) {
  std::vector<std::string> series;
  for (const Alert& alert : board.Active()) {
    if (alert.model == model) series.push_back(alert.series);
  }
  return series;
}

TEST(AlertBoardTest, BurstsOfErrorsAndLatencyRaiseTheirOwnAlertsAndClear) {
  AlertBoard board(DefaultAlertRules());
  FakeModel model;
  std::mt19937 rng(4);
  std::poisson_distribution<int> arrivals(100);
  int64_t now_ms = 0;
  auto tick = [&](uint64_t requests, uint64_t failures, double latency_ms) {
    board.Tick({{"m", model.Second(requests, failures, latency_ms)}}, now_ms += 1000);
  };
  for (int t = 0; t < 60; ++t) tick(static_cast<uint64_t>(arrivals(rng)), 0, 10);
  EXPECT_TRUE(board.Active().empty());
  tick(100, 40, 10);  // 40% failed
  ASSERT_EQ(ActiveSeries(board, "m"), std::vector<std::string>{"error_ratio"});
  const Alert alert = board.Active()[0];
  EXPECT_NEAR(alert.value, 0.4, 1e-9);
  EXPECT_NEAR(alert.mean, 0, 1e-9);
  EXPECT_EQ(alert.since_unix_ms, now_ms);
  tick(100, 0, 10);
  EXPECT_TRUE(board.Active().empty());
  tick(100, 0, 40);  // p99 4x
  EXPECT_EQ(ActiveSeries(board, "m"), std::vector<std::string>{"p99_seconds"});
  // p99 of N(40 ms, 2 ms) is 44.7 ms; the histogram's bucket edge overstates it by < 12.5%.
  EXPECT_GT(board.Active()[0].value, 0.0446);
  EXPECT_LT(board.Active()[0].value, 0.0503);
  tick(100, 0, 10);
  EXPECT_TRUE(board.Active().empty());
}

TEST(AlertBoardTest, AModelThatLeavesTakesItsAlertsAndARestartIsNoBurst) {
  AlertBoard board(DefaultAlertRules());
  FakeModel model, other;
  int64_t now_ms = 0;
  for (int t = 0; t < 40; ++t) board.Tick({{"m", model.Second(50, 0, 5)}, {"o", other.Second(50, 0, 5)}}, now_ms += 1000);
  board.Tick({{"m", model.Second(500, 0, 5)}, {"o", other.Second(50, 0, 5)}}, now_ms += 1000);
  EXPECT_EQ(ActiveSeries(board, "m"), std::vector<std::string>{"request_rate"});
  board.Tick({{"o", other.Second(50, 0, 5)}}, now_ms += 1000);  // m unloaded
  EXPECT_TRUE(board.Active().empty());
  // o's totals go back (its newest version left, an older one serves): no sample, no alert.
  FakeModel older;
  board.Tick({{"o", older.Second(50, 0, 5)}}, now_ms += 1000);
  board.Tick({{"o", older.Second(50, 0, 5)}}, now_ms += 1000);
  EXPECT_TRUE(board.Active().empty());
}

}  // namespace
}  // namespace inferd
