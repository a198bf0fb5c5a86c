#include "metrics/quality_tracker.h"

#include <algorithm>
#include <cmath>

#include "common/classification.h"  // ForEachNumber
#include "common/option_list.h"

namespace inferd {
namespace {

// A class index beyond every class a model could have: bounds the per-class table when neither a
// label file nor the output's width says how many there are.
constexpr int64_t kMaxClasses = 1 << 16;

bool IsFloat(DataType type) { return type == DataType::kFp16 || type == DataType::kFp32 || type == DataType::kFp64; }

Status SetOption(std::string_view key, std::string_view value, QualitySpec* spec) {
  auto bad = [&](std::string_view wants) {
    return Status::InvalidArgument("parameter 'quality': " + std::string(key) + "='" + std::string(value) +
                                   "' is not " + std::string(wants));
  };
  if (key == "output") {
    if (value.empty()) return bad("an output name");
    spec->output = std::string(value);
  } else if (key == "task") {
    if (value == "classification") spec->task = QualitySpec::Task::kClassification;
    else if (value == "regression") spec->task = QualitySpec::Task::kRegression;
    else return bad("classification or regression");
  } else if (key == "window") {
    if (!ParseWholeNumber(value, &spec->window) || spec->window == 0 || spec->window > 10'000'000)
      return bad("a count from 1 to 10000000");
  } else if (key == "max_age_s") {
    int64_t seconds = 0;
    if (!ParseWholeNumber(value, &seconds) || seconds <= 0) return bad("a positive number of seconds");
    spec->max_age = std::chrono::seconds(seconds);
  } else if (key == "threshold") {
    if (!ParseWholeNumber(value, &spec->threshold) || !std::isfinite(spec->threshold)) return bad("a number");
  } else if (key == "max_class_series") {
    if (!ParseWholeNumber(value, &spec->max_class_series) || spec->max_class_series > 1000) return bad("a count up to 1000");
  } else {
    return Status::InvalidArgument("parameter 'quality': unknown key '" + std::string(key) +
                                   "' (output, task, window, max_age_s, threshold, max_class_series)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<QualitySpec> ParseQualitySpec(std::string_view text) {
  auto options = ParseOptionList(std::string(text));
  if (!options.ok()) return Status::InvalidArgument("parameter 'quality': " + options.status().message());
  QualitySpec spec;
  for (const auto& [key, value] : *options) RETURN_IF_ERROR(SetOption(key, value, &spec));
  if (spec.output.empty()) return Status::InvalidArgument("parameter 'quality' names no output (output=NAME)");
  return spec;
}

std::string_view FeedbackOutcomeName(FeedbackOutcome outcome) {
  switch (outcome) {
    case FeedbackOutcome::kJoined: return "joined";
    case FeedbackOutcome::kUnknown: return "unknown";
    case FeedbackOutcome::kExpired: return "expired";
    case FeedbackOutcome::kDuplicate: return "duplicate";
    case FeedbackOutcome::kInvalid: return "invalid";
  }
  return "invalid";
}

void QualityTracker::RegisterMetricFamilies(MetricsRegistry* registry) {
  using Type = MetricsRegistry::Type;
  registry->Declare("inferd_feedback_total", Type::kCounter,
                    "Ground-truth feedback (POST /v2/models/M/feedback) by outcome: joined, unknown (id never "
                    "seen or pushed out of the window), expired, duplicate, invalid.");
  registry->Declare("inferd_quality_accuracy_ratio", Type::kGauge,
                    "Share of joined rows whose predicted class was the true one, since the load.");
  registry->Declare("inferd_quality_precision_ratio", Type::kGauge,
                    "Macro-averaged precision TP / (TP + FP) over the classes that were predicted, since the load.");
  registry->Declare("inferd_quality_recall_ratio", Type::kGauge,
                    "Macro-averaged recall TP / (TP + FN) over the classes that occurred, since the load.");
  registry->Declare("inferd_quality_true_positives_total", Type::kCounter,
                    "Joined rows predicted as `class` that were `class` (first max_class_series classes).");
  registry->Declare("inferd_quality_false_positives_total", Type::kCounter,
                    "Joined rows predicted as `class` that were another class.");
  registry->Declare("inferd_quality_false_negatives_total", Type::kCounter,
                    "Joined rows of `class` predicted as another class.");
  registry->Declare("inferd_quality_mean_absolute_error", Type::kGauge,
                    "Mean |prediction - label| of a regression output's joined rows, since the load.");
}

QualityTracker::QualityTracker(QualitySpec spec, std::vector<std::string> labels, MetricsRegistry* registry,
                               MetricLabels version_labels, const Clock* clock)
    : spec_(std::move(spec)),
      labels_(std::move(labels)),
      registry_(registry),
      version_labels_(std::move(version_labels)),
      clock_(clock),
      by_id_(spec_.window) {
  for (size_t i = 0; i < labels_.size(); ++i) label_index_.emplace(labels_[i], static_cast<int64_t>(i));
  ring_.resize(spec_.window);
  for (size_t i = 0; i < kFeedbackOutcomes; ++i) {
    MetricLabels l = version_labels_;
    l.emplace_back("outcome", std::string(FeedbackOutcomeName(static_cast<FeedbackOutcome>(i))));
    feedback_series_[i] = registry_->AddCounter("inferd_feedback_total", l);
  }
  if (spec_.task == QualitySpec::Task::kClassification) {
    accuracy_ = registry_->AddGauge("inferd_quality_accuracy_ratio", version_labels_);
    precision_ = registry_->AddGauge("inferd_quality_precision_ratio", version_labels_);
    recall_ = registry_->AddGauge("inferd_quality_recall_ratio", version_labels_);
  } else {
    mean_absolute_error_ = registry_->AddGauge("inferd_quality_mean_absolute_error", version_labels_);
  }
}

Status QualityTracker::Predictions(const Tensor& output, int64_t rows, std::vector<double>* predicted) const {
  const size_t elements = output.byte_size / std::max<size_t>(1, DataTypeSize(output.dtype));
  if (rows <= 0 || elements % static_cast<size_t>(rows) != 0) return Status::InvalidArgument("rows do not split");
  const size_t width = elements / static_cast<size_t>(rows);
  const bool regression = spec_.task == QualitySpec::Task::kRegression;
  if (regression && width != 1) return Status::InvalidArgument("a regression output has one value per row");
  // One pass over the values in place: per row, its one value or its argmax (the first of equal
  // highest scores, as TopClasses ranks them).
  predicted->assign(static_cast<size_t>(rows), 0.0);
  double best = 0;
  size_t at = 0;
  bool in_range = true;
  const bool numeric = ForEachNumber(output, [&](double value) {
    const size_t row = at / width, column = at % width;
    ++at;
    if (width == 1) {
      if (regression) {
        (*predicted)[row] = value;
      } else if (IsFloat(output.dtype)) {
        (*predicted)[row] = value >= spec_.threshold ? 1.0 : 0.0;
      } else {
        in_range = in_range && value >= 0 && value < static_cast<double>(kMaxClasses);
        (*predicted)[row] = value;
      }
    } else if (column == 0 || value > best) {
      best = value;
      (*predicted)[row] = static_cast<double>(column);
    }
  });
  if (!numeric) return Status::InvalidArgument("output '" + output.name + "' is not numeric");
  if (!in_range) return Status::InvalidArgument("a class index out of range");
  return Status::Ok();
}

void QualityTracker::RecordPrediction(const std::string& id, const std::vector<Tensor>& outputs, int64_t rows) {
  if (id.empty()) return;
  auto output = std::ranges::find_if(outputs, [&](const Tensor& t) { return t.name == spec_.output; });
  if (output == outputs.end()) return;
  const TimePoint now = clock_->Now();
  MutexLock lock(&mu_);
  const auto slot_index = static_cast<uint32_t>(next_);
  Entry& slot = ring_[next_];
  // The oldest entry leaves the window, unless a newer request with its id took its place. The
  // entry is then refilled in place, so its id and its rows keep their capacity.
  if (!slot.id.empty()) by_id_.EraseIfAt(slot.id, slot_index, IdsInRing{&ring_});
  slot.answered = false;
  if (!Predictions(*output, rows, &slot.predicted).ok()) {
    slot.id.clear();
    return;
  }
  slot.id.assign(id);
  slot.at = now;
  by_id_.Set(id, slot_index, IdsInRing{&ring_});
  next_ = (next_ + 1) % ring_.size();
}

bool QualityTracker::Knows(const std::string& id) const {
  MutexLock lock(&mu_);
  return by_id_.Find(id, IdsInRing{&ring_}).has_value();
}

int64_t QualityTracker::ClassOf(const FeedbackLabel& label) const {
  const int64_t limit = labels_.empty() ? kMaxClasses : static_cast<int64_t>(labels_.size());
  if (const auto* text = std::get_if<std::string>(&label)) {
    auto it = label_index_.find(*text);
    return it == label_index_.end() ? -1 : it->second;
  }
  const double value = std::get<double>(label);
  if (value != std::floor(value) || value < 0 || value >= static_cast<double>(limit)) return -1;
  return static_cast<int64_t>(value);
}

QualityTracker::ClassCounts& QualityTracker::Class(int64_t index) {
  const size_t at = static_cast<size_t>(index);
  if (classes_.size() <= at) classes_.resize(at + 1);
  ClassCounts& counts = classes_[at];
  if (!counts.tp_series && at < spec_.max_class_series) {
    MetricLabels l = version_labels_;
    l.emplace_back("class", at < labels_.size() ? labels_[at] : std::to_string(index));
    counts.tp_series = registry_->AddCounter("inferd_quality_true_positives_total", l);
    counts.fp_series = registry_->AddCounter("inferd_quality_false_positives_total", l);
    counts.fn_series = registry_->AddCounter("inferd_quality_false_negatives_total", l);
  }
  return counts;
}

void QualityTracker::CountLocked(FeedbackOutcome outcome) {
  const size_t at = static_cast<size_t>(outcome);
  ++feedback_[at];
  feedback_series_[at]->Increment();
}

void QualityTracker::Count(FeedbackOutcome outcome) {
  MutexLock lock(&mu_);
  CountLocked(outcome);
}

FeedbackOutcome QualityTracker::AddFeedback(const std::string& id, const std::vector<FeedbackLabel>& labels) {
  const TimePoint now = clock_->Now();
  MutexLock lock(&mu_);
  const FeedbackOutcome outcome = Join(id, labels, now);
  CountLocked(outcome);
  if (outcome == FeedbackOutcome::kJoined) PublishRatios();
  return outcome;
}

FeedbackOutcome QualityTracker::Join(const std::string& id, const std::vector<FeedbackLabel>& labels, TimePoint now) {
  const std::optional<uint32_t> found = by_id_.Find(id, IdsInRing{&ring_});
  if (!found) return FeedbackOutcome::kUnknown;
  Entry& entry = ring_[*found];
  if (now - entry.at > spec_.max_age) return FeedbackOutcome::kExpired;
  if (entry.answered) return FeedbackOutcome::kDuplicate;
  if (labels.size() != entry.predicted.size()) return FeedbackOutcome::kInvalid;
  const bool regression = spec_.task == QualitySpec::Task::kRegression;
  std::vector<int64_t> truths;
  for (const FeedbackLabel& label : labels) {
    if (regression && !std::holds_alternative<double>(label)) return FeedbackOutcome::kInvalid;
    if (!regression && ClassOf(label) < 0) return FeedbackOutcome::kInvalid;
    if (!regression) truths.push_back(ClassOf(label));
  }
  entry.answered = true;
  for (size_t row = 0; row < labels.size(); ++row) {
    ++pairs_;
    if (regression) {
      absolute_error_sum_ += std::abs(entry.predicted[row] - std::get<double>(labels[row]));
      continue;
    }
    const int64_t predicted = static_cast<int64_t>(entry.predicted[row]), truth = truths[row];
    if (predicted == truth) {
      ++correct_;
      ClassCounts& c = Class(truth);
      ++c.true_positives;
      if (c.tp_series) c.tp_series->Increment();
      continue;
    }
    ClassCounts& predicted_class = Class(predicted);
    ++predicted_class.false_positives;
    if (predicted_class.fp_series) predicted_class.fp_series->Increment();
    ClassCounts& true_class = Class(truth);
    ++true_class.false_negatives;
    if (true_class.fn_series) true_class.fn_series->Increment();
  }
  return FeedbackOutcome::kJoined;
}

QualityTracker::MacroRatios QualityTracker::Macro() const {
  double precision_sum = 0, recall_sum = 0;
  size_t predicted_classes = 0, true_classes = 0;
  for (const ClassCounts& c : classes_) {
    if (c.true_positives + c.false_positives > 0) {
      precision_sum += static_cast<double>(c.true_positives) / static_cast<double>(c.true_positives + c.false_positives);
      ++predicted_classes;
    }
    if (c.true_positives + c.false_negatives > 0) {
      recall_sum += static_cast<double>(c.true_positives) / static_cast<double>(c.true_positives + c.false_negatives);
      ++true_classes;
    }
  }
  return {.precision = predicted_classes ? precision_sum / static_cast<double>(predicted_classes) : 0,
          .recall = true_classes ? recall_sum / static_cast<double>(true_classes) : 0};
}

void QualityTracker::PublishRatios() {
  if (mean_absolute_error_) {
    mean_absolute_error_->Set(absolute_error_sum_ / static_cast<double>(pairs_));
    return;
  }
  const MacroRatios macro = Macro();
  accuracy_->Set(static_cast<double>(correct_) / static_cast<double>(pairs_));
  precision_->Set(macro.precision);
  recall_->Set(macro.recall);
}

QualityReport QualityTracker::Report() const {
  MutexLock lock(&mu_);
  QualityReport report{.spec = spec_, .predictions_tracked = by_id_.size(), .feedback = feedback_, .pairs = pairs_};
  if (pairs_ == 0) return report;
  if (spec_.task == QualitySpec::Task::kRegression) {
    report.mean_absolute_error = absolute_error_sum_ / static_cast<double>(pairs_);
    return report;
  }
  report.accuracy = static_cast<double>(correct_) / static_cast<double>(pairs_);
  const MacroRatios macro = Macro();
  report.precision = macro.precision;
  report.recall = macro.recall;
  for (size_t i = 0; i < classes_.size(); ++i) {
    const ClassCounts& c = classes_[i];
    if (c.true_positives + c.false_positives + c.false_negatives == 0) continue;
    report.classes.push_back({.index = static_cast<int64_t>(i),
                              .label = i < labels_.size() ? labels_[i] : "",
                              .true_positives = c.true_positives,
                              .false_positives = c.false_positives,
                              .false_negatives = c.false_negatives});
  }
  return report;
}

}  // namespace inferd
