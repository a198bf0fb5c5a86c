// Model quality from ground truth: a bounded window of recent predictions (request id -> what the
// answer predicted, per batch row), joined with labels clients send later (POST
// /v2/models/M/feedback). From the joined pairs: TP/FP/FN per class, accuracy, macro precision
// and recall for classification outputs; mean absolute error for regression outputs. Exported as
// metrics and as a report (GET /v2/models/M/quality).
//
// Configured per model with the parameter "quality" (config.pbtxt):
//   parameters { key: "quality" value { string_value: "output=PROBS,task=classification" } }
// What a row predicts, by the output's shape per row:
//   - classification, several scores: the index of the highest (argmax);
//   - classification, one value: an integer type is the class index itself; a float type is a
//     binary score, class 1 when >= threshold (default 0.5);
//   - regression: the row's one value.
//
// Cost: per answered request that has an id, one ring entry and one SlotIndex update under this
// version's own mutex, with no allocation once the ring's entries have grown to the ids' and
// batches' sizes; memory at most `window` entries of (id, time, one double per row) and an index
// of 16-byte cells, at most half full.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/feedback.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/tensor.h"
#include "metrics/metrics_registry.h"
#include "metrics/slot_index.h"

namespace inferd {

struct QualitySpec {
  enum class Task { kClassification, kRegression };
  Task task = Task::kClassification;
  std::string output;
  size_t window = 10000;                 // predictions remembered (requests)
  std::chrono::seconds max_age{3600};    // older ones answer feedback with "expired"
  double threshold = 0.5;                // one-score binary classifiers
  size_t max_class_series = 32;          // per-class counters exported for at most this many classes
};

// "output=NAME,task=classification|regression[,window=N][,max_age_s=S][,threshold=T]
// [,max_class_series=N]"; an error names the bad key or value.
StatusOr<QualitySpec> ParseQualitySpec(std::string_view text);

enum class FeedbackOutcome { kJoined, kUnknown, kExpired, kDuplicate, kInvalid };
inline constexpr size_t kFeedbackOutcomes = 5;
// "joined", "unknown" (never seen, or pushed out of the window), "expired" (older than max_age),
// "duplicate" (that id already had its feedback), "invalid" (labels that do not fit the prediction).
std::string_view FeedbackOutcomeName(FeedbackOutcome outcome);

struct ClassQuality {
  int64_t index = 0;
  std::string label;  // from the label file; empty without one
  uint64_t true_positives = 0, false_positives = 0, false_negatives = 0;
};

struct QualityReport {
  QualitySpec spec;
  size_t predictions_tracked = 0;  // in the window now
  std::array<uint64_t, kFeedbackOutcomes> feedback{};  // by FeedbackOutcome
  uint64_t pairs = 0;              // joined rows
  // Classification; negative when undefined (no pairs; a macro average over no class).
  double accuracy = -1, precision = -1, recall = -1;
  double mean_absolute_error = -1;  // regression; negative before the first pair
  std::vector<ClassQuality> classes;  // classes that occurred, by index
};

class QualityTracker {
 public:
  // `labels`: the output's label file, or empty. Registers this version's series under
  // `version_labels` (ModelLabels), which RemoveSeries removes with the version.
  QualityTracker(QualitySpec spec, std::vector<std::string> labels, MetricsRegistry* registry,
                 MetricLabels version_labels, const Clock* clock);

  static void RegisterMetricFamilies(MetricsRegistry* registry);

  const QualitySpec& spec() const { return spec_; }

  // Remembers what the answer to request `id` predicted, from spec().output among `outputs`
  // (`rows`: the batch size; 1 for a model without batching). Nothing when the output is absent
  // (the client asked for others) or `id` is empty; an id seen again replaces the older entry.
  void RecordPrediction(const std::string& id, const std::vector<Tensor>& outputs, int64_t rows);

  // Joins one label per row of the prediction remembered for `id`.
  FeedbackOutcome AddFeedback(const std::string& id, const std::vector<FeedbackLabel>& labels);
  bool Knows(const std::string& id) const;
  // Counts feedback that reached no version's window, or was malformed (see
  // InferenceServer::AddFeedback).
  void Count(FeedbackOutcome outcome);

  QualityReport Report() const;

 private:
  struct Entry {
    std::string id;
    TimePoint at;
    std::vector<double> predicted;  // per row
    bool answered = false;
  };
  // SlotIndex's view of the ids the ring holds.
  struct IdsInRing {
    const std::vector<Entry>* ring;
    std::string_view operator()(uint32_t slot) const { return (*ring)[slot].id; }
  };
  struct ClassCounts {
    uint64_t true_positives = 0, false_positives = 0, false_negatives = 0;
    std::shared_ptr<Counter> tp_series, fp_series, fn_series;  // null beyond max_class_series
  };

  // What each row of `output` predicts, into `predicted` (its capacity reused).
  Status Predictions(const Tensor& output, int64_t rows, std::vector<double>* predicted) const;
  // The class a label names; negative when it names none.
  int64_t ClassOf(const FeedbackLabel& label) const REQUIRES(mu_);
  ClassCounts& Class(int64_t index) REQUIRES(mu_);
  void CountLocked(FeedbackOutcome outcome) REQUIRES(mu_);
  // Joins `labels` with the prediction remembered for `id`, and says how that went.
  FeedbackOutcome Join(const std::string& id, const std::vector<FeedbackLabel>& labels, TimePoint now) REQUIRES(mu_);
  struct MacroRatios {
    double precision = 0, recall = 0;
  };
  MacroRatios Macro() const REQUIRES(mu_);
  // Called after each join: the gauges (pairs_ > 0).
  void PublishRatios() REQUIRES(mu_);

  const QualitySpec spec_;
  const std::vector<std::string> labels_;
  std::unordered_map<std::string, int64_t> label_index_;
  MetricsRegistry* const registry_;
  const MetricLabels version_labels_;
  const Clock* const clock_;
  std::array<std::shared_ptr<Counter>, kFeedbackOutcomes> feedback_series_;
  std::shared_ptr<Gauge> accuracy_, precision_, recall_, mean_absolute_error_;

  mutable Mutex mu_;
  std::vector<Entry> ring_ GUARDED_BY(mu_);
  size_t next_ GUARDED_BY(mu_) = 0;
  SlotIndex by_id_ GUARDED_BY(mu_);
  std::array<uint64_t, kFeedbackOutcomes> feedback_ GUARDED_BY(mu_){};
  uint64_t pairs_ GUARDED_BY(mu_) = 0, correct_ GUARDED_BY(mu_) = 0;
  double absolute_error_sum_ GUARDED_BY(mu_) = 0;
  std::vector<ClassCounts> classes_ GUARDED_BY(mu_);
};

}  // namespace inferd
