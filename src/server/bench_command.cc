#include "server/bench_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include <unistd.h>

#include "client/client.h"
#include "client/input_data.h"
#include "client/shared_memory.h"
#include "common/mutex.h"

namespace inferd {
namespace {

using BenchClock = std::chrono::steady_clock;

// Latencies (microseconds) and error count since the last Take(), from every sending thread.
class Recorder {
 public:
  void Add(BenchClock::time_point sent, bool ok) {
    const double us = std::chrono::duration<double, std::micro>(BenchClock::now() - sent).count();
    MutexLock lock(&mu_);
    if (ok) latencies_.push_back(us);
    else ++errors_;
  }
  std::pair<std::vector<double>, int64_t> Take() {
    MutexLock lock(&mu_);
    std::pair<std::vector<double>, int64_t> taken{std::move(latencies_), errors_};
    latencies_.clear();
    errors_ = 0;
    return taken;
  }

 private:
  Mutex mu_;
  std::vector<double> latencies_ GUARDED_BY(mu_);
  int64_t errors_ GUARDED_BY(mu_) = 0;
};

struct Window {
  std::vector<double> latencies;
  int64_t errors = 0;
  double seconds = 0;
  std::optional<client::ModelStatistics> stats_after;  // the server's counters when it ended
};

using LevelResult = BenchResult;

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t index = std::min(sorted.size() - 1, static_cast<size_t>(std::ceil(p / 100.0 * sorted.size())) - (p > 0 ? 1 : 0));
  return sorted[index];
}

StatusOr<std::vector<double>> ParseLevels(const std::string& text) {
  std::vector<double> levels;
  int from = 0, to = 0;
  double factor = 0;
  if (std::sscanf(text.c_str(), "%d:%d:x%lf", &from, &to, &factor) == 3) {
    if (from < 1 || to < from || factor <= 1) return Status::InvalidArgument("--concurrency FROM:TO:xF needs 1 <= FROM <= TO and F > 1");
    for (double level = from; level <= to; level *= factor) levels.push_back(std::floor(level));
    return levels;
  }
  char* end = nullptr;
  const long single = std::strtol(text.c_str(), &end, 10);
  if (*end != '\0' || single < 1 || single > 4096) return Status::InvalidArgument("--concurrency '" + text + "' is not N or FROM:TO:xF");
  return std::vector<double>{static_cast<double>(single)};
}

struct RatePhase {
  double rate = 0;
  double seconds = 0;
};

StatusOr<std::vector<RatePhase>> ParseRateSchedule(const std::string& text) {
  std::vector<RatePhase> phases;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    RatePhase phase;
    char extra = 0;
    if (std::sscanf(item.c_str(), "%lf:%lf%c", &phase.rate, &phase.seconds, &extra) != 2 || !(phase.rate > 0) ||
        !(phase.seconds > 0) || phase.rate > 1e6 || phase.seconds > 3600) {
      return Status::InvalidArgument("--rate-schedule: '" + item + "' is not RATE:SECONDS (both positive)");
    }
    phases.push_back(phase);
    start = comma + 1;
  }
  return phases;
}

class Bench {
 public:
  Bench(const BenchFlags& flags, client::Client* client, InferRequest request)
      : flags_(flags), client_(client), request_(std::move(request)) {}

  // One open-loop trace through the phases; every request sent is waited for (up to a minute
  // after the last phase), so a phase's slow answers count in it however late they come.
  std::vector<LevelResult> RunSchedule(const std::vector<RatePhase>& phases) {
    for (size_t i = 0; i < phases.size(); ++i) phase_recorders_.emplace_back();
    std::vector<int64_t> sent(phases.size(), 0);
    std::mt19937_64 rng(42);
    auto next = BenchClock::now();
    for (size_t i = 0; i < phases.size(); ++i) {
      const auto end = next + std::chrono::duration_cast<BenchClock::duration>(std::chrono::duration<double>(phases[i].seconds));
      std::exponential_distribution<double> gap(phases[i].rate);
      while (true) {
        next += std::chrono::duration_cast<BenchClock::duration>(std::chrono::duration<double>(gap(rng)));
        if (next >= end) break;
        std::this_thread::sleep_until(next);
        ++sent[i];
        inflight_.fetch_add(1);
        client_->InferAsync(request_, [this, i, at = next](StatusOr<InferResponse> result) {
          phase_recorders_[i].Add(at, result.ok());
          inflight_.fetch_sub(1);
        });
      }
      next = end;
      std::fprintf(stderr, "phase %zu: %g requests/s for %g s: %lld sent\n", i + 1, phases[i].rate, phases[i].seconds,
                   static_cast<long long>(sent[i]));
    }
    const auto limit = BenchClock::now() + std::chrono::seconds(60);
    while (inflight_.load() > 0 && BenchClock::now() < limit) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<LevelResult> results;
    for (size_t i = 0; i < phases.size(); ++i) {
      Window window;
      std::tie(window.latencies, window.errors) = phase_recorders_[i].Take();
      window.seconds = phases[i].seconds;
      // Unanswered after the wait count as errors.
      window.errors += sent[i] - static_cast<int64_t>(window.latencies.size()) - window.errors;
      LevelResult result = Summarise(true, phases[i].rate, {window}, 0, std::nullopt, true);
      result.mode = "phase_rate";
      results.push_back(result);
    }
    return results;
  }

  LevelResult RunLevel(double level, bool open_loop) {
    stop_ = false;
    std::vector<std::thread> senders;
    if (open_loop) {
      senders.emplace_back([this, level] { SendAtRate(level); });
    } else if (flags_.async) {
      for (int i = 0; i < static_cast<int>(level); ++i) SendChained();
    } else {
      for (int i = 0; i < static_cast<int>(level); ++i) senders.emplace_back([this] { SendBackToBack(); });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(flags_.warmup_ms));
    recorder_.Take();
    std::optional<client::ModelStatistics> stats_before = Stats();
    std::vector<Window> windows;
    const bool fixed = flags_.duration_s > 0;
    const auto window_length = fixed ? std::chrono::duration<double>(flags_.duration_s)
                                     : std::chrono::duration<double>(flags_.window_ms / 1000.0);
    bool stable = fixed;
    while (true) {
      const auto start = BenchClock::now();
      std::this_thread::sleep_for(window_length);
      Window window;
      std::tie(window.latencies, window.errors) = recorder_.Take();
      window.seconds = std::chrono::duration<double>(BenchClock::now() - start).count();
      window.stats_after = Stats();
      windows.push_back(std::move(window));
      Progress(open_loop, level, windows);
      if (fixed) break;
      stable = Stable(windows);
      if (stable || static_cast<int>(windows.size()) >= flags_.max_windows) break;
    }
    stop_ = true;
    for (auto& sender : senders) sender.join();
    WaitForInflight();
    // The report covers the last three windows (all, with --duration), as perf_analyzer does.
    const size_t used = std::min<size_t>(windows.size(), fixed ? 1 : 3);
    const size_t first = windows.size() - used;
    std::optional<client::ModelStatistics> from = first == 0 ? stats_before : windows[first - 1].stats_after;
    return Summarise(open_loop, level, windows, first, from, stable);
  }

 private:
  void SendBackToBack() {
    while (!stop_) {
      const auto sent = BenchClock::now();
      recorder_.Add(sent, client_->Infer(request_).ok());
    }
  }

  // One of `level` chains of asynchronous calls: each answer sends the next request, so the client
  // needs no thread per request in flight (perf_analyzer's --async).
  void SendChained() {
    inflight_.fetch_add(1);
    client_->InferAsync(request_, [this, sent = BenchClock::now()](StatusOr<InferResponse> result) {
      recorder_.Add(sent, result.ok());
      if (!stop_) SendChained();
      inflight_.fetch_sub(1);  // after the next call counts, so WaitForInflight cannot see a gap
    });
  }

  // Poisson arrivals: exponential gaps at the given rate, sent whether or not earlier requests have
  // been answered (open loop).
  void SendAtRate(double rate) {
    std::mt19937_64 rng(42);
    std::exponential_distribution<double> gap(rate);
    auto next = BenchClock::now();
    while (!stop_) {
      next += std::chrono::duration_cast<BenchClock::duration>(std::chrono::duration<double>(gap(rng)));
      std::this_thread::sleep_until(next);
      inflight_.fetch_add(1);
      client_->InferAsync(request_, [this, sent = next](StatusOr<InferResponse> result) {
        recorder_.Add(sent, result.ok());
        inflight_.fetch_sub(1);
      });
    }
  }

  void WaitForInflight() {
    const auto limit = BenchClock::now() + std::chrono::seconds(30);
    while (inflight_.load() > 0 && BenchClock::now() < limit) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    recorder_.Take();
  }

  std::optional<client::ModelStatistics> Stats() {
    auto stats = client_->GetModelStatistics(flags_.model, flags_.version);
    if (!stats.ok() || stats->empty()) return std::nullopt;
    client::ModelStatistics total = (*stats)[0];  // several versions: add them up
    for (size_t i = 1; i < stats->size(); ++i) {
      const auto& s = (*stats)[i];
      total.success_count += s.success_count;
      total.queue_ns += s.queue_ns;
      total.compute_input_ns += s.compute_input_ns;
      total.compute_infer_ns += s.compute_infer_ns;
      total.compute_output_ns += s.compute_output_ns;
    }
    return total;
  }

  static double Throughput(const Window& window) { return window.latencies.size() / std::max(window.seconds, 1e-9); }

  // The last three windows' throughputs within 10% of each other.
  static bool Stable(const std::vector<Window>& windows) {
    if (windows.size() < 3) return false;
    double low = INFINITY, high = 0;
    for (size_t i = windows.size() - 3; i < windows.size(); ++i) {
      low = std::min(low, Throughput(windows[i]));
      high = std::max(high, Throughput(windows[i]));
    }
    return high > 0 && (high - low) <= 0.1 * high;
  }

  void Progress(bool open_loop, double level, const std::vector<Window>& windows) const {
    if (!flags_.progress) return;
    const Window& last = windows.back();
    std::vector<double> sorted = last.latencies;
    std::sort(sorted.begin(), sorted.end());
    std::fprintf(stderr, "%s %g: window %zu: %.1f infer/s, p99 %.2f ms, %lld error(s)\n",
                 open_loop ? "rate" : "concurrency", level, windows.size(), Throughput(last) * flags_.batch_size,
                 Percentile(sorted, 99) / 1000.0, static_cast<long long>(last.errors));
  }

  LevelResult Summarise(bool open_loop, double level, const std::vector<Window>& windows, size_t first,
                        const std::optional<client::ModelStatistics>& from, bool stable) const {
    LevelResult result{.mode = open_loop ? "rate" : "concurrency", .level = level, .stable = stable};
    std::vector<double> latencies;
    double seconds = 0;
    for (size_t i = first; i < windows.size(); ++i) {
      latencies.insert(latencies.end(), windows[i].latencies.begin(), windows[i].latencies.end());
      result.errors += windows[i].errors;
      seconds += windows[i].seconds;
    }
    std::sort(latencies.begin(), latencies.end());
    result.requests = static_cast<int64_t>(latencies.size());
    result.throughput = latencies.size() / std::max(seconds, 1e-9) * flags_.batch_size;
    result.p50_ms = Percentile(latencies, 50) / 1000.0;
    result.p90_ms = Percentile(latencies, 90) / 1000.0;
    result.p95_ms = Percentile(latencies, 95) / 1000.0;
    result.p99_ms = Percentile(latencies, 99) / 1000.0;
    double sum = 0;
    for (double latency : latencies) sum += latency;
    result.avg_ms = latencies.empty() ? 0 : sum / latencies.size() / 1000.0;
    const auto& to = windows.back().stats_after;
    if (from && to && to->success_count > from->success_count) {
      const double n = static_cast<double>(to->success_count - from->success_count);
      result.server_queue_us = (to->queue_ns - from->queue_ns) / n / 1000.0;
      result.server_compute_us = ((to->compute_input_ns - from->compute_input_ns) +
                                  (to->compute_infer_ns - from->compute_infer_ns) +
                                  (to->compute_output_ns - from->compute_output_ns)) / n / 1000.0;
    }
    return result;
  }

  const BenchFlags& flags_;
  client::Client* const client_;
  const InferRequest request_;
  Recorder recorder_;
  std::deque<Recorder> phase_recorders_;  // --rate-schedule: one per phase; a deque never moves them
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> inflight_{0};
};

StatusOr<InferRequest> BuildRequest(const BenchFlags& flags, client::Client* client) {
  ASSIGN_OR_RETURN(client::ModelMetadata metadata, client->GetModelMetadata(flags.model, flags.version));
  ASSIGN_OR_RETURN(auto shapes, client::ParseShapeFlags(flags.shapes));
  const bool batching = client::HasBatchDim(metadata);
  InferRequest request{.model_name = flags.model, .model_version = flags.version, .priority = flags.priority};
  std::mt19937 rng(7);
  for (const client::TensorMetadata& input : metadata.inputs) {
    if (flags.input_data != "random" && flags.input_data != "zero") {
      std::filesystem::path path = flags.input_data;
      if (std::filesystem::is_directory(path)) path /= input.name + ".npy";
      else if (metadata.inputs.size() > 1)
        return Status::InvalidArgument("--input-data FILE works for single-input models; give a folder of NAME.npy");
      ASSIGN_OR_RETURN(Tensor tensor, client::ReadInputFile(input, path.string()));
      request.inputs.push_back(std::move(tensor));
      continue;
    }
    ASSIGN_OR_RETURN(Shape shape, client::ResolveShape(input, batching, flags.batch_size, shapes));
    ASSIGN_OR_RETURN(Tensor tensor, client::MakeInput(input, shape,
                                                      flags.input_data == "zero" ? client::Fill::kZero : client::Fill::kRandom, &rng));
    request.inputs.push_back(std::move(tensor));
  }
  return request;
}

constexpr size_t kRegionAlignment = 64;
size_t AlignUp(size_t bytes) { return (bytes + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment; }

// --shared-memory system: one region holds every input, written once, and room for every output
// at the size the probe answered. Requests in flight all read the same inputs and overwrite the
// same outputs, as perf_analyzer's do: the bench never reads them back.
class BenchRegion {
 public:
  static StatusOr<std::unique_ptr<BenchRegion>> Create(client::Client* client, const InferResponse& probe,
                                                       InferRequest* request) {
    size_t total = 0;
    for (const Tensor& input : request->inputs) total += AlignUp(input.byte_size);
    for (const Tensor& output : probe.outputs) total += AlignUp(std::max<size_t>(output.byte_size, 1));
    const std::string name = "inferd_bench_" + std::to_string(getpid());
    ASSIGN_OR_RETURN(auto memory, client::SharedMemoryRegion::Create("/" + name, total));
    RETURN_IF_ERROR(client->RegisterSystemSharedMemory(name, memory->key(), 0, memory->size()));
    auto region = std::unique_ptr<BenchRegion>(new BenchRegion(client, name, std::move(memory)));
    size_t offset = 0;
    for (Tensor& input : request->inputs) {
      std::memcpy(region->memory_->data() + offset, input.data.get(), input.byte_size);
      request->input_regions.emplace_back(input.name, SharedMemoryRef{.region = name, .offset = offset, .byte_size = input.byte_size});
      offset += AlignUp(input.byte_size);
      input.data.reset();  // the request now names its bytes
    }
    request->requested_outputs.clear();
    for (const Tensor& output : probe.outputs) {
      const size_t size = std::max<size_t>(output.byte_size, 1);
      request->requested_outputs.push_back(output.name);
      request->output_regions.emplace_back(output.name, SharedMemoryRef{.region = name, .offset = offset, .byte_size = size});
      offset += AlignUp(size);
    }
    return region;
  }
  ~BenchRegion() {
    if (Status status = client_->UnregisterSystemSharedMemory(name_); !status.ok()) {
      std::fprintf(stderr, "unregistering shared memory region %s: %s\n", name_.c_str(), status.ToString().c_str());
    }
  }

 private:
  BenchRegion(client::Client* client, std::string name, std::unique_ptr<client::SharedMemoryRegion> memory)
      : client_(client), name_(std::move(name)), memory_(std::move(memory)) {}

  client::Client* const client_;
  const std::string name_;
  std::unique_ptr<client::SharedMemoryRegion> memory_;
};

void Print(const std::vector<LevelResult>& results, const std::string& format) {
  if (format == "json") {
    std::printf("[");
    for (size_t i = 0; i < results.size(); ++i) {
      const LevelResult& r = results[i];
      std::printf("%s\n  {\"%s\": %g, \"throughput\": %.2f, \"p50_ms\": %.3f, \"p90_ms\": %.3f, \"p95_ms\": %.3f, "
                  "\"p99_ms\": %.3f, \"avg_ms\": %.3f, \"requests\": %lld, \"errors\": %lld, "
                  "\"server_queue_us\": %.1f, \"server_compute_us\": %.1f, \"stable\": %s}",
                  i ? "," : "", r.mode.c_str(), r.level, r.throughput, r.p50_ms, r.p90_ms, r.p95_ms, r.p99_ms, r.avg_ms,
                  static_cast<long long>(r.requests), static_cast<long long>(r.errors), r.server_queue_us,
                  r.server_compute_us, r.stable ? "true" : "false");
    }
    std::printf("\n]\n");
    return;
  }
  const bool csv = format == "csv";
  const char* header = csv ? "%s,infer_per_sec,p50_ms,p90_ms,p95_ms,p99_ms,avg_ms,errors,server_queue_us,server_compute_us,stable\n"
                           : "%-12s %12s %9s %9s %9s %9s %9s %7s %11s %13s %s\n";
  if (csv)
    std::printf(header, results.empty() ? "concurrency" : results[0].mode.c_str());
  else
    std::printf(header, results.empty() ? "concurrency" : results[0].mode.c_str(), "infer/s", "p50 ms", "p90 ms", "p95 ms",
                "p99 ms", "avg ms", "errors", "queue us", "compute us", "stable");
  for (const LevelResult& r : results) {
    std::printf(csv ? "%g,%.2f,%.3f,%.3f,%.3f,%.3f,%.3f,%lld,%.1f,%.1f,%s\n"
                    : "%-12g %12.1f %9.3f %9.3f %9.3f %9.3f %9.3f %7lld %11.1f %13.1f %s\n",
                r.level, r.throughput, r.p50_ms, r.p90_ms, r.p95_ms, r.p99_ms, r.avg_ms,
                static_cast<long long>(r.errors), r.server_queue_us, r.server_compute_us, r.stable ? "yes" : "no");
  }
}

}  // namespace

void AddBenchFlags(CLI::App* command, BenchFlags* flags) {
  AddConnectionFlags(command, &flags->connection);
  command->add_option("-m,--model", flags->model, "Model name")->required();
  command->add_option("-v,--version", flags->version, "Model version (default: the server's choice)");
  auto* concurrency = command->add_option("--concurrency", flags->concurrency,
                                          "Closed loop: N, or a sweep FROM:TO:xFACTOR (e.g. 1:64:x2)")->capture_default_str();
  auto* rate = command->add_option("--request-rate", flags->request_rate, "Open loop: requests per second, Poisson arrivals")
      ->check(CLI::PositiveNumber)
      ->excludes(concurrency);
  command->add_option("--rate-schedule", flags->rate_schedule,
                      "Open loop through phases: RATE:SECONDS,... (e.g. 5:10,50:5,10:10 for idle, a burst, "
                      "steady); one row per phase")
      ->excludes(concurrency)
      ->excludes(rate);
  command->add_option("--duration", flags->duration_s, "Seconds of one measurement per level (default: windows until stable)")
      ->check(CLI::PositiveNumber);
  command->add_option("--window-ms", flags->window_ms, "Length of one measurement window")->check(CLI::Range(100, 600000))->capture_default_str();
  command->add_option("--max-windows", flags->max_windows, "Windows per level before giving up on stability")->check(CLI::Range(3, 1000))->capture_default_str();
  command->add_option("--warmup-ms", flags->warmup_ms, "Load before measuring, per level")->check(CLI::Range(0, 600000))->capture_default_str();
  command->add_option("-b,--batch-size", flags->batch_size, "Batch size of each request (batching models)")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  command->add_option("--priority", flags->priority, "Priority level of the requests (1 is highest; 0: the model's default)");
  command->add_option("--shape", flags->shapes, "NAME:d1,d2,... for inputs with variable dims (without the batch dim)");
  command->add_option("--input-data", flags->input_data, "random, zero, FILE.npy (single input) or a folder of NAME.npy")->capture_default_str();
  command->add_option("--format", flags->format, "table, csv or json")->check(CLI::IsMember({"table", "csv", "json"}))->capture_default_str();
  command->add_flag("--json-tensors", flags->json_tensors, "HTTP: send tensors as JSON arrays, not binary");
  command->add_flag("-a,--async", flags->async, "Closed loop: keep the requests in flight with asynchronous calls, not a thread each");
  command->add_option("--shared-memory", flags->shared_memory,
                      "none, or system: inputs and outputs in a shared-memory region registered with the server "
                      "(same host; the server needs --allow-client-shm)")
      ->check(CLI::IsMember({"none", "system"}))
      ->capture_default_str();
}

StatusOr<std::vector<BenchResult>> MeasureConcurrencies(const BenchFlags& flags, client::Client* client,
                                                        const std::vector<double>& levels,
                                                        const std::function<bool(const BenchResult&)>& keep_going) {
  ASSIGN_OR_RETURN(InferRequest request, BuildRequest(flags, client));
  if (auto probe = client->Infer(request); !probe.ok()) return probe.status();
  Bench bench(flags, client, std::move(request));
  std::vector<BenchResult> results;
  for (double level : levels) {
    results.push_back(bench.RunLevel(level, /*open_loop=*/false));
    if (!keep_going(results.back())) break;
  }
  return results;
}

int RunBench(const BenchFlags& flags) {
  // Open-loop rates need many requests in flight over HTTP: one connection each.
  auto client = ConnectFrom(flags.connection, !flags.json_tensors, /*async_connections=*/64);
  if (!client.ok()) return Fail(client.status());
  auto request = BuildRequest(flags, client->get());
  if (!request.ok()) return Fail(request.status());
  // One request first: a model that refuses it would only produce a table of errors.
  auto probe = (*client)->Infer(*request);
  if (!probe.ok()) return Fail(probe.status());
  std::unique_ptr<BenchRegion> region;
  if (flags.shared_memory == "system") {
    auto created = BenchRegion::Create(client->get(), *probe, &*request);
    if (!created.ok()) return Fail(created.status());
    region = std::move(*created);
    if (auto shared = (*client)->Infer(*request); !shared.ok()) return Fail(shared.status());
  }
  if (!flags.rate_schedule.empty()) {
    auto phases = ParseRateSchedule(flags.rate_schedule);
    if (!phases.ok()) return Fail(phases.status());
    Bench bench(flags, client->get(), std::move(*request));
    Print(bench.RunSchedule(*phases), flags.format);
    return 0;
  }
  const bool open_loop = flags.request_rate > 0;
  std::vector<double> levels{flags.request_rate};
  if (!open_loop) {
    auto parsed = ParseLevels(flags.concurrency);
    if (!parsed.ok()) return Fail(parsed.status());
    levels = *parsed;
  }
  Bench bench(flags, client->get(), std::move(*request));
  std::vector<LevelResult> results;
  for (double level : levels) results.push_back(bench.RunLevel(level, open_loop));
  Print(results, flags.format);
  return 0;
}

}  // namespace inferd
