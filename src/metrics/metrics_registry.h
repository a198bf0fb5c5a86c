// Counters, gauges and histograms rendered in the Prometheus text format (version 0.0.4).
//
// Why our own and not Debian's prometheus-cpp-dev 1.0.1 core registry (decided in issue 18 on
// bench/metrics/registry_bench.cc, docs/BENCHMARKS.md): a request's updates cost about half of
// prometheus-cpp's (75 against 137 ns on one thread, 78 against 168 with eight), a scrape of 600
// series renders faster (6.8 against 8.8 ms), the output passes `promtool check metrics`
// (tests/e2e/test_metrics.py), and values read at scrape time (AddScrapedValue: queue depth, /proc,
// NVML, StepStats) need no Collectable of our own. Updates are
// lock-free atomics on objects the caller holds; the registry's mutex guards only the structure
// (adding and removing series, rendering), so a scrape never blocks inference.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace inferd {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// The labels of one model version's series: {model, version}. Removing them removes the version's.
inline MetricLabels ModelLabels(const std::string& model, int64_t version) {
  return {{"model", model}, {"version", std::to_string(version)}};
}

class Counter {
 public:
  void Increment(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Cumulative counts per bound, then +Inf; and the sum.
  std::vector<uint64_t> CumulativeCounts() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1 (the +Inf bucket)
  std::atomic<double> sum_{0};
};

// Default buckets for durations in seconds: 100 us .. 10 s.
std::vector<double> DurationBuckets();
// Buckets for batch sizes: 1, 2, 4, ... 256.
std::vector<double> BatchSizeBuckets();

class MetricsRegistry {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // Families must be declared before series are added to them.
  void Declare(const std::string& name, Type type, const std::string& help);

  std::shared_ptr<Counter> AddCounter(const std::string& family, const MetricLabels& labels);
  std::shared_ptr<Gauge> AddGauge(const std::string& family, const MetricLabels& labels);
  std::shared_ptr<Histogram> AddHistogram(const std::string& family, const MetricLabels& labels,
                                          std::vector<double> upper_bounds);
  // A gauge read at scrape time (queue depth, process memory). The function must stay valid until
  // the series is removed.
  void AddScrapedValue(const std::string& family, const MetricLabels& labels, std::function<double()> read);

  // Removes every series whose labels include all of `subset` (e.g. one model version).
  void RemoveSeries(const MetricLabels& subset);

  std::string RenderText() const;

 private:
  struct Series {
    MetricLabels labels;
    std::shared_ptr<Counter> counter;
    std::shared_ptr<Gauge> gauge;
    std::shared_ptr<Histogram> histogram;
    std::function<double()> read;
  };
  struct Family {
    Type type;
    std::string help;
    std::map<std::string, Series> series;  // keyed by rendered labels
  };

  Series& AddSeries(const std::string& family, const MetricLabels& labels) REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<std::string, Family> families_ GUARDED_BY(mu_);
};

}  // namespace inferd
