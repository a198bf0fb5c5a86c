// Triton-shaped statistics of one model version (GET /v2/models/M/stats). Lock-free counters.
#pragma once

#include <atomic>
#include <cstdint>

namespace inferd {

struct DurationStat {
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> ns{0};
  void Add(int64_t nanoseconds) {
    count.fetch_add(1, std::memory_order_relaxed);
    ns.fetch_add(static_cast<uint64_t>(nanoseconds < 0 ? 0 : nanoseconds), std::memory_order_relaxed);
  }
};

struct ModelStats {
  std::atomic<uint64_t> inference_count{0};
  std::atomic<uint64_t> execution_count{0};
  std::atomic<uint64_t> last_inference_ms{0};  // milliseconds since the Unix epoch
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  // Triton's: requests the response cache answered (their success includes these), and those it
  // could not (the lookup and, on success, the insertion are the model's time, not these).
  DurationStat cache_hit, cache_miss;
};

}  // namespace inferd
