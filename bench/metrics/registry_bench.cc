// The per-request cost of inferd's metrics registry against prometheus-cpp's core registry (Debian
// prometheus-cpp-dev 1.0.1), for the decision issue 18 asks for: each "request" does what
// ModelVersion::OnComplete and OnExecution do on success (inflight +1/-1, a success counter, the
// inferences counter, three duration histograms of 16 buckets, a batch-size histogram of 9), on
// series of one model version held by the caller, from 1 and 8 threads; and one scrape of 600
// series rendered as text. Run: build/bench/metrics_registry_bench (Google Benchmark).
// `metrics_registry_bench --write-text DIR` instead writes both registries' rendering of the same
// observed series to DIR/ours.txt and DIR/prometheus-cpp.txt, for `promtool check metrics`.
#include <benchmark/benchmark.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "metrics/metrics_registry.h"

namespace {

struct OurSeries {
  inferd::MetricsRegistry registry;
  std::shared_ptr<inferd::Counter> success, inferences;
  std::shared_ptr<inferd::Gauge> inflight;
  std::shared_ptr<inferd::Histogram> request, queue, compute, batch;

  OurSeries() {
    using Type = inferd::MetricsRegistry::Type;
    registry.Declare("requests_total", Type::kCounter, "r");
    registry.Declare("inferences_total", Type::kCounter, "i");
    registry.Declare("inflight", Type::kGauge, "f");
    for (const char* name : {"request_seconds", "queue_seconds", "compute_seconds", "batch_size"})
      registry.Declare(name, Type::kHistogram, "h");
    AddModel("m", 1);
  }
  explicit OurSeries(int models) : OurSeries() {
    for (int i = 0; i < models; ++i) AddModel("model" + std::to_string(i), 1);
  }
  void AddModel(const std::string& model, int version) {
    const inferd::MetricLabels labels = inferd::ModelLabels(model, version);
    inferd::MetricLabels outcome = labels;
    outcome.emplace_back("outcome", "success");
    success = registry.AddCounter("requests_total", outcome);
    inferences = registry.AddCounter("inferences_total", labels);
    inflight = registry.AddGauge("inflight", labels);
    request = registry.AddHistogram("request_seconds", labels, inferd::DurationBuckets());
    queue = registry.AddHistogram("queue_seconds", labels, inferd::DurationBuckets());
    compute = registry.AddHistogram("compute_seconds", labels, inferd::DurationBuckets());
    batch = registry.AddHistogram("batch_size", labels, inferd::BatchSizeBuckets());
  }
};

struct TheirSeries {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& requests = prometheus::BuildCounter().Name("requests_total").Help("r").Register(*registry);
  prometheus::Family<prometheus::Counter>& inferences_family = prometheus::BuildCounter().Name("inferences_total").Help("i").Register(*registry);
  prometheus::Family<prometheus::Gauge>& inflight_family = prometheus::BuildGauge().Name("inflight").Help("f").Register(*registry);
  prometheus::Family<prometheus::Histogram>& request_family = prometheus::BuildHistogram().Name("request_seconds").Help("h").Register(*registry);
  prometheus::Family<prometheus::Histogram>& queue_family = prometheus::BuildHistogram().Name("queue_seconds").Help("h").Register(*registry);
  prometheus::Family<prometheus::Histogram>& compute_family = prometheus::BuildHistogram().Name("compute_seconds").Help("h").Register(*registry);
  prometheus::Family<prometheus::Histogram>& batch_family = prometheus::BuildHistogram().Name("batch_size").Help("h").Register(*registry);
  prometheus::Counter *success = nullptr, *inferences = nullptr;
  prometheus::Gauge* inflight = nullptr;
  prometheus::Histogram *request = nullptr, *queue = nullptr, *compute = nullptr, *batch = nullptr;

  TheirSeries() { AddModel("m", 1); }
  explicit TheirSeries(int models) : TheirSeries() {
    for (int i = 0; i < models; ++i) AddModel("model" + std::to_string(i), 1);
  }
  void AddModel(const std::string& model, int version) {
    const prometheus::Labels labels{{"model", model}, {"version", std::to_string(version)}};
    prometheus::Labels outcome = labels;
    outcome["outcome"] = "success";
    const auto durations = inferd::DurationBuckets(), sizes = inferd::BatchSizeBuckets();
    success = &requests.Add(outcome);
    inferences = &inferences_family.Add(labels);
    inflight = &inflight_family.Add(labels);
    request = &request_family.Add(labels, durations);
    queue = &queue_family.Add(labels, durations);
    compute = &compute_family.Add(labels, durations);
    batch = &batch_family.Add(labels, sizes);
  }
};

OurSeries ours;
TheirSeries theirs;

void OursPerRequest(benchmark::State& state) {
  double t = 0.0001;
  for (auto _ : state) {
    ours.inflight->Add(1);
    ours.inflight->Add(-1);
    ours.request->Observe(t * 3);
    ours.success->Increment();
    ours.inferences->Increment(1);
    ours.queue->Observe(t);
    ours.compute->Observe(t * 2);
    ours.batch->Observe(4);
    t = t < 1 ? t * 1.01 : 0.0001;
  }
}

void TheirsPerRequest(benchmark::State& state) {
  double t = 0.0001;
  for (auto _ : state) {
    theirs.inflight->Increment();
    theirs.inflight->Decrement();
    theirs.request->Observe(t * 3);
    theirs.success->Increment();
    theirs.inferences->Increment(1);
    theirs.queue->Observe(t);
    theirs.compute->Observe(t * 2);
    theirs.batch->Observe(4);
    t = t < 1 ? t * 1.01 : 0.0001;
  }
}

// 600 series: 85 model versions of 7 families (histograms render 16-18 lines each).
void OursScrape(benchmark::State& state) {
  static OurSeries many(85);
  size_t bytes = 0;
  for (auto _ : state) bytes = many.registry.RenderText().size();
  state.counters["bytes"] = static_cast<double>(bytes);
}

void TheirsScrape(benchmark::State& state) {
  static TheirSeries many(85);
  size_t bytes = 0;
  prometheus::TextSerializer serializer;
  for (auto _ : state) bytes = serializer.Serialize(many.registry->Collect()).size();
  state.counters["bytes"] = static_cast<double>(bytes);
}

}  // namespace

BENCHMARK(OursPerRequest)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(TheirsPerRequest)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(OursScrape);
BENCHMARK(TheirsScrape);
namespace {

// The same updates on both, rendered by each.
int WriteText(const std::string& dir) {
  OurSeries our_many(3);
  TheirSeries their_many(3);
  for (double t : {0.0001, 0.002, 0.3, 7.0}) {
    our_many.request->Observe(t);
    their_many.request->Observe(t);
    our_many.success->Increment();
    their_many.success->Increment();
    our_many.batch->Observe(4);
    their_many.batch->Observe(4);
  }
  our_many.inflight->Add(2);
  their_many.inflight->Increment(2);
  std::ofstream(dir + "/ours.txt") << our_many.registry.RenderText();
  std::ofstream(dir + "/prometheus-cpp.txt") << prometheus::TextSerializer().Serialize(their_many.registry->Collect());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--write-text") == 0) return WriteText(argv[2]);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
