// JSON documents of the KServe v2 REST API other than inference: metadata, stats, index.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/model_view.h"
#include "lifecycle/model_state.h"
#include "lifecycle/rollout.h"
#include "lifecycle/traffic.h"
#include "metrics/alert_board.h"

namespace inferd {

std::string ServerMetadataJson();
std::string ModelMetadataJson(const ModelView& model, const std::vector<int64_t>& versions);
// Triton's shape: {"model_stats": [{name, version, inference_count, execution_count, ...}]}
std::string ModelStatsJson(const std::vector<ModelView>& models);
std::string RepositoryIndexJson(const std::vector<IndexEntry>& entries);
std::string ReadyJson(const std::string& name, bool ready, const std::string& reason);
// GET /v2/alerts: {"alerts": [{model, series, value, mean, stddev, since_unix_ms}]}.
std::string AlertsJson(const std::vector<Alert>& alerts);
// {"model": M, "split": {"1": 95, "2": 5}, "labels": {"stable": 1}}
std::string TrafficJson(const std::string& model, const ModelTraffic& traffic);
// A rollout's plan, state and the current step's observations (docs/ARCHITECTURE.md, "Rollouts").
std::string RolloutJson(const RolloutStatus& status);

}  // namespace inferd
