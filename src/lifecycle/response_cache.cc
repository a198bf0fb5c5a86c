#include "lifecycle/response_cache.h"

#include <cstring>
#include <functional>
#include <string_view>

namespace inferd {
namespace {

// splitmix64's finaliser: spreads a combined value over all 64 bits.
uint64_t Mix(uint64_t value) {
  value ^= value >> 30;
  value *= 0xbf58476d1ce4e5b9ULL;
  value ^= value >> 27;
  value *= 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

uint64_t Combine(uint64_t seed, uint64_t value) { return Mix(seed ^ (value + 0x9e3779b97f4a7c15ULL)); }

uint64_t HashText(std::string_view text) { return std::hash<std::string_view>{}(text); }

// What an entry costs beyond its output bytes: the entry, its list and map nodes, the tensors.
size_t BookkeepingBytes(const std::vector<Tensor>& outputs) {
  size_t bytes = 128;
  for (const Tensor& output : outputs) bytes += sizeof(Tensor) + output.name.size() + output.shape.size() * sizeof(int64_t);
  return bytes;
}

}  // namespace

void RegisterResponseCacheMetricFamilies(MetricsRegistry* registry) {
  using Type = MetricsRegistry::Type;
  registry->Declare("inferd_cache_hits_total", Type::kCounter,
                    "Requests answered from the response cache (models with response_cache enabled).");
  registry->Declare("inferd_cache_misses_total", Type::kCounter,
                    "Requests to a model with response_cache enabled that the cache could not answer.");
  registry->Declare("inferd_cache_evictions_total", Type::kCounter,
                    "Entries the response cache dropped to stay within --cache-size.");
  registry->Declare("inferd_cache_bytes", Type::kGauge, "Bytes the response cache holds (outputs and bookkeeping).");
  registry->Declare("inferd_cache_entries", Type::kGauge, "Answers the response cache holds.");
}

ResponseCache::ResponseCache(size_t byte_budget, MetricsRegistry* metrics) : shard_budget_(byte_budget / kShards) {
  if (metrics == nullptr) return;
  RegisterResponseCacheMetricFamilies(metrics);
  evictions_metric_ = metrics->AddCounter("inferd_cache_evictions_total", {});
  bytes_metric_ = metrics->AddGauge("inferd_cache_bytes", {});
  entries_metric_ = metrics->AddGauge("inferd_cache_entries", {});
}

ResponseCache::~ResponseCache() = default;

ResponseCacheKey ResponseCache::KeyOf(uint64_t version_serial, const InferRequest& request) {
  ResponseCacheKey key{.version_serial = version_serial};
  uint64_t hash = Mix(version_serial);
  for (const Tensor& input : request.inputs) {
    hash = Combine(hash, HashText(input.name));
    hash = Combine(hash, static_cast<uint64_t>(input.dtype));
    hash = Combine(hash, input.shape.size());
    for (int64_t dim : input.shape) hash = Combine(hash, static_cast<uint64_t>(dim));
    hash = Combine(hash, HashText({reinterpret_cast<const char*>(input.data.get()), input.byte_size}));
    key.input_bytes += input.byte_size;
  }
  hash = Combine(hash, request.requested_outputs.size());
  for (const std::string& output : request.requested_outputs) hash = Combine(hash, HashText(output));
  key.hash = hash;
  return key;
}

std::optional<std::vector<Tensor>> ResponseCache::Lookup(const ResponseCacheKey& key) {
  Shard& shard = ShardOf(key);
  MutexLock lock(&shard.mu);
  auto found = shard.by_hash.find(key.hash);
  if (found == shard.by_hash.end() || !(found->second->key == key)) return std::nullopt;
  shard.lru.splice(shard.lru.begin(), shard.lru, found->second);
  return found->second->outputs;
}

void ResponseCache::Insert(const ResponseCacheKey& key, const std::vector<Tensor>& outputs) {
  size_t bytes = BookkeepingBytes(outputs);
  for (const Tensor& output : outputs) bytes += output.byte_size;
  if (bytes > shard_budget_) return;
  // The copies are made before taking the lock.
  Entry entry{.key = key, .outputs = outputs, .bytes = bytes};
  for (Tensor& output : entry.outputs) {
    output.sequence.reset();
    if (output.byte_size == 0) continue;
    MutableBuffer own = AllocateBuffer(output.byte_size);
    std::memcpy(own.get(), output.data.get(), output.byte_size);
    output.data = AliasData(own.memory, own.get());
  }
  Shard& shard = ShardOf(key);
  {
    MutexLock lock(&shard.mu);
    if (auto found = shard.by_hash.find(key.hash); found != shard.by_hash.end()) Remove(shard, found->second);
    while (shard.bytes + bytes > shard_budget_ && !shard.lru.empty()) {
      Remove(shard, std::prev(shard.lru.end()));
      evictions_.fetch_add(1);
      if (evictions_metric_) evictions_metric_->Increment();
    }
    shard.lru.push_front(std::move(entry));
    shard.by_hash[key.hash] = shard.lru.begin();
    shard.bytes += bytes;
    bytes_.fetch_add(bytes);
    entries_.fetch_add(1);
  }
  PublishGauges();
}

void ResponseCache::EraseVersion(uint64_t version_serial) {
  for (Shard& shard : shards_) {
    MutexLock lock(&shard.mu);
    for (auto it = shard.lru.begin(); it != shard.lru.end();) {
      auto next = std::next(it);
      if (it->key.version_serial == version_serial) Remove(shard, it);
      it = next;
    }
  }
  PublishGauges();
}

void ResponseCache::Remove(Shard& shard, std::list<Entry>::iterator entry) {
  shard.bytes -= entry->bytes;
  bytes_.fetch_sub(entry->bytes);
  entries_.fetch_sub(1);
  shard.by_hash.erase(entry->key.hash);
  shard.lru.erase(entry);
}

void ResponseCache::PublishGauges() {
  if (bytes_metric_) bytes_metric_->Set(static_cast<double>(bytes_.load()));
  if (entries_metric_) entries_metric_->Set(static_cast<double>(entries_.load()));
}

}  // namespace inferd
