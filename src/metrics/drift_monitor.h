// Data drift: a sliding window of what a model sees (inputs) and says (outputs), compared with a
// reference distribution, scored once a second.
//   - numeric features: the population stability index (PSI) over fixed bins, the reference's
//     deciles (with bins=10), floored at 1e-4 per bin;
//   - an output's class histogram (argmax per row): PSI over its classes;
//   - continuous outputs: the two-sample Kolmogorov–Smirnov statistic D.
// The reference is the first `reference_rows` rows after the load, or .npy files in the model
// folder (reference=DIR: DIR/TENSOR.npy, rows along the first axis). A score above its threshold
// is a drift alert (GET /v2/alerts, inferd_drift_alert): PSI above psi_threshold (0.2); D above
// both ks_threshold (0.1, the smallest shift worth a page) and KS's critical value at ks_alpha
// (0.001) for the two sample sizes, c(a) sqrt((n + m) / nm), so that small windows do not page on
// sampling noise.
//
// Configured per model with the parameter "drift" (config.pbtxt):
//   parameters { key: "drift" value { string_value: "features=INPUT0,classes=PROBS" } }
// A `features` tensor with at most 16 values per row gives one feature per value ("[3]"); a wider
// one gives one feature, the row's mean ("mean"). At most 64 features per model.
//
// Cost: per tracked request, one binary search over the bin edges and one window slot per feature
// (a request's slots side by side), under this version's own mutex; once a second, a sort of each KS window. Memory: at most
// features x (reference_rows + window) doubles.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/tensor.h"
#include "metrics/metrics_registry.h"

namespace inferd {

struct DriftSpec {
  std::vector<std::string> features;    // numeric tensors (inputs or outputs): PSI per feature
  std::vector<std::string> classes;     // outputs of class scores: PSI over the class histogram
  std::vector<std::string> continuous;  // outputs of continuous values: KS
  size_t reference_rows = 1000;
  size_t window = 1000;
  size_t bins = 10;
  double psi_threshold = 0.2;
  double ks_threshold = 0.1;
  double ks_alpha = 0.001;
  std::string reference_dir;  // relative to the model folder; empty: the first rows after load
};

// "features=A|B,classes=C,continuous=D,reference_rows=N,window=N,bins=N,psi_threshold=X,
// ks_threshold=X,ks_alpha=X,reference=DIR": at least one of features/classes/continuous.
StatusOr<DriftSpec> ParseDriftSpec(std::string_view text);

// PSI between two histograms over the same bins (counts; each side normalised to proportions,
// floored at 1e-4 so that an empty bin gives a finite score).
double PopulationStabilityIndex(const std::vector<double>& expected, const std::vector<double>& actual);
// sup |F_a(x) - F_b(x)| of two sorted samples; 0 when either is empty.
double KolmogorovSmirnov(const std::vector<double>& sorted_a, const std::vector<double>& sorted_b);
// The D above which two samples of n and m values differ at significance `alpha` (asymptotic).
double KolmogorovSmirnovCritical(size_t n, size_t m, double alpha);
// The bin edges of `bins` equal-frequency bins of `sample` (equal edges merged): bin i holds
// values in (edges[i-1], edges[i]].
std::vector<double> QuantileEdges(std::vector<double> sample, size_t bins);

struct DriftScore {
  std::string tensor, feature, method;  // method "psi" or "ks"
  double score = 0;
  double threshold = 0;
  bool alert = false;
  int64_t alert_since_unix_ms = 0;
};

// A feature in drift on one model version (GET /v2/alerts).
struct DriftAlert {
  std::string model;
  int64_t version = 0;
  DriftScore score;
};

struct DriftReport {
  bool reference_from_file = false;
  size_t reference_rows = 0;   // rows in the reference so far (the first requests) or from the files
  bool reference_complete = false;
  size_t window_rows = 0;      // rows in the window (scored once it holds `window`)
  size_t window = 0;
  std::vector<DriftScore> scores;  // empty until scored
};

class DriftMonitor {
 public:
  // Checks the spec against the config's tensors (`row_sizes`: values per row of each named tensor,
  // from the config's dims; -1 when variable) and reads the reference files.
  static StatusOr<std::unique_ptr<DriftMonitor>> Create(DriftSpec spec,
                                                        const std::vector<std::pair<std::string, int64_t>>& row_sizes,
                                                        const std::filesystem::path& model_dir);

  static void RegisterMetricFamilies(MetricsRegistry* registry);
  // Registers this version's series (at Start, so a failed load leaves none).
  void BindMetrics(MetricsRegistry* registry, const MetricLabels& version_labels);

  // One answered request: its inputs and outputs, `rows` rows each.
  void Record(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, int64_t rows);
  // Scores every feature whose window is full, updates the gauges (once a second).
  void Evaluate(int64_t now_unix_ms);
  DriftReport Report() const;

  ~DriftMonitor();

 private:
  struct Feature;
  explicit DriftMonitor(DriftSpec spec);
  void AddReferenceRow(Feature& feature, double value) REQUIRES(mu_);
  void FinishReference() REQUIRES(mu_);
  // Puts a row's value of `feature` in its window slot, `slot`, in place of the oldest.
  void AddWindowValue(Feature& feature, double value, double* slot) REQUIRES(mu_);
  // After a row's values: the next slot.
  void AdvanceWindow() REQUIRES(mu_);

  const DriftSpec spec_;
  mutable Mutex mu_;
  std::vector<Feature> features_ GUARDED_BY(mu_);
  std::vector<std::string> tensors_;  // the named tensors, each once; Feature::tensor_index into it
  // One request's values per tensor, reused from request to request (no allocation once grown).
  std::vector<std::vector<double>> scratch_ GUARDED_BY(mu_);
  // The window, one row of features_.size() values after another (a row's values side by side, so
  // that a request touches a few cache lines, not one per feature): values (KS) or bin indices
  // (PSI). A ring: window_next_ is the oldest row once window_filled_ reaches spec_.window.
  std::vector<double> window_ GUARDED_BY(mu_);
  size_t window_next_ GUARDED_BY(mu_) = 0, window_filled_ GUARDED_BY(mu_) = 0;
  size_t reference_rows_ GUARDED_BY(mu_) = 0;
  bool reference_complete_ GUARDED_BY(mu_) = false;
  bool reference_from_file_ = false;
};

}  // namespace inferd
