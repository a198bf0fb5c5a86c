// Kernel auto-tuning. Where a kernel has several ways to run an op (a oneDNN GEMM or the same
// product as a 1x1 convolution with pre-packed weights...), it times them on the first run with a
// new shape and keeps the fastest. Choices are keyed by op and shapes, not by node, so the twelve
// identical layers of a transformer tune once; they are cached in a file next to the model so a
// restart skips the timing (the file records the CPU and thread count it was measured with, and
// is ignored on any other).
//
// Kernels find the settings of the session running them in its RunContext (run_context.h).
#pragma once

#include <filesystem>
#include <string_view>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"

namespace inferd::runtime {

enum class TuneMode {
  kOff,   // no timing: each kernel's built-in default
  kFast,  // each candidate timed over a few runs
  kFull,  // more runs per candidate (steadier on a noisy machine)
};
StatusOr<TuneMode> ParseTuneMode(std::string_view text);  // "off", "fast", "full"
std::string_view TuneModeName(TuneMode mode);

class TuningCache {
 public:
  // An empty path keeps choices in memory only. `threads`: the intra-op thread count the timings
  // are made with (part of what the file must match).
  explicit TuningCache(std::filesystem::path path = {}, int threads = 1);

  // The process-wide cache for a file (loaded on first use): the instances of one model share
  // their choices, so what warmup timed on one instance the others do not time again.
  static std::shared_ptr<TuningCache> Shared(const std::filesystem::path& path, int threads);
  // Reads the file if it exists and was written on this machine setup; a missing or foreign file
  // is not an error (tuning starts over).
  void Load();
  // Writes the file if there are new choices. Best effort: a read-only model folder only costs
  // the timing at the next start; the error is returned for the caller to log.
  Status SaveIfChanged();

  std::optional<int> Find(const std::string& key) const;
  void Put(const std::string& key, int choice);
  size_t size() const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::string MachineLine() const;

  std::filesystem::path path_;
  int threads_;
  mutable std::mutex mutex_;  // instances of one model share the cache
  std::map<std::string, int> choices_;
  bool changed_ = false;
};

// Picks among `candidates` ways to run an op: the cached choice for `key`, else (tuning on) the
// one that `run(i)` executes fastest, else `default_choice`. `run` executes candidate i once on
// the real inputs; an error from it drops that candidate.
int ChooseFastest(const std::string& key, int candidates, int default_choice, const std::function<Status(int)>& run);

// The choice for `key` when no timing is needed: the cached one, or `default_choice` when tuning
// is off; nullopt when the candidates must be timed. Lets a kernel build only the candidate it
// will use (creating primitives is most of a first run's cost).
std::optional<int> KnownChoice(const std::string& key, int default_choice);

// The cache file for a model: MODEL.onnx -> MODEL.onnx.tuning next to it.
// What TuningCachePath appends to the model file's name.
inline constexpr std::string_view kTuningCacheSuffix = ".tuning";
std::filesystem::path TuningCachePath(const std::filesystem::path& model_path);

}  // namespace inferd::runtime
