#include "metrics/drift_monitor.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "common/classification.h"
#include "common/option_list.h"
#include "common/npy.h"

namespace inferd {
namespace {

constexpr size_t kMaxFeatures = 64;
constexpr int64_t kMaxValuesAsFeatures = 16;  // wider rows give one feature: their mean
constexpr size_t kMaxClasses = 1000;
constexpr double kProportionFloor = 1e-4;

std::vector<std::string> SplitNames(std::string_view text) {
  std::vector<std::string> names;
  while (!text.empty()) {
    const size_t bar = text.find('|');
    if (bar != 0) names.emplace_back(text.substr(0, bar));
    text = bar == std::string_view::npos ? std::string_view() : text.substr(bar + 1);
  }
  return names;
}

Status SetOption(std::string_view key, std::string_view value, DriftSpec* spec) {
  auto bad = [&](std::string_view wants) {
    return Status::InvalidArgument("parameter 'drift': " + std::string(key) + "='" + std::string(value) + "' is not " +
                                   std::string(wants));
  };
  auto count = [&](size_t* out, size_t low, size_t high) {
    return ParseWholeNumber(value, out) && *out >= low && *out <= high;
  };
  if (key == "features") {
    spec->features = SplitNames(value);
  } else if (key == "classes") {
    spec->classes = SplitNames(value);
  } else if (key == "continuous") {
    spec->continuous = SplitNames(value);
  } else if (key == "reference_rows") {
    if (!count(&spec->reference_rows, 10, 1'000'000)) return bad("a count from 10 to 1000000");
  } else if (key == "window") {
    if (!count(&spec->window, 10, 1'000'000)) return bad("a count from 10 to 1000000");
  } else if (key == "bins") {
    if (!count(&spec->bins, 2, 100)) return bad("a count from 2 to 100");
  } else if (key == "psi_threshold") {
    if (!ParseWholeNumber(value, &spec->psi_threshold) || !(spec->psi_threshold > 0)) return bad("a positive number");
  } else if (key == "ks_threshold") {
    if (!ParseWholeNumber(value, &spec->ks_threshold) || !(spec->ks_threshold > 0 && spec->ks_threshold < 1))
      return bad("a number between 0 and 1");
  } else if (key == "ks_alpha") {
    if (!ParseWholeNumber(value, &spec->ks_alpha) || !(spec->ks_alpha > 0 && spec->ks_alpha < 1))
      return bad("a number between 0 and 1");
  } else if (key == "reference") {
    if (value.empty() || value.find("..") != std::string_view::npos || value.front() == '/')
      return bad("a folder inside the model folder");
    spec->reference_dir = std::string(value);
  } else {
    return Status::InvalidArgument("parameter 'drift': unknown key '" + std::string(key) +
                                   "' (features, classes, continuous, reference_rows, window, bins, psi_threshold, "
                                   "ks_threshold, ks_alpha, reference)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<DriftSpec> ParseDriftSpec(std::string_view text) {
  auto options = ParseOptionList(std::string(text));
  if (!options.ok()) return Status::InvalidArgument("parameter 'drift': " + options.status().message());
  DriftSpec spec;
  for (const auto& [key, value] : *options) RETURN_IF_ERROR(SetOption(key, value, &spec));
  if (spec.features.empty() && spec.classes.empty() && spec.continuous.empty()) {
    return Status::InvalidArgument("parameter 'drift' names no tensor (features=, classes= or continuous=)");
  }
  return spec;
}

double PopulationStabilityIndex(const std::vector<double>& expected, const std::vector<double>& actual) {
  double expected_total = 0, actual_total = 0;
  for (double c : expected) expected_total += c;
  for (double c : actual) actual_total += c;
  if (expected_total <= 0 || actual_total <= 0 || expected.size() != actual.size()) return 0;
  double psi = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double e = std::max(expected[i] / expected_total, kProportionFloor);
    const double a = std::max(actual[i] / actual_total, kProportionFloor);
    psi += (a - e) * std::log(a / e);
  }
  return psi;
}

double KolmogorovSmirnov(const std::vector<double>& sorted_a, const std::vector<double>& sorted_b) {
  if (sorted_a.empty() || sorted_b.empty()) return 0;
  const double na = static_cast<double>(sorted_a.size()), nb = static_cast<double>(sorted_b.size());
  size_t i = 0, j = 0;
  double largest = 0;
  while (i < sorted_a.size() && j < sorted_b.size()) {
    // Step past every copy of the smaller value on both sides: ties move the two CDFs together.
    const double x = std::min(sorted_a[i], sorted_b[j]);
    while (i < sorted_a.size() && sorted_a[i] <= x) ++i;
    while (j < sorted_b.size() && sorted_b[j] <= x) ++j;
    largest = std::max(largest, std::abs(static_cast<double>(i) / na - static_cast<double>(j) / nb));
  }
  return largest;
}

double KolmogorovSmirnovCritical(size_t n, size_t m, double alpha) {
  if (n == 0 || m == 0) return 1;
  const double nd = static_cast<double>(n), md = static_cast<double>(m);
  return std::sqrt(-std::log(alpha / 2) / 2) * std::sqrt((nd + md) / (nd * md));
}

std::vector<double> QuantileEdges(std::vector<double> sample, size_t bins) {
  std::vector<double> edges;
  if (sample.empty() || bins < 2) return edges;
  std::sort(sample.begin(), sample.end());
  for (size_t k = 1; k < bins; ++k) {
    const double edge = sample[std::min(sample.size() - 1, k * sample.size() / bins)];
    if (edges.empty() || edge > edges.back()) edges.push_back(edge);
  }
  return edges;
}

struct DriftMonitor::Feature {
  enum class Kind { kValue, kMean, kClass };
  std::string tensor, name;
  Kind kind = Kind::kValue;
  size_t tensor_index = 0;  // into DriftMonitor::tensors_
  size_t position = 0;  // kValue: which value of the row
  bool ks = false;
  size_t classes = 0;   // kClass: histogram width

  std::vector<double> reference;  // raw values until the reference is complete; KS keeps them sorted
  std::vector<double> edges;      // PSI over values
  std::vector<double> expected;   // PSI: the reference's counts per bin
  std::vector<double> actual;     // PSI: the window's counts per bin
  DriftScore score;
  bool scored = false;
  std::shared_ptr<Gauge> score_gauge, alert_gauge;

  size_t BinOf(double value) const {
    if (kind == Kind::kClass) return static_cast<size_t>(std::clamp(value, 0.0, static_cast<double>(classes - 1)));
    return static_cast<size_t>(std::lower_bound(edges.begin(), edges.end(), value) - edges.begin());
  }
  size_t Bins() const { return kind == Kind::kClass ? classes : edges.size() + 1; }

  // This feature's value in a row of `tensor` (`first`: the row's `width` values).
  double ValueOf(const Tensor& tensor, const double* first, size_t width) const {
    switch (kind) {
      case Kind::kValue:
        return first[std::min(position, width - 1)];
      case Kind::kMean: {
        double sum = 0;
        for (size_t i = 0; i < width; ++i) sum += first[i];
        return sum / static_cast<double>(width);
      }
      case Kind::kClass:
        if (width > 1) return static_cast<double>(std::max_element(first, first + width) - first);
        if (tensor.dtype == DataType::kFp16 || tensor.dtype == DataType::kFp32 || tensor.dtype == DataType::kFp64) {
          return first[0] >= 0.5 ? 1.0 : 0.0;
        }
        return first[0];
    }
    return 0;
  }
};

DriftMonitor::DriftMonitor(DriftSpec spec) : spec_(std::move(spec)) {}
DriftMonitor::~DriftMonitor() = default;

StatusOr<std::unique_ptr<DriftMonitor>> DriftMonitor::Create(DriftSpec spec,
                                                             const std::vector<std::pair<std::string, int64_t>>& row_sizes,
                                                             const std::filesystem::path& model_dir) {
  std::unique_ptr<DriftMonitor> monitor(new DriftMonitor(std::move(spec)));
  const DriftSpec& s = monitor->spec_;
  auto row_size = [&](const std::string& tensor) -> StatusOr<int64_t> {
    auto it = std::ranges::find_if(row_sizes, [&](const auto& entry) { return entry.first == tensor; });
    if (it == row_sizes.end()) return Status::InvalidArgument("parameter 'drift': the model has no tensor '" + tensor + "'");
    if (it->second <= 0) {
      return Status::InvalidArgument("parameter 'drift': tensor '" + tensor + "' has a variable shape; drift needs fixed dims");
    }
    return it->second;
  };
  std::vector<Feature> features;  // the monitor's, once complete (no other thread sees it before)
  auto per_value = [&](const std::string& tensor, bool ks) -> Status {
    ASSIGN_OR_RETURN(const int64_t size, row_size(tensor));
    if (size > kMaxValuesAsFeatures) {
      features.push_back({.tensor = tensor, .name = "mean", .kind = Feature::Kind::kMean, .ks = ks});
      return Status::Ok();
    }
    for (int64_t i = 0; i < size; ++i) {
      features.push_back({.tensor = tensor, .name = "[" + std::to_string(i) + "]", .kind = Feature::Kind::kValue,
                          .position = static_cast<size_t>(i), .ks = ks});
    }
    return Status::Ok();
  };
  for (const std::string& tensor : s.features) RETURN_IF_ERROR(per_value(tensor, false));
  for (const std::string& tensor : s.continuous) RETURN_IF_ERROR(per_value(tensor, true));
  for (const std::string& tensor : s.classes) {
    ASSIGN_OR_RETURN(const int64_t size, row_size(tensor));
    Feature feature{.tensor = tensor, .name = "class", .kind = Feature::Kind::kClass};
    // One value per row: a class index (its integer) or a binary score; several: the argmax.
    feature.classes = size == 1 ? kMaxClasses : std::min(static_cast<size_t>(size), kMaxClasses);
    features.push_back(std::move(feature));
  }
  for (Feature& feature : features) {
    auto known = std::ranges::find(monitor->tensors_, feature.tensor);
    feature.tensor_index = static_cast<size_t>(known - monitor->tensors_.begin());
    if (known == monitor->tensors_.end()) monitor->tensors_.push_back(feature.tensor);
  }
  if (features.size() > kMaxFeatures) {
    return Status::InvalidArgument("parameter 'drift' makes " + std::to_string(features.size()) + " features; at most " +
                                   std::to_string(kMaxFeatures));
  }
  {
    MutexLock lock(&monitor->mu_);
    monitor->features_ = std::move(features);
    monitor->scratch_.resize(monitor->tensors_.size());
  }
  if (s.reference_dir.empty()) return monitor;

  // The reference from files: each tensor's rows, fed as requests would be.
  std::map<std::string, Tensor> files;
  for (const std::string& name : monitor->tensors_) {
    const std::filesystem::path path = model_dir / s.reference_dir / (name + ".npy");
    auto tensor = ReadNpy(path);
    if (!tensor.ok()) return Status::InvalidArgument("drift reference " + path.string() + ": " + tensor.status().message());
    tensor->name = name;
    files.emplace(name, std::move(tensor).value());
  }
  const int64_t rows = files.begin()->second.shape.empty() ? 1 : files.begin()->second.shape[0];
  for (const auto& [name, tensor] : files) {
    if ((tensor.shape.empty() ? 1 : tensor.shape[0]) != rows) {
      return Status::InvalidArgument("drift reference files hold different numbers of rows (" + name + ")");
    }
  }
  std::vector<Tensor> all;
  for (auto& [name, tensor] : files) all.push_back(tensor);
  monitor->reference_from_file_ = true;
  monitor->Record(all, {}, rows);
  MutexLock lock(&monitor->mu_);
  if (monitor->reference_rows_ == 0) return Status::InvalidArgument("the drift reference files hold no usable rows");
  monitor->FinishReference();
  return monitor;
}

void DriftMonitor::RegisterMetricFamilies(MetricsRegistry* registry) {
  registry->Declare("inferd_drift_score", MetricsRegistry::Type::kGauge,
                    "Drift of a feature's sliding window from its reference (labels tensor, feature, method): "
                    "population stability index (psi) or Kolmogorov-Smirnov D (ks).");
  registry->Declare("inferd_drift_alert", MetricsRegistry::Type::kGauge,
                    "1 while a feature's drift score is above its threshold (psi_threshold, ks_threshold), else 0.");
}

void DriftMonitor::BindMetrics(MetricsRegistry* registry, const MetricLabels& version_labels) {
  MutexLock lock(&mu_);
  for (Feature& feature : features_) {
    MetricLabels labels = version_labels;
    labels.emplace_back("tensor", feature.tensor);
    labels.emplace_back("feature", feature.name);
    labels.emplace_back("method", feature.ks ? "ks" : "psi");
    feature.score_gauge = registry->AddGauge("inferd_drift_score", labels);
    feature.alert_gauge = registry->AddGauge("inferd_drift_alert", labels);
  }
}

void DriftMonitor::Record(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, int64_t rows) {
  if (rows <= 0) return;
  // Each named tensor, found once; a request without one of them is skipped whole, so that every
  // feature sees the same rows.
  std::array<const Tensor*, kMaxFeatures> found{};
  for (size_t t = 0; t < tensors_.size(); ++t) {
    for (const auto* list : {&inputs, &outputs}) {
      auto it = std::ranges::find_if(*list, [&](const Tensor& tensor) { return tensor.name == tensors_[t]; });
      if (it != list->end()) found[t] = &*it;
    }
    if (found[t] == nullptr) return;
  }
  MutexLock lock(&mu_);
  for (size_t t = 0; t < tensors_.size(); ++t) {
    std::vector<double>& values = scratch_[t];
    values.clear();
    if (!ForEachNumber(*found[t], [&](double value) { values.push_back(value); })) return;
    if (values.empty() || values.size() % static_cast<size_t>(rows) != 0) return;
  }
  for (int64_t row = 0; row < rows; ++row) {
    const bool to_reference = !reference_complete_;
    double* window_row = to_reference ? nullptr : &window_[window_next_ * features_.size()];
    for (size_t f = 0; f < features_.size(); ++f) {
      Feature& feature = features_[f];
      const std::vector<double>& all = scratch_[feature.tensor_index];
      const size_t width = all.size() / static_cast<size_t>(rows);
      const double value = feature.ValueOf(*found[feature.tensor_index], all.data() + static_cast<size_t>(row) * width, width);
      if (to_reference) {
        AddReferenceRow(feature, value);
      } else {
        AddWindowValue(feature, value, &window_row[f]);
      }
    }
    if (!to_reference) AdvanceWindow();
    if (to_reference && ++reference_rows_ >= spec_.reference_rows && !reference_from_file_) FinishReference();
  }
}

void DriftMonitor::AddReferenceRow(Feature& feature, double value) { feature.reference.push_back(value); }

void DriftMonitor::FinishReference() {
  reference_complete_ = true;
  for (Feature& feature : features_) {
    if (feature.ks) {
      std::sort(feature.reference.begin(), feature.reference.end());
    } else {
      if (feature.kind != Feature::Kind::kClass) feature.edges = QuantileEdges(feature.reference, spec_.bins);
      feature.expected.assign(feature.Bins(), 0);
      for (double value : feature.reference) ++feature.expected[feature.BinOf(value)];
      feature.reference = {};
      feature.actual.assign(feature.Bins(), 0);
    }
  }
  window_.assign(spec_.window * features_.size(), 0);
}

void DriftMonitor::AddWindowValue(Feature& feature, double value, double* slot) {
  const double kept = feature.ks ? value : static_cast<double>(feature.BinOf(value));
  if (!feature.ks) {
    if (window_filled_ == spec_.window) --feature.actual[static_cast<size_t>(*slot)];
    ++feature.actual[static_cast<size_t>(kept)];
  }
  *slot = kept;
}

void DriftMonitor::AdvanceWindow() {
  if (window_filled_ < spec_.window) ++window_filled_;
  if (++window_next_ == spec_.window) window_next_ = 0;
}

void DriftMonitor::Evaluate(int64_t now_unix_ms) {
  MutexLock lock(&mu_);
  if (!reference_complete_ || window_filled_ < spec_.window) return;
  for (size_t f = 0; f < features_.size(); ++f) {
    Feature& feature = features_[f];
    double score = 0;
    if (feature.ks) {
      std::vector<double> window(spec_.window);
      for (size_t row = 0; row < spec_.window; ++row) window[row] = window_[row * features_.size() + f];
      std::sort(window.begin(), window.end());
      score = KolmogorovSmirnov(feature.reference, window);
    } else {
      score = PopulationStabilityIndex(feature.expected, feature.actual);
    }
    const double threshold =
        feature.ks ? std::max(spec_.ks_threshold,
                              KolmogorovSmirnovCritical(feature.reference.size(), spec_.window, spec_.ks_alpha))
                   : spec_.psi_threshold;
    const bool alert = score > threshold;
    if (alert && !feature.score.alert) feature.score.alert_since_unix_ms = now_unix_ms;
    feature.score = {.tensor = feature.tensor, .feature = feature.name, .method = feature.ks ? "ks" : "psi",
                     .score = score, .threshold = threshold, .alert = alert,
                     .alert_since_unix_ms = alert ? feature.score.alert_since_unix_ms : 0};
    feature.scored = true;
    if (feature.score_gauge) {
      feature.score_gauge->Set(score);
      feature.alert_gauge->Set(alert ? 1 : 0);
    }
  }
}

DriftReport DriftMonitor::Report() const {
  MutexLock lock(&mu_);
  DriftReport report{.reference_from_file = reference_from_file_, .reference_rows = reference_rows_,
                     .reference_complete = reference_complete_, .window_rows = window_filled_,
                     .window = spec_.window};
  for (const Feature& feature : features_) {
    if (feature.scored) report.scores.push_back(feature.score);
  }
  return report;
}

}  // namespace inferd
