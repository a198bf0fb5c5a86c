// Triton's response cache: a model with `response_cache { enable: true }` answers a request whose
// inputs it has seen before from memory, without queueing or executing it. One cache per server,
// `--cache-size` bytes, shared by every such model.
//
// Keys: the loaded version's serial number (a reload of version 3 gets a new one, so an answer of
// another load, let alone another version, is never served), then a 64-bit hash of the inputs'
// names, datatypes, shapes and bytes and of the requested outputs, and the inputs' total size.
// Inputs are not kept for an exact comparison: two different requests of the same size whose
// hashes collide (odds 2^-64 per pair) would share an answer, as in Triton, which keys its cache
// by one 64-bit hash too.
//
// Eviction: least recently used, under the byte budget, which counts each entry's output bytes
// plus its bookkeeping. The cache is split into shards by key, each with its own lock and an
// equal part of the budget, so concurrent lookups of different requests do not queue on one
// mutex; the LRU order is per shard. An entry larger than a shard's budget is not kept.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/infer_request.h"
#include "common/mutex.h"
#include "metrics/metrics_registry.h"

namespace inferd {

struct ResponseCacheKey {
  uint64_t version_serial = 0;
  uint64_t hash = 0;
  uint64_t input_bytes = 0;
  bool operator==(const ResponseCacheKey&) const = default;
};

class ResponseCache {
 public:
  // `metrics` null: no metrics (tests).
  ResponseCache(size_t byte_budget, MetricsRegistry* metrics);
  ~ResponseCache();

  // The key of a validated request (inputs in config order) to the version with `version_serial`.
  static ResponseCacheKey KeyOf(uint64_t version_serial, const InferRequest& request);

  // The outputs cached under `key` (sharing the cache's buffers), and it becomes the most recent.
  std::optional<std::vector<Tensor>> Lookup(const ResponseCacheKey& key);
  // Keeps a copy of `outputs` (their own buffers: the answer's may be slices of a whole batch's),
  // evicting the least recently used entries of the shard to make room.
  void Insert(const ResponseCacheKey& key, const std::vector<Tensor>& outputs);
  // Drops every entry of one loaded version (it is leaving service).
  void EraseVersion(uint64_t version_serial);

  size_t bytes() const { return bytes_.load(); }
  size_t entries() const { return entries_.load(); }
  uint64_t evictions() const { return evictions_.load(); }

 private:
  struct Entry {
    ResponseCacheKey key;
    std::vector<Tensor> outputs;
    size_t bytes = 0;
  };
  struct Shard {
    Mutex mu;
    std::list<Entry> lru GUARDED_BY(mu);  // most recent first
    std::unordered_map<uint64_t, std::list<Entry>::iterator> by_hash GUARDED_BY(mu);
    size_t bytes GUARDED_BY(mu) = 0;
  };
  static constexpr size_t kShards = 8;

  Shard& ShardOf(const ResponseCacheKey& key) { return shards_[key.hash % kShards]; }
  // Removes `entry` from its shard; the caller holds the shard's lock.
  void Remove(Shard& shard, std::list<Entry>::iterator entry) REQUIRES(shard.mu);
  void PublishGauges();

  const size_t shard_budget_;
  Shard shards_[kShards];
  std::atomic<size_t> bytes_{0};
  std::atomic<size_t> entries_{0};
  std::atomic<uint64_t> evictions_{0};
  std::shared_ptr<Counter> evictions_metric_;
  std::shared_ptr<Gauge> bytes_metric_, entries_metric_;
};

// Declares the cache's metric families (server-wide and per model).
void RegisterResponseCacheMetricFamilies(MetricsRegistry* registry);

}  // namespace inferd
