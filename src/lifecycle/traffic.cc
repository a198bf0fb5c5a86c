#include "lifecycle/traffic.h"

#include <random>

namespace inferd {

std::string FormatTrafficSplit(const TrafficSplit& split) {
  std::string text;
  for (const auto& [version, weight] : split) {
    if (!text.empty()) text += ',';
    text += std::to_string(version) + ":" + std::to_string(weight);
  }
  return text;
}

uint64_t TrafficTicket(std::string_view request_id) {
  if (request_id.empty()) {
    thread_local std::mt19937_64 random(std::random_device{}());
    return random();
  }
  // FNV-1a, then a finaliser (splitmix64's) so that ids differing only in their last characters
  // spread over the whole range rather than its low bits.
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : request_id) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  hash ^= hash >> 30;
  hash *= 0xbf58476d1ce4e5b9ull;
  hash ^= hash >> 27;
  hash *= 0x94d049bb133111ebull;
  return hash ^ (hash >> 31);
}

TrafficTable::TrafficTable() { table_.store(std::make_shared<const Table>()); }

std::shared_ptr<const ModelTraffic> TrafficTable::Find(std::string_view model) const {
  std::shared_ptr<const Table> table = table_.load();
  auto it = table->find(model);
  return it == table->end() ? nullptr : it->second;
}

template <typename Change>
void TrafficTable::Update(const std::string& model, Change change) {
  MutexLock lock(&write_mu_);
  auto next = std::make_shared<Table>(*table_.load());
  auto it = next->find(model);
  ModelTraffic traffic = it == next->end() ? ModelTraffic{} : *it->second;
  change(traffic);
  (*next)[model] = std::make_shared<const ModelTraffic>(std::move(traffic));
  table_.store(std::move(next));
}

void TrafficTable::ApplyConfig(const ModelConfig& config) {
  const std::string split_text = ConfigParameter(config, "traffic_split").value_or("");
  const std::string labels_text = ConfigParameter(config, "version_labels").value_or("");
  Update(config.name(), [&](ModelTraffic& traffic) {
    if (split_text != traffic.config_split) {
      traffic.split = TrafficSplitParameter(config).value_or(TrafficSplit{});
      traffic.config_split = split_text;
    }
    if (labels_text != traffic.config_labels) {
      traffic.labels = VersionLabels(config).value_or(VersionLabelMap{});
      traffic.config_labels = labels_text;
    }
  });
}

void TrafficTable::SetSplit(const std::string& model, TrafficSplit split) {
  Update(model, [&](ModelTraffic& traffic) { traffic.split = std::move(split); });
}

void TrafficTable::SetLabels(const std::string& model, VersionLabelMap labels) {
  Update(model, [&](ModelTraffic& traffic) { traffic.labels = std::move(labels); });
}

void TrafficTable::SetMirror(const std::string& model, std::shared_ptr<TrafficMirror> mirror) {
  Update(model, [&](ModelTraffic& traffic) { traffic.mirror = std::move(mirror); });
}

void TrafficTable::Remove(const std::string& model) {
  MutexLock lock(&write_mu_);
  auto next = std::make_shared<Table>(*table_.load());
  next->erase(model);
  table_.store(std::move(next));
}

}  // namespace inferd
