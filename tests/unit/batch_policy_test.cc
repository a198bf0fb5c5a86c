#include "scheduler/batch_policy.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace inferd
