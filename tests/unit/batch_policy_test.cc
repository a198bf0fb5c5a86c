#include "scheduler/batch_policy.h"

#include <gtest/gtest.h>

#include <cmath>

namespace inferd {
namespace {

const TimePoint kStart = TimePoint(std::chrono::seconds(100));

BatchingRules Rules(int64_t max, std::vector<int64_t> preferred = {}, int64_t delay_us = 0) {
  return {.dynamic = true,
          .max_batch_size = max,
          .preferred_sizes = std::move(preferred),
          .max_queue_delay = Micros(delay_us)};
}

std::vector<PendingView> Pending(std::vector<int64_t> sizes, uint64_t key = 1) {
  std::vector<PendingView> views;
  for (size_t i = 0; i < sizes.size(); ++i) views.push_back({sizes[i], key, kStart + Micros(i)});
  return views;
}

TEST(BatchPolicyTest, EmptyQueueWaits) {
  auto decision = DecideBatch({}, Rules(8), kStart);
  EXPECT_EQ(decision.count, 0u);
  EXPECT_FALSE(decision.wake_at.has_value());
}

TEST(BatchPolicyTest, WithoutDynamicBatchingRunsOneRequest) {
  auto pending = Pending({1, 1, 1});
  BatchingRules rules = Rules(8);
  rules.dynamic = false;
  EXPECT_EQ(DecideBatch(pending, rules, kStart).count, 1u);
  EXPECT_EQ(DecideBatch(pending, Rules(0), kStart).count, 1u);  // max_batch_size 0
}

TEST(BatchPolicyTest, MergesEverythingWhenNoDelay) {
  auto pending = Pending({1, 2, 1});
  EXPECT_EQ(DecideBatch(pending, Rules(8), kStart + Micros(5)).count, 3u);
}

TEST(BatchPolicyTest, StopsAtMaxBatchSize) {
  auto pending = Pending({3, 3, 3});
  EXPECT_EQ(DecideBatch(pending, Rules(8), kStart).count, 2u);  // 6; the third would make 9
  EXPECT_EQ(DecideBatch(Pending({4, 4, 1}), Rules(8), kStart).count, 2u);
}

TEST(BatchPolicyTest, WaitsForDelayThenRuns) {
  auto pending = Pending({1, 1});
  auto early = DecideBatch(pending, Rules(8, {}, 1000), kStart + Micros(10));
  EXPECT_EQ(early.count, 0u);
  ASSERT_TRUE(early.wake_at.has_value());
  EXPECT_EQ(*early.wake_at, kStart + Micros(1000));  // bounded by the oldest request
  EXPECT_EQ(DecideBatch(pending, Rules(8, {}, 1000), kStart + Micros(1000)).count, 2u);
}

TEST(BatchPolicyTest, PreferredSizeRunsWithoutWaiting) {
  auto pending = Pending({1, 1, 1, 1});
  EXPECT_EQ(DecideBatch(pending, Rules(8, {4, 8}, 100000), kStart).count, 4u);
  EXPECT_EQ(DecideBatch(Pending({1, 1, 1}), Rules(8, {4, 8}, 100000), kStart).count, 0u);
}

TEST(BatchPolicyTest, FullBatchIsTrimmedToLargestPreferredPrefix) {
  // 10 requests of 1 with max 8: full at 8, but 8 is not preferred; 6 is.
  auto pending = Pending(std::vector<int64_t>(10, 1));
  EXPECT_EQ(DecideBatch(pending, Rules(8, {2, 6}, 100000), kStart).count, 6u);
  // once the delay has passed, take all that fits
  EXPECT_EQ(DecideBatch(pending, Rules(8, {2, 6}, 100), kStart + Micros(200)).count, 8u);
}

TEST(BatchPolicyTest, NeverMergesDifferentShapes) {
  auto pending = Pending({1, 1});
  pending.push_back({1, /*key=*/2, kStart});
  pending.push_back({1, /*key=*/1, kStart});
  // The third request has another shape: the batch closes before it, without waiting.
  EXPECT_EQ(DecideBatch(pending, Rules(8, {}, 100000), kStart).count, 2u);
}

TEST(BatchPolicyTest, OversizedHeadStillRuns) {
  EXPECT_EQ(DecideBatch(Pending({9}), Rules(8), kStart).count, 1u);
}

// --- latency target (parameters[latency_target_ms]) ---

BatchingRules TargetRules(int64_t max, int64_t target_ms, int instances = 1) {
  BatchingRules rules = Rules(max);
  rules.latency_target = std::chrono::milliseconds(target_ms);
  rules.instances = instances;
  return rules;
}

// Executions of every size from 1 to `max` measured at fixed + per_row * rows, with no spread.
LatencyModel MeasuredModel(int64_t max, Nanos fixed, Nanos per_row) {
  LatencyModel model(max, std::chrono::seconds(1));
  for (int repeat = 0; repeat < 150; ++repeat) {  // until the assumed first spread has decayed
    for (int64_t rows = 1; rows <= max; ++rows) model.RecordExecution(rows, fixed + per_row * rows);
  }
  return model;
}

// Arrivals of one row every `gap` for 10 s (ten rate windows: the faded count is steady), ending
// at `last`. Just after an arrival the rate reads 1/gap + 0.5/window: 0.5 rows/s high.
void Arrivals(LatencyModel* model, Nanos gap, TimePoint last) {
  const int64_t count = std::chrono::seconds(10) / gap;
  for (int64_t i = count - 1; i >= 0; --i) model->RecordArrival(1, last - gap * i);
}

TEST(LatencyModelTest, EstimatesUnseenSizesConservatively) {
  LatencyModel model(16);
  EXPECT_FALSE(model.ExecutionTime(4).has_value());
  for (int i = 0; i < 60; ++i) {
    model.RecordExecution(2, std::chrono::milliseconds(10));
    model.RecordExecution(8, std::chrono::milliseconds(22));
  }
  // The spread decays towards 0 for constant samples: the estimates approach the means.
  auto ms = [&](int64_t rows) { return std::chrono::duration<double, std::milli>(*model.ExecutionTime(rows)).count(); };
  EXPECT_NEAR(ms(2), 10, 0.1);
  EXPECT_NEAR(ms(1), 10, 0.1);   // below the smallest seen: held at its time, never cheaper
  EXPECT_NEAR(ms(5), 16, 0.1);   // interpolated
  EXPECT_NEAR(ms(16), 44, 0.2);  // above the largest seen: in proportion to the rows
  EXPECT_NEAR(ms(99), 44, 0.2);  // clamped to max_batch_size
}

TEST(LatencyModelTest, SpreadRaisesTheEstimate) {
  LatencyModel model(4);
  for (int i = 0; i < 50; ++i) model.RecordExecution(1, std::chrono::milliseconds(i % 2 == 0 ? 8 : 12));
  const double ms = std::chrono::duration<double, std::milli>(*model.ExecutionTime(1)).count();
  EXPECT_GT(ms, 12);  // mean 10 plus two deviations of about 2
  EXPECT_LT(ms, 15);
}

TEST(LatencyModelTest, ArrivalRateFollowsArrivalsAndFallsInSilence) {
  LatencyModel model(8, std::chrono::milliseconds(100));
  EXPECT_EQ(model.ArrivalRate(kStart), 0);
  Arrivals(&model, std::chrono::milliseconds(10), kStart);
  EXPECT_NEAR(model.ArrivalRate(kStart), 105, 1);  // 100/s, plus half a row per window just after one
  EXPECT_NEAR(model.ArrivalRate(kStart + std::chrono::milliseconds(300)), 105 * std::exp(-3.0), 0.1);
  // Eight rows at once every 80 ms is the same 100 rows/s, not an infinite rate.
  LatencyModel bursts(8, std::chrono::milliseconds(100));
  for (int i = 100; i >= 0; --i) {
    for (int row = 0; row < 8; ++row) bursts.RecordArrival(1, kStart - std::chrono::milliseconds(80) * i);
  }
  EXPECT_NEAR(bursts.ArrivalRate(kStart + std::chrono::milliseconds(40)), 100, 5);
}

TEST(LatencyTargetBatchTest, CapKeepsAnExecutionWithinHalfTheBudget) {
  // 10 ms + 5 ms per row; target 120 ms: budget 90, half 45, so 7 rows (45 ms) is the largest.
  LatencyModel model = MeasuredModel(32, std::chrono::milliseconds(10), std::chrono::milliseconds(5));
  EXPECT_EQ(LatencyTargetBatchCap(TargetRules(32, 120), model, kStart), 7u);
  EXPECT_EQ(LatencyTargetBatchCap(TargetRules(4, 120), model, kStart), 4u);     // never above max_batch_size
  EXPECT_EQ(LatencyTargetBatchCap(TargetRules(32, 10), model, kStart), 1u);     // one row always goes
  EXPECT_EQ(LatencyTargetBatchCap(TargetRules(32, 120), LatencyModel(32), kStart), 32u);  // nothing measured yet
}

TEST(LatencyTargetBatchTest, OverloadGrowsTheBatchToTheSmallestThatKeepsUp) {
  // 10 ms + 1 ms per row; target 72 ms: half the budget (54 ms) is 27 ms, so 17 rows (27 ms, 630 rows/s).
  LatencyModel model = MeasuredModel(64, std::chrono::milliseconds(10), std::chrono::milliseconds(1));
  Arrivals(&model, std::chrono::microseconds(1250), kStart);  // 800 rows/s: more than 17 rows clear
  // 40 rows in 50 ms clear 800/s; the rate reads a little above 800 just after an arrival.
  EXPECT_GE(LatencyTargetBatchCap(TargetRules(64, 72), model, kStart), 40u);
  EXPECT_LE(LatencyTargetBatchCap(TargetRules(64, 72), model, kStart), 42u);
  // Beyond what any size clears (1 ms per row is at most 1000 rows/s): the largest.
  LatencyModel flooded = MeasuredModel(64, std::chrono::milliseconds(10), std::chrono::milliseconds(1));
  Arrivals(&flooded, std::chrono::microseconds(500), kStart);
  EXPECT_EQ(LatencyTargetBatchCap(TargetRules(64, 72), flooded, kStart), 64u);
  // When the burst has passed, the silence brings the cap back.
  EXPECT_EQ(LatencyTargetBatchCap(TargetRules(64, 72), flooded, kStart + std::chrono::seconds(5)), 17u);
}

TEST(LatencyTargetBatchTest, BacklogRunsAtTheCapNotAtMaxBatchSize) {
  LatencyModel model = MeasuredModel(32, std::chrono::milliseconds(10), std::chrono::milliseconds(5));
  auto pending = Pending(std::vector<int64_t>(20, 1));
  EXPECT_EQ(DecideBatch(pending, TargetRules(32, 120), kStart, &model).count, 7u);
  EXPECT_EQ(DecideBatch(pending, Rules(32), kStart, &model).count, 20u);  // no target: Triton's rules
}

TEST(LatencyTargetBatchTest, GoesAtOnceWhenTheInstancesKeepUp) {
  LatencyModel model = MeasuredModel(32, std::chrono::milliseconds(10), std::chrono::milliseconds(5));
  // One row every 50 ms; one row takes 15 ms: no reason to wait.
  Arrivals(&model, std::chrono::milliseconds(50), kStart);
  EXPECT_EQ(DecideBatch(Pending({1}), TargetRules(32, 120), kStart + Micros(10), &model).count, 1u);
  // Nothing measured yet: the first batches go as they are, to learn.
  LatencyModel fresh(32);
  Arrivals(&fresh, Micros(100), kStart);
  EXPECT_EQ(DecideBatch(Pending({1, 1}), TargetRules(32, 120), kStart + Micros(10), &fresh).count, 2u);
}

TEST(LatencyTargetBatchTest, WaitsForTheLargestBatchExpectedInTime) {
  LatencyModel model = MeasuredModel(32, std::chrono::milliseconds(10), std::chrono::milliseconds(5));
  // A row every 10 ms (100/s); one instance clears 1 row per 15 ms (67/s) at size 1: wait.
  Arrivals(&model, std::chrono::milliseconds(10), kStart);
  auto pending = Pending({1});
  const auto decision = DecideBatch(pending, TargetRules(32, 120), kStart, &model);
  EXPECT_EQ(decision.count, 0u);
  ASSERT_TRUE(decision.wake_at.has_value());
  // The cap is 7 rows (45 ms), but 6 more rows take 60 ms to come and the oldest would have to go
  // by 90 - 45 = 45 ms. 6 rows (40 ms) come by 50 ms, just when the oldest must go for them.
  EXPECT_EQ(*decision.wake_at, kStart + std::chrono::milliseconds(50));
  // At that time it goes with what it has.
  EXPECT_EQ(DecideBatch(Pending({1, 1, 1}), TargetRules(32, 120), kStart + std::chrono::milliseconds(50), &model).count,
            3u);
  // A full batch goes at once.
  EXPECT_EQ(DecideBatch(Pending(std::vector<int64_t>(7, 1)), TargetRules(32, 120), kStart, &model).count, 7u);
}

TEST(LatencyTargetBatchTest, MoreInstancesWaitLess) {
  LatencyModel model = MeasuredModel(32, std::chrono::milliseconds(10), std::chrono::milliseconds(5));
  Arrivals(&model, std::chrono::milliseconds(10), kStart);  // 100 rows/s
  // One instance clears 67 rows/s at size 1 and waits; two clear 133/s and go.
  EXPECT_EQ(DecideBatch(Pending({1}), TargetRules(32, 120, 1), kStart, &model).count, 0u);
  EXPECT_EQ(DecideBatch(Pending({1}), TargetRules(32, 120, 2), kStart, &model).count, 1u);
}

TEST(LatencyTargetBatchTest, MaxQueueDelayStillBoundsTheWait) {
  LatencyModel model = MeasuredModel(32, std::chrono::milliseconds(10), std::chrono::milliseconds(5));
  Arrivals(&model, std::chrono::milliseconds(10), kStart);
  BatchingRules rules = TargetRules(32, 120);
  rules.max_queue_delay = std::chrono::milliseconds(25);  // the target alone would wait 50 ms
  const auto decision = DecideBatch(Pending({1}), rules, kStart, &model);
  ASSERT_TRUE(decision.wake_at.has_value());
  EXPECT_EQ(*decision.wake_at, kStart + std::chrono::milliseconds(25));
  // A delay too short for the next row to come: no wait at all.
  rules.max_queue_delay = std::chrono::milliseconds(5);
  EXPECT_EQ(DecideBatch(Pending({1}), rules, kStart, &model).count, 1u);
}

TEST(LatencyTargetBatchTest, OtherShapesStillCloseTheBatch) {
  LatencyModel model = MeasuredModel(32, std::chrono::milliseconds(10), std::chrono::milliseconds(5));
  Arrivals(&model, std::chrono::milliseconds(10), kStart);
  auto pending = Pending({1, 1});
  pending.push_back({1, 2, kStart});
  EXPECT_EQ(DecideBatch(pending, TargetRules(32, 120), kStart, &model).count, 2u);
}

}  // namespace
}  // namespace inferd
