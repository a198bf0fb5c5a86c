#include "metrics/metrics_registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace inferd {
namespace {

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string RenderLabels(const MetricLabels& labels, const std::string& extra = "") {
  if (labels.empty() && extra.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ",";
    out += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
  }
  if (!extra.empty()) out += (labels.empty() ? "" : ",") + extra;
  return out + "}";
}

std::string FormatNumber(double value) {
  // The exposition format's spellings; printf would write "nan" or "-nan".
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

const char* TypeName(MetricsRegistry::Type type) {
  switch (type) {
    case MetricsRegistry::Type::kCounter:
      return "counter";
    case MetricsRegistry::Type::kGauge:
      return "gauge";
    case MetricsRegistry::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::Observe(double value) {
  size_t index = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[index].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> counts(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    counts[i] = running;
  }
  return counts;
}

std::vector<double> DurationBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> BatchSizeBuckets() { return {1, 2, 4, 8, 16, 32, 64, 128, 256}; }

void MetricsRegistry::Declare(const std::string& name, Type type, const std::string& help) {
  MutexLock lock(&mu_);
  auto& family = families_[name];
  family.type = type;
  family.help = help;
}

MetricsRegistry::Series& MetricsRegistry::AddSeries(const std::string& family, const MetricLabels& labels) {
  auto it = families_.find(family);
  if (it == families_.end()) throw std::logic_error("metric family not declared: " + family);
  Series& series = it->second.series[RenderLabels(labels)];
  series.labels = labels;
  return series;
}

std::shared_ptr<Counter> MetricsRegistry::AddCounter(const std::string& family, const MetricLabels& labels) {
  MutexLock lock(&mu_);
  Series& series = AddSeries(family, labels);
  if (!series.counter) series.counter = std::make_shared<Counter>();
  return series.counter;
}

std::shared_ptr<Gauge> MetricsRegistry::AddGauge(const std::string& family, const MetricLabels& labels) {
  MutexLock lock(&mu_);
  Series& series = AddSeries(family, labels);
  if (!series.gauge) series.gauge = std::make_shared<Gauge>();
  return series.gauge;
}

std::shared_ptr<Histogram> MetricsRegistry::AddHistogram(const std::string& family,
                                                         const MetricLabels& labels,
                                                         std::vector<double> upper_bounds) {
  MutexLock lock(&mu_);
  Series& series = AddSeries(family, labels);
  if (!series.histogram) series.histogram = std::make_shared<Histogram>(std::move(upper_bounds));
  return series.histogram;
}

void MetricsRegistry::AddScrapedValue(const std::string& family, const MetricLabels& labels,
                                       std::function<double()> read) {
  MutexLock lock(&mu_);
  AddSeries(family, labels).read = std::move(read);
}

void MetricsRegistry::RemoveSeries(const MetricLabels& subset) {
  MutexLock lock(&mu_);
  for (auto& [name, family] : families_) {
    std::erase_if(family.series, [&](const auto& entry) {
      const MetricLabels& labels = entry.second.labels;
      return std::all_of(subset.begin(), subset.end(), [&](const auto& wanted) {
        return std::find(labels.begin(), labels.end(), wanted) != labels.end();
      });
    });
  }
}

std::string MetricsRegistry::RenderText() const {
  std::string out;
  out.reserve(16384);
  MutexLock lock(&mu_);
  for (const auto& [name, family] : families_) {
    out += "# HELP " + name + " " + family.help + "\n";
    out += "# TYPE " + name + " " + TypeName(family.type) + "\n";
    for (const auto& [label_text, series] : family.series) {
      if (series.histogram) {
        const auto& bounds = series.histogram->upper_bounds();
        auto counts = series.histogram->CumulativeCounts();
        for (size_t i = 0; i < bounds.size(); ++i) {
          out += name + "_bucket" + RenderLabels(series.labels, "le=\"" + FormatNumber(bounds[i]) + "\"") +
                 " " + std::to_string(counts[i]) + "\n";
        }
        out += name + "_bucket" + RenderLabels(series.labels, "le=\"+Inf\"") + " " +
               std::to_string(counts.back()) + "\n";
        out += name + "_sum" + label_text + " " + FormatNumber(series.histogram->sum()) + "\n";
        out += name + "_count" + label_text + " " + std::to_string(counts.back()) + "\n";
      } else if (series.counter) {
        out += name + label_text + " " + std::to_string(series.counter->value()) + "\n";
      } else if (series.gauge) {
        out += name + label_text + " " + FormatNumber(series.gauge->value()) + "\n";
      } else if (series.read) {
        out += name + label_text + " " + FormatNumber(series.read()) + "\n";
      }
    }
  }
  return out;
}

}  // namespace inferd
