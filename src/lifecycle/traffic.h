// Which version serves a request that names none: each model's traffic split and version labels,
// read by every inference through one atomic load and changed without waiting for a load (a
// rollback must not queue behind a slow model load).
//
// A split gives each version a weight. A request with an id is placed by a hash of the id, so the
// same id keeps its version while the split stands; the versions own consecutive ranges of the
// hash space in ascending order, so when a newer version's share grows (5% -> 20%) the ids it had
// stay with it. A request without an id is placed at random. Versions in the split that are not
// loaded take no share; with no split (or none of its versions loaded) the newest version serves.
//
// The split and labels in force are the last set: by the traffic API, by a rollout, or by a load
// whose config's traffic_split / version_labels differ from the ones it last applied (so a reload
// that leaves them alone keeps a split set at run time).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/status.h"
#include "common/traffic_plan.h"
#include "config/model_config.h"

namespace inferd {

class TrafficMirror;

struct ModelTraffic {
  TrafficSplit split;  // empty: the newest version takes every request
  VersionLabelMap labels;
  // A rollout's agreement guard (lifecycle/mirror.h): requests its pair's versions serve through
  // the split may be mirrored to the other one. Null when none.
  std::shared_ptr<TrafficMirror> mirror;
  // The config parameters last applied, to tell a config change from a reload.
  std::string config_split, config_labels;
};

// "1:95,2:5"
std::string FormatTrafficSplit(const TrafficSplit& split);

// The version `ticket` lands on: the weights of the versions `is_loaded` accepts, laid out in
// ascending version order over [0, total). 0 when no version in the split is loaded.
template <typename IsLoaded>
int64_t PickVersion(const TrafficSplit& split, uint64_t ticket, IsLoaded is_loaded) {
  uint64_t total = 0;
  for (const auto& [version, weight] : split) {
    if (weight > 0 && is_loaded(version)) total += weight;
  }
  if (total == 0) return 0;
  uint64_t point = ticket % total;
  for (const auto& [version, weight] : split) {
    if (weight == 0 || !is_loaded(version)) continue;
    if (point < weight) return version;
    point -= weight;
  }
  return 0;  // unreachable: point < total
}

// The ticket of a request: a hash of its id (sticky), or a random number when it has none.
uint64_t TrafficTicket(std::string_view request_id);

class TrafficTable {
 public:
  TrafficTable();

  // One model's traffic, or null when it has none set. Lock-free for readers.
  std::shared_ptr<const ModelTraffic> Find(std::string_view model) const;

  // Applies the config's traffic_split and version_labels where they differ from what this
  // model's config last set (the config was validated, so they parse).
  void ApplyConfig(const ModelConfig& config);
  void SetSplit(const std::string& model, TrafficSplit split);
  void SetLabels(const std::string& model, VersionLabelMap labels);
  void SetMirror(const std::string& model, std::shared_ptr<TrafficMirror> mirror);
  void Remove(const std::string& model);

 private:
  using Table = std::map<std::string, std::shared_ptr<const ModelTraffic>, std::less<>>;
  // Copies the table, lets `change` edit the model's entry, publishes the copy.
  template <typename Change>
  void Update(const std::string& model, Change change);

  Mutex write_mu_;
  std::atomic<std::shared_ptr<const Table>> table_;
};

}  // namespace inferd
