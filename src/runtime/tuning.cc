#include "runtime/tuning.h"

#include "runtime/run_context.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <vector>


namespace inferd::runtime {
namespace {

}  // namespace

// What timings depend on: the instruction set oneDNN uses, its version, the thread count, and the
// activations' channel block (a choice cached for one block may not exist in the other).
std::string TuningCache::MachineLine() const {
  const dnnl_version_t* version = dnnl_version();
  return "# inferd tuning cache; onednn " + std::to_string(version->major) + "." + std::to_string(version->minor) +
         " isa " + std::to_string(static_cast<int>(dnnl::get_effective_cpu_isa())) + " threads " +
         std::to_string(threads_);
}

StatusOr<TuneMode> ParseTuneMode(std::string_view text) {
  if (text == "off") return TuneMode::kOff;
  if (text == "fast") return TuneMode::kFast;
  if (text == "full") return TuneMode::kFull;
  return Status::InvalidArgument("tune mode must be off, fast or full, got '" + std::string(text) + "'");
}

std::string_view TuneModeName(TuneMode mode) {
  switch (mode) {
    case TuneMode::kOff: return "off";
    case TuneMode::kFast: return "fast";
    case TuneMode::kFull: return "full";
  }
  return "?";
}

TuningCache::TuningCache(std::filesystem::path path, int threads) : path_(std::move(path)), threads_(threads) {}

std::shared_ptr<TuningCache> TuningCache::Shared(const std::filesystem::path& path, int threads) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, std::weak_ptr<TuningCache>> caches;
  std::lock_guard lock(mutex);
  std::weak_ptr<TuningCache>& entry = caches[{path.string(), threads}];
  if (auto cache = entry.lock()) return cache;
  auto cache = std::make_shared<TuningCache>(path, threads);
  cache->Load();
  entry = cache;
  return cache;
}

void TuningCache::Load() {
  if (path_.empty()) return;
  std::ifstream in(path_);
  std::string line;
  if (!in || !std::getline(in, line) || line != MachineLine()) return;
  std::lock_guard lock(mutex_);
  while (std::getline(in, line)) {
    const size_t tab = line.rfind('\t');
    if (tab == std::string::npos) continue;
    try {
      choices_[line.substr(0, tab)] = std::stoi(line.substr(tab + 1));
    } catch (const std::exception&) {
      // A damaged line only costs its timing.
    }
  }
}

Status TuningCache::SaveIfChanged() {
  std::lock_guard lock(mutex_);
  if (path_.empty() || !changed_) return Status::Ok();
  changed_ = false;
  // Written aside and renamed, so that a reader never sees half a file.
  // Instances of one model write the same file: each through its own temporary name.
  const std::filesystem::path temporary =
      path_.string() + ".tmp." + std::to_string(getpid()) + "." + std::to_string(reinterpret_cast<uintptr_t>(this));
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << MachineLine() << "\n";
    for (const auto& [key, choice] : choices_) out << key << "\t" << choice << "\n";
    if (!out) return Status::Unavailable("cannot write the tuning cache " + temporary.string());
  }
  std::error_code error;
  std::filesystem::rename(temporary, path_, error);
  if (error) return Status::Unavailable("cannot write the tuning cache " + path_.string() + ": " + error.message());
  return Status::Ok();
}

std::optional<int> TuningCache::Find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = choices_.find(key);
  if (it == choices_.end()) return std::nullopt;
  return it->second;
}

void TuningCache::Put(const std::string& key, int choice) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = choices_.insert_or_assign(key, choice);
  changed_ = changed_ || inserted;
}

size_t TuningCache::size() const {
  std::lock_guard lock(mutex_);
  return choices_.size();
}

int ChooseFastest(const std::string& key, int candidates, int default_choice, const std::function<Status(int)>& run) {
  const RunContext& context = CurrentRunContext();
  if (context.tuning_cache != nullptr) {
    if (auto cached = context.tuning_cache->Find(key); cached && *cached >= 0 && *cached < candidates) return *cached;
  }
  if (context.tune == TuneMode::kOff || candidates < 2) return default_choice;
  // One warm-up run each (first-touch of the weights' packed copy), then rounds in which every
  // candidate runs once, each keeping its best time: the best, not the mean, because this
  // machine's noise only ever adds time; rounds rather than one candidate's runs after another's,
  // so that a slow spell of a shared machine falls on every candidate alike (timed one after
  // another, a tuning run on a 2-core VM once chose oneDNN's swish post-op for four layers and
  // left efficientnet_b0 8% slower; docs/BENCHMARKS.md).
  const int timed_runs = context.tune == TuneMode::kFull ? 10 : 3;
  const auto count = static_cast<size_t>(candidates);
  std::vector<double> fastest(count, std::numeric_limits<double>::infinity());
  std::vector<bool> usable(count);
  for (size_t candidate = 0; candidate < count; ++candidate) usable[candidate] = run(static_cast<int>(candidate)).ok();
  for (int round = 0; round < timed_runs; ++round) {
    for (size_t candidate = 0; candidate < count; ++candidate) {
      if (!usable[candidate]) continue;
      const auto start = std::chrono::steady_clock::now();
      usable[candidate] = run(static_cast<int>(candidate)).ok();
      fastest[candidate] = std::min(fastest[candidate], std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  int best = default_choice;
  double best_seconds = std::numeric_limits<double>::infinity();
  for (size_t candidate = 0; candidate < count; ++candidate) {
    if (usable[candidate] && fastest[candidate] < best_seconds) {
      best_seconds = fastest[candidate];
      best = static_cast<int>(candidate);
    }
  }
  if (context.tuning_cache != nullptr) context.tuning_cache->Put(key, best);
  return best;
}

std::optional<int> KnownChoice(const std::string& key, int default_choice) {
  const RunContext& context = CurrentRunContext();
  if (context.tuning_cache != nullptr) {
    if (auto cached = context.tuning_cache->Find(key); cached && *cached >= 0) return *cached;
  }
  if (context.tune == TuneMode::kOff) return default_choice;
  return std::nullopt;
}

std::filesystem::path TuningCachePath(const std::filesystem::path& model_path) {
  return model_path.string() + std::string(kTuningCacheSuffix);
}

}  // namespace inferd::runtime
