#include "frontends/http/kserve_json.h"

#include <array>

#include "frontends/http/lifecycle_codec.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/tensor.h"
#include "core/server_info.h"
#include "inferd_version.h"

namespace inferd {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void Str(JsonWriter& w, const std::string& s) {
  w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
}

std::string Done(const rapidjson::StringBuffer& buffer) { return {buffer.GetString(), buffer.GetSize()}; }

template <typename TensorList>
void WriteTensorMetadata(JsonWriter& w, const TensorList& tensors, bool batching) {
  w.StartArray();
  for (const auto& tensor : tensors) {
    w.StartObject();
    w.Key("name");
    Str(w, tensor.name());
    w.Key("datatype");
    w.String(DataTypeName(DataTypeFromConfig(tensor.data_type())).data());
    w.Key("shape");
    w.StartArray();
    if (batching) w.Int64(-1);
    for (int64_t dim : tensor.dims()) w.Int64(dim);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

void WriteDuration(JsonWriter& w, const char* key, const DurationStat& stat) {
  w.Key(key);
  w.StartObject();
  w.Key("count");
  w.Uint64(stat.count.load());
  w.Key("ns");
  w.Uint64(stat.ns.load());
  w.EndObject();
}

}  // namespace

std::string ServerMetadataJson() {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("name");
  w.String(kServerName.data(), static_cast<rapidjson::SizeType>(kServerName.size()));
  w.Key("version");
  w.String(kInferdVersion);
  w.Key("extensions");
  w.StartArray();
  for (std::string_view extension : ServerExtensions()) {
    w.String(extension.data(), static_cast<rapidjson::SizeType>(extension.size()));
  }
  w.EndArray();
  w.EndObject();
  return Done(buffer);
}

std::string ModelMetadataJson(const ModelView& model, const std::vector<int64_t>& versions) {
  const ModelConfig& config = model.config();
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("name");
  Str(w, config.name());
  w.Key("versions");
  w.StartArray();
  for (int64_t version : versions) Str(w, std::to_string(version));
  w.EndArray();
  w.Key("platform");
  Str(w, ReportedPlatform(config));
  w.Key("inputs");
  WriteTensorMetadata(w, config.input(), config.max_batch_size() > 0);
  w.Key("outputs");
  WriteTensorMetadata(w, config.output(), config.max_batch_size() > 0);
  w.EndObject();
  return Done(buffer);
}

namespace {

// inferd's addition to an ensemble's statistics: per step, where its requests' time went, so a
// user sees which stage is the bottleneck.
void WriteEnsembleSteps(JsonWriter& w, const std::vector<EnsembleStepView>& steps) {
  w.Key("ensemble_steps");
  w.StartArray();
  for (size_t i = 0; i < steps.size(); ++i) {
    const EnsembleStepView& step = steps[i];
    w.StartObject();
    w.Key("step");
    w.Uint64(i + 1);
    w.Key("model_name");
    Str(w, step.model_name);
    w.Key("model_version");
    Str(w, step.model_version == 0 ? std::string("-1") : std::to_string(step.model_version));
    w.Key("in_flight");
    w.Int64(step.in_flight);
    w.Key("capacity");
    w.Int64(step.capacity);
    w.Key("success_count");
    w.Uint64(step.success);
    w.Key("fail_count");
    w.Uint64(step.fail);
    w.Key("queue_ns");
    w.Uint64(step.queue_ns);
    w.Key("compute_ns");
    w.Uint64(step.compute_ns);
    w.Key("total_ns");
    w.Uint64(step.total_ns);
    w.EndObject();
  }
  w.EndArray();
}

// inferd's addition to a router's statistics: where its requests went, and how each target fares.
void WriteRouterTargets(JsonWriter& w, const ModelView& model) {
  w.Key("router_rules");
  w.StartArray();
  for (const auto& [rule, matches] : model.RouterRuleMatches()) {
    w.StartObject();
    w.Key("rule");
    Str(w, rule);
    w.Key("matches");
    w.Uint64(matches);
    w.EndObject();
  }
  w.EndArray();
  w.Key("router_targets");
  w.StartArray();
  for (const RouterTargetView& target : model.RouterTargets()) {
    w.StartObject();
    w.Key("target");
    Str(w, target.target);
    w.Key("requests");
    w.Uint64(target.requests);
    w.Key("errors");
    w.Uint64(target.errors);
    w.Key("in_flight");
    w.Int64(target.in_flight);
    w.Key("recent_p99_ms");
    w.Double(target.recent_p99_ms);
    if (!target.channel.empty()) {
      w.Key("predicted_rps");
      w.Double(target.predicted_rps);
      w.Key("channel");
      Str(w, target.channel);
    }
    if (!target.breaker.empty()) {
      w.Key("breaker");
      Str(w, target.breaker);
    }
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

std::string ModelStatsJson(const std::vector<ModelView>& models) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("model_stats");
  w.StartArray();
  for (const auto& model : models) {
    const ModelStats& stats = model.stats();
    w.StartObject();
    w.Key("name");
    Str(w, model.name());
    w.Key("version");
    Str(w, std::to_string(model.version()));
    w.Key("last_inference");
    w.Uint64(stats.last_inference_ms.load());
    w.Key("inference_count");
    w.Uint64(stats.inference_count.load());
    w.Key("execution_count");
    w.Uint64(stats.execution_count.load());
    w.Key("inference_stats");
    w.StartObject();
    WriteDuration(w, "success", stats.success);
    WriteDuration(w, "fail", stats.fail);
    WriteDuration(w, "queue", stats.queue);
    WriteDuration(w, "compute_input", stats.compute_input);
    WriteDuration(w, "compute_infer", stats.compute_infer);
    WriteDuration(w, "compute_output", stats.compute_output);
    WriteDuration(w, "cache_hit", stats.cache_hit);
    WriteDuration(w, "cache_miss", stats.cache_miss);
    w.EndObject();
    if (model.is_ensemble()) WriteEnsembleSteps(w, model.EnsembleSteps());
    if (model.is_router()) WriteRouterTargets(w, model);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return Done(buffer);
}

std::string RepositoryIndexJson(const std::vector<IndexEntry>& entries) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartArray();
  for (const auto& entry : entries) {
    w.StartObject();
    w.Key("name");
    Str(w, entry.name);
    if (entry.version > 0) {
      w.Key("version");
      Str(w, std::to_string(entry.version));
    }
    if (const std::string_view state = ModelStateName(entry.state); !state.empty()) {
      w.Key("state");
      Str(w, std::string(state));
      w.Key("reason");
      Str(w, entry.reason);
    }
    if (entry.state == ModelState::kReady) {  // inferd's additions
      w.Key("load_seconds");
      w.Double(entry.load_seconds);
      w.Key("warmup_seconds");
      w.Double(entry.warmup_seconds);
      w.Key("first_request_seconds");
      w.Double(entry.first_request_seconds);
    }
    w.EndObject();
  }
  w.EndArray();
  return Done(buffer);
}

namespace {

void WriteDriftScore(JsonWriter& w, const DriftScore& score) {
  w.Key("tensor");
  Str(w, score.tensor);
  w.Key("feature");
  Str(w, score.feature);
  w.Key("method");
  Str(w, score.method);
  w.Key("score");
  w.Double(score.score);
  w.Key("threshold");
  w.Double(score.threshold);
}

}  // namespace

std::string DriftJson(const std::string& model, const std::vector<std::pair<int64_t, DriftReport>>& reports) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("model");
  Str(w, model);
  w.Key("versions");
  w.StartArray();
  for (const auto& [version, report] : reports) {
    w.StartObject();
    w.Key("version");
    Str(w, std::to_string(version));
    w.Key("reference");
    w.StartObject();
    w.Key("source");
    w.String(report.reference_from_file ? "files" : "first_requests");
    w.Key("rows");
    w.Uint64(report.reference_rows);
    w.Key("complete");
    w.Bool(report.reference_complete);
    w.EndObject();
    w.Key("window");
    w.Uint64(report.window);
    w.Key("window_rows");
    w.Uint64(report.window_rows);
    w.Key("features");
    w.StartArray();
    for (const DriftScore& score : report.scores) {
      w.StartObject();
      WriteDriftScore(w, score);
      w.Key("alert");
      w.Bool(score.alert);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return Done(buffer);
}

std::string AlertsJson(const std::vector<Alert>& alerts, const std::vector<DriftAlert>& drift) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("alerts");
  w.StartArray();
  for (const Alert& alert : alerts) {
    w.StartObject();
    w.Key("model");
    Str(w, alert.model);
    w.Key("series");
    Str(w, alert.series);
    w.Key("value");
    w.Double(alert.value);
    w.Key("mean");
    w.Double(alert.mean);
    w.Key("stddev");
    w.Double(alert.stddev);
    w.Key("since_unix_ms");
    w.Int64(alert.since_unix_ms);
    w.EndObject();
  }
  w.EndArray();
  w.Key("drift");
  w.StartArray();
  for (const DriftAlert& alert : drift) {
    w.StartObject();
    w.Key("model");
    Str(w, alert.model);
    w.Key("version");
    Str(w, std::to_string(alert.version));
    WriteDriftScore(w, alert.score);
    w.Key("since_unix_ms");
    w.Int64(alert.score.alert_since_unix_ms);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return Done(buffer);
}

std::string ReadyJson(const std::string& name, bool ready, const std::string& reason) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  if (!name.empty()) {
    w.Key("name");
    Str(w, name);
  }
  w.Key("ready");
  w.Bool(ready);
  if (!reason.empty()) {
    w.Key("error");
    Str(w, reason);
  }
  w.EndObject();
  return Done(buffer);
}

namespace {

void WriteWindow(JsonWriter& w, const char* key, const StepWindow& window) {
  w.Key(key);
  w.StartObject();
  w.Key("requests");
  w.Uint64(window.requests);
  w.Key("errors");
  w.Uint64(window.errors);
  w.Key("p99_ms");
  w.Double(window.p99_seconds * 1e3);
  w.EndObject();
}

}  // namespace

std::string TrafficJson(const std::string& model, const ModelTraffic& traffic) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("model");
  Str(w, model);
  w.Key("split");
  w.StartObject();
  for (const auto& [version, weight] : traffic.split) {
    Str(w, std::to_string(version));
    w.Uint(weight);
  }
  w.EndObject();
  w.Key("labels");
  w.StartObject();
  for (const auto& [label, version] : traffic.labels) {
    Str(w, label);
    w.Int64(version);
  }
  w.EndObject();
  w.EndObject();
  return Done(buffer);
}

std::string RolloutJson(const RolloutStatus& status) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("model");
  Str(w, status.model);
  WriteRolloutPlanFields(w, status.plan);  // the baseline and retention are resolved by now
  w.Key("state");
  w.String(RolloutPhaseName(status.phase).data());
  w.Key("step");
  w.Uint64(status.step + 1);
  w.Key("percent");
  w.Uint(status.percent);
  w.Key("in_step_seconds");
  w.Double(static_cast<double>(status.in_step.count()) / 1e3);
  w.Key("reason");
  Str(w, status.reason);
  WriteWindow(w, "observed", status.candidate);
  WriteWindow(w, "baseline_observed", status.baseline);
  if (status.plan.agreement) {
    w.Key("mirrored");
    w.StartObject();
    w.Key("compared");
    w.Uint64(status.mirrored.compared);
    w.Key("agreed");
    w.Uint64(status.mirrored.agreed);
    w.Key("skipped");
    w.Uint64(status.mirrored.skipped);
    w.EndObject();
  }
  w.Key("baseline_retired");
  w.Bool(status.baseline_retired);
  w.Key("retire_in_seconds");
  w.Int64(status.retire_in_seconds);
  w.EndObject();
  return Done(buffer);
}

namespace {

// {"joined": n, "unknown": n, ...} members into an open object.
void WriteFeedbackCounts(JsonWriter& w, const std::array<uint64_t, kFeedbackOutcomes>& counts) {
  for (size_t i = 0; i < kFeedbackOutcomes; ++i) {
    Str(w, std::string(FeedbackOutcomeName(static_cast<FeedbackOutcome>(i))));
    w.Uint64(counts[i]);
  }
}

}  // namespace

std::string FeedbackResultJson(const std::vector<FeedbackItem>& items, const std::vector<FeedbackOutcome>& outcomes) {
  std::array<uint64_t, kFeedbackOutcomes> counts{};
  for (FeedbackOutcome outcome : outcomes) ++counts[static_cast<size_t>(outcome)];
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  WriteFeedbackCounts(w, counts);
  w.Key("results");
  w.StartArray();
  for (size_t i = 0; i < outcomes.size() && i < items.size(); ++i) {
    w.StartObject();
    w.Key("id");
    Str(w, items[i].id);
    w.Key("outcome");
    Str(w, std::string(FeedbackOutcomeName(outcomes[i])));
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return Done(buffer);
}

namespace {

// A ratio, or null while undefined (negative, or a zero denominator).
void Ratio(JsonWriter& w, const char* key, double value) {
  w.Key(key);
  if (value < 0) {
    w.Null();
  } else {
    w.Double(value);
  }
}

void Fraction(JsonWriter& w, const char* key, uint64_t part, uint64_t whole) {
  Ratio(w, key, whole == 0 ? -1.0 : static_cast<double>(part) / static_cast<double>(whole));
}

void WriteQualityReport(JsonWriter& w, int64_t version, const QualityReport& report) {
  const bool regression = report.spec.task == QualitySpec::Task::kRegression;
  w.StartObject();
  w.Key("version");
  Str(w, std::to_string(version));
  w.Key("task");
  w.String(regression ? "regression" : "classification");
  w.Key("output");
  Str(w, report.spec.output);
  w.Key("window");
  w.Uint64(report.spec.window);
  w.Key("predictions_tracked");
  w.Uint64(report.predictions_tracked);
  w.Key("feedback");
  w.StartObject();
  WriteFeedbackCounts(w, report.feedback);
  w.EndObject();
  w.Key("pairs");
  w.Uint64(report.pairs);
  if (regression) {
    Ratio(w, "mean_absolute_error", report.mean_absolute_error);
    w.EndObject();
    return;
  }
  Ratio(w, "accuracy", report.accuracy);
  Ratio(w, "precision", report.precision);
  Ratio(w, "recall", report.recall);
  w.Key("classes");
  w.StartArray();
  for (const ClassQuality& c : report.classes) {
    w.StartObject();
    w.Key("index");
    w.Int64(c.index);
    w.Key("label");
    Str(w, c.label);
    w.Key("true_positives");
    w.Uint64(c.true_positives);
    w.Key("false_positives");
    w.Uint64(c.false_positives);
    w.Key("false_negatives");
    w.Uint64(c.false_negatives);
    Fraction(w, "precision", c.true_positives, c.true_positives + c.false_positives);
    Fraction(w, "recall", c.true_positives, c.true_positives + c.false_negatives);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace

std::string QualityJson(const std::string& model, const std::vector<std::pair<int64_t, QualityReport>>& reports) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("model");
  Str(w, model);
  w.Key("versions");
  w.StartArray();
  for (const auto& [version, report] : reports) WriteQualityReport(w, version, report);
  w.EndArray();
  w.EndObject();
  return Done(buffer);
}

std::string SharedMemoryStatusJson(const std::vector<SharedMemoryRegionStatus>& regions) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartArray();
  for (const SharedMemoryRegionStatus& region : regions) {
    w.StartObject();
    w.Key("name");
    Str(w, region.name);
    w.Key("key");
    Str(w, region.key);
    w.Key("offset");
    w.Uint64(region.offset);
    w.Key("byte_size");
    w.Uint64(region.byte_size);
    w.EndObject();
  }
  w.EndArray();
  return Done(buffer);
}

}  // namespace inferd
