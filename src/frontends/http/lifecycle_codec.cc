#include "frontends/http/lifecycle_codec.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace inferd {
namespace {

Status Invalid(const std::string& message) { return Status::InvalidArgument(message); }

StatusOr<rapidjson::Document> ParseObject(std::string_view body, const char* what) {
  rapidjson::Document doc;
  if (body.empty()) return Invalid(std::string("the ") + what + " body is empty");
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) return Invalid(std::string("the ") + what + " body is not a JSON object");
  return doc;
}

// A positive integer given as a JSON number or a string of digits ("2").
StatusOr<int64_t> PositiveInteger(const rapidjson::Value& value, const std::string& where) {
  if (value.IsInt64() && value.GetInt64() > 0) return value.GetInt64();
  if (value.IsString()) {
    const std::string text = value.GetString();
    if (!text.empty() && text.size() < 19 && text.find_first_not_of("0123456789") == std::string::npos) {
      const int64_t number = std::stoll(text);
      if (number > 0) return number;
    }
  }
  return Invalid(where + " must be a positive integer");
}

StatusOr<int64_t> VersionKey(const rapidjson::Value& key, const std::string& where) {
  return PositiveInteger(key, where + ": key '" + std::string(key.GetString()) + "'");
}

StatusOr<TrafficSplit> ParseSplit(const rapidjson::Value& value) {
  if (!value.IsObject()) return Invalid("'split' must be an object of version -> weight, e.g. {\"1\": 95, \"2\": 5}");
  TrafficSplit split;
  for (const auto& [key, weight] : value.GetObject()) {
    ASSIGN_OR_RETURN(int64_t version, VersionKey(key, "'split'"));
    if (!weight.IsUint() || weight.GetUint() > 1000000) {
      return Invalid("'split': the weight of version " + std::to_string(version) + " must be an integer in [0, 1000000]");
    }
    if (!split.emplace(version, weight.GetUint()).second) {
      return Invalid("'split': version " + std::to_string(version) + " is given twice");
    }
  }
  return split;
}

StatusOr<VersionLabelMap> ParseLabels(const rapidjson::Value& value) {
  if (!value.IsObject()) return Invalid("'labels' must be an object of label -> version, e.g. {\"stable\": 1}");
  VersionLabelMap labels;
  for (const auto& [key, version] : value.GetObject()) {
    const std::string label = key.GetString();
    if (label.empty()) return Invalid("'labels': a label must not be empty");
    ASSIGN_OR_RETURN(labels[label], PositiveInteger(version, "'labels': label '" + label + "'"));
  }
  return labels;
}

StatusOr<double> NonNegativeNumber(const rapidjson::Value& value, const char* key) {
  if (!value.IsNumber() || !std::isfinite(value.GetDouble()) || value.GetDouble() < 0) {
    return Invalid(std::string("'") + key + "' must be a non-negative number");
  }
  return value.GetDouble();
}

StatusOr<uint64_t> Count(const rapidjson::Value& value, const char* key) {
  if (!value.IsUint64()) return Invalid(std::string("'") + key + "' must be a non-negative integer");
  return value.GetUint64();
}

constexpr std::string_view kPlanFields[] = {"version",       "baseline",     "steps",
                                            "dwell_seconds", "max_error_rate", "max_p99_ratio",
                                            "min_requests",  "retention_seconds", "agreement"};

StatusOr<AgreementGuard> ParseAgreement(const rapidjson::Value& value) {
  if (!value.IsObject() || !value.HasMember("min")) {
    return Invalid("'agreement' must be an object with 'min', e.g. {\"min\": 0.95, \"mirror_percent\": 10}");
  }
  AgreementGuard guard;
  for (const auto& [key, field] : value.GetObject()) {
    const std::string name = key.GetString();
    if (name == "min") {
      ASSIGN_OR_RETURN(guard.min_agreement, NonNegativeNumber(field, "agreement.min"));
    } else if (name == "mirror_percent") {
      if (!field.IsUint() || field.GetUint() == 0 || field.GetUint() > 100) {
        return Invalid("'agreement.mirror_percent' must be an integer in [1, 100]");
      }
      guard.mirror_percent = field.GetUint();
    } else if (name == "compare") {
      const std::string_view compare = field.IsString() ? field.GetString() : "";
      if (compare == "close") {
        guard.compare = AgreementGuard::Compare::kClose;
      } else if (compare == "argmax") {
        guard.compare = AgreementGuard::Compare::kArgmax;
      } else {
        return Invalid("'agreement.compare' must be \"close\" or \"argmax\"");
      }
    } else if (name == "tolerance") {
      ASSIGN_OR_RETURN(guard.tolerance, NonNegativeNumber(field, "agreement.tolerance"));
    } else {
      return Invalid("unknown field '" + name + "' in the rollout's 'agreement' (min, mirror_percent, compare, tolerance)");
    }
  }
  return guard;
}

Status ParsePlanField(const std::string& key, const rapidjson::Value& value, RolloutPlan* plan) {
  if (key == "version") {
    ASSIGN_OR_RETURN(plan->version, PositiveInteger(value, "'version'"));
  } else if (key == "baseline") {
    ASSIGN_OR_RETURN(plan->baseline, PositiveInteger(value, "'baseline'"));
  } else if (key == "steps") {
    if (!value.IsArray()) return Invalid("'steps' must be an array of percents, e.g. [5, 20, 100]");
    plan->steps.clear();
    for (const auto& step : value.GetArray()) {
      if (!step.IsUint() || step.GetUint() > 100) return Invalid("'steps' must hold integers in [0, 100]");
      plan->steps.push_back(step.GetUint());
    }
  } else if (key == "dwell_seconds") {
    ASSIGN_OR_RETURN(double seconds, NonNegativeNumber(value, "dwell_seconds"));
    if (seconds > 86400.0 * 365) return Invalid("'dwell_seconds' is above a year");
    plan->dwell = std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
  } else if (key == "max_error_rate") {
    ASSIGN_OR_RETURN(plan->max_error_rate, NonNegativeNumber(value, "max_error_rate"));
  } else if (key == "max_p99_ratio") {
    ASSIGN_OR_RETURN(plan->max_p99_ratio, NonNegativeNumber(value, "max_p99_ratio"));
  } else if (key == "min_requests") {
    ASSIGN_OR_RETURN(plan->min_requests, Count(value, "min_requests"));
  } else if (key == "retention_seconds") {
    ASSIGN_OR_RETURN(uint64_t seconds, Count(value, "retention_seconds"));
    if (seconds > 86400ull * 3650) return Invalid("'retention_seconds' is above ten years");
    plan->retention_seconds = static_cast<int64_t>(seconds);
  } else if (key == "agreement") {
    ASSIGN_OR_RETURN(plan->agreement, ParseAgreement(value));
  } else {
    return Invalid("unknown field '" + key + "' in the rollout plan");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<TrafficChange> ParseTrafficRequest(std::string_view body) {
  ASSIGN_OR_RETURN(rapidjson::Document doc, ParseObject(body, "traffic request"));
  TrafficChange change;
  for (const auto& [key, value] : doc.GetObject()) {
    const std::string name = key.GetString();
    if (name == "split") {
      ASSIGN_OR_RETURN(change.split, ParseSplit(value));
    } else if (name == "labels") {
      ASSIGN_OR_RETURN(change.labels, ParseLabels(value));
    } else {
      return Invalid("unknown field '" + name + "' in the traffic request (expected 'split' or 'labels')");
    }
  }
  if (!change.split && !change.labels) return Invalid("the traffic request needs 'split' or 'labels'");
  return change;
}

StatusOr<RolloutRequest> ParseRolloutRequest(std::string_view body) {
  ASSIGN_OR_RETURN(rapidjson::Document doc, ParseObject(body, "rollout request"));
  RolloutRequest request;
  if (auto action = doc.FindMember("action"); action != doc.MemberEnd()) {
    if (!action->value.IsString() || std::string_view(action->value.GetString()) != "rollback" ||
        doc.MemberCount() != 1) {
      return Invalid("'action' must be \"rollback\", alone; a plan has no 'action'");
    }
    request.rollback = true;
    return request;
  }
  for (const auto& [key, value] : doc.GetObject()) RETURN_IF_ERROR(ParsePlanField(key.GetString(), value, &request.plan));
  if (request.plan.version == 0) return Invalid("the rollout plan needs 'version': the version to roll out");
  return request;
}

StatusOr<RolloutPlan> ReadRolloutPlanFields(const rapidjson::Value& object) {
  if (!object.IsObject()) return Invalid("a rollout is a JSON object");
  RolloutPlan plan;
  for (const auto& [key, value] : object.GetObject()) {
    const std::string name = key.GetString();
    if (std::ranges::find(kPlanFields, name) == std::end(kPlanFields)) continue;
    RETURN_IF_ERROR(ParsePlanField(name, value, &plan));
  }
  return plan;
}

std::string EncodeTrafficRequest(const TrafficChange& change) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  if (change.split) {
    w.Key("split");
    w.StartObject();
    for (const auto& [version, weight] : *change.split) {
      w.Key(std::to_string(version).c_str());
      w.Uint(weight);
    }
    w.EndObject();
  }
  if (change.labels) {
    w.Key("labels");
    w.StartObject();
    for (const auto& [label, version] : *change.labels) {
      w.Key(label.c_str(), static_cast<rapidjson::SizeType>(label.size()));
      w.Int64(version);
    }
    w.EndObject();
  }
  w.EndObject();
  return {buffer.GetString(), buffer.GetSize()};
}

void WriteRolloutPlanFields(rapidjson::Writer<rapidjson::StringBuffer>& w, const RolloutPlan& plan) {
  w.Key("version");
  w.Int64(plan.version);
  if (plan.baseline > 0) {
    w.Key("baseline");
    w.Int64(plan.baseline);
  }
  w.Key("steps");
  w.StartArray();
  for (uint32_t step : plan.steps) w.Uint(step);
  w.EndArray();
  w.Key("dwell_seconds");
  w.Double(static_cast<double>(plan.dwell.count()) / 1e3);
  w.Key("max_error_rate");
  w.Double(plan.max_error_rate);
  w.Key("max_p99_ratio");
  w.Double(plan.max_p99_ratio);
  w.Key("min_requests");
  w.Uint64(plan.min_requests);
  if (plan.retention_seconds) {
    w.Key("retention_seconds");
    w.Int64(*plan.retention_seconds);
  }
  if (const auto& guard = plan.agreement) {
    w.Key("agreement");
    w.StartObject();
    w.Key("min");
    w.Double(guard->min_agreement);
    w.Key("mirror_percent");
    w.Uint(guard->mirror_percent);
    w.Key("compare");
    w.String(guard->compare == AgreementGuard::Compare::kArgmax ? "argmax" : "close");
    w.Key("tolerance");
    w.Double(guard->tolerance);
    w.EndObject();
  }
}

std::string EncodeRolloutPlan(const RolloutPlan& plan) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  WriteRolloutPlanFields(w, plan);
  w.EndObject();
  return {buffer.GetString(), buffer.GetSize()};
}

}  // namespace inferd

namespace inferd {
namespace {

constexpr size_t kMaxFeedbackItems = 10000;

bool ReadLabel(const rapidjson::Value& value, std::vector<FeedbackLabel>* labels) {
  if (value.IsNumber()) {
    labels->emplace_back(value.GetDouble());
  } else if (value.IsString()) {
    labels->emplace_back(std::string(value.GetString(), value.GetStringLength()));
  } else {
    return false;
  }
  return true;
}

FeedbackItem ReadFeedbackItem(const rapidjson::Value& value) {
  FeedbackItem item;
  item.well_formed = false;
  if (!value.IsObject()) return item;
  auto id = value.FindMember("id");
  auto label = value.FindMember("label");
  if (id == value.MemberEnd() || !id->value.IsString() || label == value.MemberEnd()) return item;
  item.id.assign(id->value.GetString(), id->value.GetStringLength());
  if (label->value.IsArray()) {
    if (label->value.Empty()) return item;
    for (const auto& row : label->value.GetArray()) {
      if (!ReadLabel(row, &item.labels)) return item;
    }
  } else if (!ReadLabel(label->value, &item.labels)) {
    return item;
  }
  item.well_formed = !item.id.empty();
  return item;
}

}  // namespace

StatusOr<std::vector<FeedbackItem>> ParseFeedbackRequest(std::string_view body) {
  ASSIGN_OR_RETURN(rapidjson::Document doc, ParseObject(body, "feedback request"));
  auto batch = doc.FindMember("feedback");
  if (batch == doc.MemberEnd()) {
    FeedbackItem item = ReadFeedbackItem(doc);
    if (!item.well_formed) {
      return Invalid("feedback needs a non-empty string 'id' and a 'label': a number, a string, or an array of "
                     "them (one per row), e.g. {\"id\": \"req-1\", \"label\": 3}");
    }
    return std::vector<FeedbackItem>{std::move(item)};
  }
  if (!batch->value.IsArray() || doc.MemberCount() != 1) {
    return Invalid("'feedback' must be an array of {\"id\": ..., \"label\": ...}, alone in the body");
  }
  if (batch->value.Size() > kMaxFeedbackItems) {
    return Invalid("a feedback batch holds at most " + std::to_string(kMaxFeedbackItems) + " items");
  }
  std::vector<FeedbackItem> items;
  items.reserve(batch->value.Size());
  for (const auto& value : batch->value.GetArray()) items.push_back(ReadFeedbackItem(value));
  return items;
}

}  // namespace inferd
