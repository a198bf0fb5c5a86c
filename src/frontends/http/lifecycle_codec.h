// Bodies of inferd's own routes (not in KServe v2): POST /v2/models/M/traffic, /rollout and
// /feedback. Pure functions over bytes, unit tested and fuzzed.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string>
#include <string_view>

#include "common/feedback.h"
#include "common/status.h"
#include "common/traffic_plan.h"

namespace inferd {

// {"split": {"1": 95, "2": 5}, "labels": {"stable": 1, "canary": 2}}: either or both. Weights are
// integers in [0, 1000000]; versions and label targets positive integers (as numbers or strings).
StatusOr<TrafficChange> ParseTrafficRequest(std::string_view body);

// {"version": 2, "baseline": 1, "steps": [5, 20, 100], "dwell_seconds": 30, "max_error_rate": 0.01,
//  "max_p99_ratio": 1.5, "min_requests": 20, "retention_seconds": 86400,
//  "agreement": {"min": 0.95, "mirror_percent": 10, "compare": "close", "tolerance": 1e-4}}: all but
// "version" optional (and in "agreement", all but "min"); or {"action": "rollback"}. Unknown fields are errors. The plan's numbers are checked by
// lifecycle's ValidateRolloutPlan.
StatusOr<RolloutRequest> ParseRolloutRequest(std::string_view body);

// {"id": "req-1", "label": 3} or a batch: {"feedback": [{"id": ..., "label": ...}, ...]}. A label
// is a number (class index or regression value), a string (a class's label), or an array of those,
// one per row of the request's batch. In a batch, an item without a string "id" or a usable
// "label" comes back with well_formed false, so that it is counted without losing the rest; a
// single item like that, a body that is neither form, or a batch of over 10000 items is an error.
StatusOr<std::vector<FeedbackItem>> ParseFeedbackRequest(std::string_view body);

// The client's side: the bodies the two parsers above read.
std::string EncodeTrafficRequest(const TrafficChange& change);
std::string EncodeRolloutPlan(const RolloutPlan& plan);
// The plan's fields into an open JSON object (EncodeRolloutPlan, and the server's rollout state).
void WriteRolloutPlanFields(rapidjson::Writer<rapidjson::StringBuffer>& w, const RolloutPlan& plan);
// ...and read back from an object that holds other fields too (the server's rollout state): the
// plan's fields are parsed as in a request, the others left alone.
StatusOr<RolloutPlan> ReadRolloutPlanFields(const rapidjson::Value& object);

}  // namespace inferd
