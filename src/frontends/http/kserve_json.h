// JSON documents of the KServe v2 REST API other than inference: metadata, stats, index.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/model_view.h"
#include "core/shared_memory.h"
#include "lifecycle/model_state.h"
#include "lifecycle/rollout.h"
#include "lifecycle/traffic.h"
#include "metrics/alert_board.h"
#include "metrics/drift_monitor.h"
#include "metrics/quality_tracker.h"

namespace inferd {

std::string ServerMetadataJson();
std::string ModelMetadataJson(const ModelView& model, const std::vector<int64_t>& versions);
// Triton's shape: {"model_stats": [{name, version, inference_count, execution_count, ...}]}
std::string ModelStatsJson(const std::vector<ModelView>& models);
std::string RepositoryIndexJson(const std::vector<IndexEntry>& entries);
std::string ReadyJson(const std::string& name, bool ready, const std::string& reason);
// GET /v2/alerts: {"alerts": [{model, series, value, mean, stddev, since_unix_ms}],
// "drift": [{model, version, tensor, feature, method, score, threshold, since_unix_ms}]}.
std::string AlertsJson(const std::vector<Alert>& alerts, const std::vector<DriftAlert>& drift);
// GET /v2/models/M/drift: {"model": M, "versions": [{version, reference: {source: "first_requests"|"files",
// rows, complete}, window, window_rows, features: [{tensor, feature, method, score, threshold, alert}]}]}.
std::string DriftJson(const std::string& model, const std::vector<std::pair<int64_t, DriftReport>>& reports);
// POST /v2/models/M/feedback's answer: {"joined": n, "unknown": n, "expired": n, "duplicate": n,
// "invalid": n, "results": [{"id", "outcome"}]} (results in the items' order).
std::string FeedbackResultJson(const std::vector<FeedbackItem>& items, const std::vector<FeedbackOutcome>& outcomes);
// GET /v2/models/M/quality: {"model": M, "versions": [{version, task, output, predictions_tracked,
// feedback: {joined, ...}, pairs, accuracy, precision, recall, classes: [{index, label, true_positives,
// false_positives, false_negatives, precision, recall}]} or, for regression, mean_absolute_error]}.
// Ratios that are undefined yet (no pairs) are null.
std::string QualityJson(const std::string& model, const std::vector<std::pair<int64_t, QualityReport>>& reports);
// {"model": M, "split": {"1": 95, "2": 5}, "labels": {"stable": 1}}
std::string TrafficJson(const std::string& model, const ModelTraffic& traffic);
// A rollout's plan, state and the current step's observations (docs/ARCHITECTURE.md, "Rollouts").
std::string RolloutJson(const RolloutStatus& status);

// Triton's system shared-memory extension: GET /v2/systemsharedmemory[/region/R]/status answers
// [{"name", "key", "offset", "byte_size"}] (the register body is kserve_codec's).
std::string SharedMemoryStatusJson(const std::vector<SharedMemoryRegionStatus>& regions);

}  // namespace inferd
