#include "metrics/metrics_registry.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

TEST(MetricsRegistryTest, RendersPrometheusText) {
  MetricsRegistry registry;
  registry.Declare("x_total", MetricsRegistry::Type::kCounter, "Things.");
  registry.Declare("lat_seconds", MetricsRegistry::Type::kHistogram, "Latency.");
  registry.Declare("depth", MetricsRegistry::Type::kGauge, "Depth.");
  auto counter = registry.AddCounter("x_total", {{"model", "m\"1"}});
  counter->Increment(3);
  auto histogram = registry.AddHistogram("lat_seconds", {{"model", "m"}}, {0.1, 1});
  histogram->Observe(0.05);
  histogram->Observe(0.5);
  histogram->Observe(5);
  registry.AddScrapedValue("depth", {}, [] { return 4.0; });
  std::string text = registry.RenderText();
  EXPECT_NE(text.find("# TYPE x_total counter"), std::string::npos);
  EXPECT_NE(text.find("x_total{model=\"m\\\"1\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{model=\"m\",le=\"0.10000000000000001\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("lat_seconds_bucket{model=\"m\",le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_bucket{model=\"m\",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_count{model=\"m\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("depth 4\n"), std::string::npos);
}

TEST(MetricsRegistryTest, RemoveSeriesBySubsetOfLabels) {
  MetricsRegistry registry;
  registry.Declare("c", MetricsRegistry::Type::kCounter, "C.");
  registry.AddCounter("c", {{"model", "a"}, {"version", "1"}})->Increment();
  registry.AddCounter("c", {{"model", "b"}, {"version", "1"}})->Increment();
  registry.RemoveSeries({{"model", "a"}});
  std::string text = registry.RenderText();
  EXPECT_EQ(text.find("model=\"a\""), std::string::npos);
  EXPECT_NE(text.find("model=\"b\""), std::string::npos);
}

}  // namespace
}  // namespace inferd
