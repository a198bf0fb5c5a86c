#include "lifecycle/traffic.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "metrics/latency_histogram.h"

namespace inferd {
namespace {

bool AllLoaded(int64_t) { return true; }

TEST(TrafficSplitTest, VersionsOwnConsecutiveRangesInAscendingOrder) {
  const TrafficSplit split{{1, 95}, {2, 5}};
  EXPECT_EQ(PickVersion(split, 0, AllLoaded), 1);
  EXPECT_EQ(PickVersion(split, 94, AllLoaded), 1);
  EXPECT_EQ(PickVersion(split, 95, AllLoaded), 2);
  EXPECT_EQ(PickVersion(split, 99, AllLoaded), 2);
  EXPECT_EQ(PickVersion(split, 100, AllLoaded), 1);  // wraps: ticket % total
}

TEST(TrafficSplitTest, UnloadedAndZeroWeightVersionsTakeNoShare) {
  const TrafficSplit split{{1, 50}, {2, 0}, {3, 50}};
  auto without_3 = [](int64_t v) { return v != 3; };
  for (uint64_t ticket = 0; ticket < 200; ++ticket) {
    EXPECT_NE(PickVersion(split, ticket, AllLoaded), 2);
    EXPECT_EQ(PickVersion(split, ticket, without_3), 1);
  }
  EXPECT_EQ(PickVersion(split, 7, [](int64_t) { return false; }), 0);  // none loaded: the caller's newest
}

TEST(TrafficSplitTest, SharesFollowTheWeights) {
  const TrafficSplit split{{1, 80}, {2, 20}};
  std::map<int64_t, int> counts;
  for (int i = 0; i < 20000; ++i) counts[PickVersion(split, TrafficTicket("request-" + std::to_string(i)), AllLoaded)]++;
  EXPECT_NEAR(counts[2] / 20000.0, 0.20, 0.02);
  std::map<int64_t, int> random;
  for (int i = 0; i < 20000; ++i) random[PickVersion(split, TrafficTicket(""), AllLoaded)]++;
  EXPECT_NEAR(random[2] / 20000.0, 0.20, 0.02);
}

// A request id keeps its version while the split stands, and an id the canary had at 5% stays
// with it at 20%: the canary's range only grows.
TEST(TrafficSplitTest, RequestIdsAreStickyAndStayWithAGrowingCanary) {
  for (int i = 0; i < 2000; ++i) {
    const std::string id = "user-" + std::to_string(i);
    const uint64_t ticket = TrafficTicket(id);
    EXPECT_EQ(ticket, TrafficTicket(id));
    if (PickVersion(TrafficSplit{{1, 95}, {2, 5}}, ticket, AllLoaded) == 2) {
      EXPECT_EQ(PickVersion(TrafficSplit{{1, 80}, {2, 20}}, ticket, AllLoaded), 2) << id;
      EXPECT_EQ(PickVersion(TrafficSplit{{2, 100}}, ticket, AllLoaded), 2) << id;
    }
  }
}

ModelConfig WithParameters(const std::map<std::string, std::string>& parameters) {
  ModelConfig config;
  config.set_name("m");
  for (const auto& [key, value] : parameters) (*config.mutable_parameters())[key].set_string_value(value);
  return config;
}

TEST(TrafficSplitTest, ConfigParameterParsesAndRejectsWhatIsMalformed) {
  auto split = TrafficSplitParameter(WithParameters({{"traffic_split", "1:95,2:5"}}));
  ASSERT_TRUE(split.ok()) << split.status().message();
  EXPECT_EQ(*split, (TrafficSplit{{1, 95}, {2, 5}}));
  EXPECT_TRUE(TrafficSplitParameter(WithParameters({})).value().empty());
  for (const char* bad : {"1:0,2:0", "a:5", "1:-5", "1:5,1:6", "1", "0:100", "1:5x", "1:2000000"}) {
    EXPECT_FALSE(TrafficSplitParameter(WithParameters({{"traffic_split", bad}})).ok()) << bad;
  }
  EXPECT_EQ(FormatTrafficSplit({{1, 95}, {2, 5}}), "1:95,2:5");
}

// A split set at run time survives a reload whose config leaves traffic_split alone; a config
// that changes it wins.
TEST(TrafficTableTest, ConfigAppliesOnlyWhenItsParameterChanges) {
  TrafficTable table;
  EXPECT_EQ(table.Find("m"), nullptr);
  table.ApplyConfig(WithParameters({{"traffic_split", "1:90,2:10"}, {"version_labels", "stable:1"}}));
  EXPECT_EQ(table.Find("m")->split, (TrafficSplit{{1, 90}, {2, 10}}));
  EXPECT_EQ(table.Find("m")->labels.at("stable"), 1);
  table.SetSplit("m", {{1, 50}, {2, 50}});
  table.SetLabels("m", {{"stable", 2}});
  table.ApplyConfig(WithParameters({{"traffic_split", "1:90,2:10"}, {"version_labels", "stable:1"}}));
  EXPECT_EQ(table.Find("m")->split, (TrafficSplit{{1, 50}, {2, 50}}));
  EXPECT_EQ(table.Find("m")->labels.at("stable"), 2);
  table.ApplyConfig(WithParameters({{"traffic_split", "2:100"}, {"version_labels", "stable:1"}}));
  EXPECT_EQ(table.Find("m")->split, (TrafficSplit{{2, 100}}));
  EXPECT_EQ(table.Find("m")->labels.at("stable"), 2);
  table.Remove("m");
  EXPECT_EQ(table.Find("m"), nullptr);
}

TEST(LatencyHistogramTest, QuantilesAreWithinOneBucket) {
  LatencyHistogram histogram;
  const LatencyHistogram::Counts empty = histogram.Snapshot();
  for (int i = 1; i <= 1000; ++i) histogram.Observe(int64_t{i} * 1000);  // 1 us .. 1 ms
  const auto window = LatencyHistogram::Between(empty, histogram.Snapshot());
  EXPECT_EQ(LatencyHistogram::Total(window), 1000u);
  const double p99 = LatencyHistogram::Quantile(window, 0.99);
  EXPECT_GE(p99, 990e-6);
  EXPECT_LE(p99, 990e-6 * 1.13);
  const double p50 = LatencyHistogram::Quantile(window, 0.5);
  EXPECT_GE(p50, 500e-6);
  EXPECT_LE(p50, 500e-6 * 1.13);
  EXPECT_EQ(LatencyHistogram::Quantile(LatencyHistogram::Between(histogram.Snapshot(), histogram.Snapshot()), 0.99), 0);
}

TEST(LatencyHistogramTest, EveryValueIsBelowItsBucketsUpperEdge) {
  for (int64_t ns : std::initializer_list<int64_t>{1, 2, 7, 8, 9, 15, 16, 17, 1000, 123456, 999999999, int64_t{1} << 40}) {
    const int bucket = LatencyHistogram::BucketOf(ns);
    EXPECT_LT(static_cast<uint64_t>(ns), LatencyHistogram::UpperEdge(bucket)) << ns;
    EXPECT_LE(LatencyHistogram::UpperEdge(bucket), static_cast<uint64_t>(ns) * 1.13 + 1) << ns;
    EXPECT_LE(bucket, LatencyHistogram::BucketOf(ns + 1)) << ns;
  }
}

}  // namespace
}  // namespace inferd
