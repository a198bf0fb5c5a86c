#include "server/tune_command.h"

#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <google/protobuf/text_format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "client/client.h"
#include "backends/backend.h"
#include "config/model_config.h"
#include "server/client_commands.h"
#include "server/progress_bar.h"

namespace inferd {
namespace fs = std::filesystem;
namespace {

struct Candidate {
  std::string label;
  int instances = 1;
  int max_batch = 0;
  int64_t delay_us = 0;
  bool latency_target = false;  // parameters[latency_target_ms] instead of a fixed delay
  bool as_configured = false;   // the model's own config, measured the same way
  int threads = 0;              // parameters[intra_op_thread_count]; 0: the server derives it
};

struct Outcome {
  Candidate candidate;
  std::optional<BenchResult> best;  // the level with the most throughput within the target
  int levels = 0;
  std::string error;
};

// A loopback port nobody listens on now (the server binds it a moment later).
StatusOr<int> FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::Internal("socket failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  if (!ok) return Status::Internal("no free loopback port");
  return static_cast<int>(ntohs(address.sin_port));
}

// The `inferd serve` this command runs the candidates on; stopped (SIGTERM) when destroyed.
class ChildServer {
 public:
  static StatusOr<std::unique_ptr<ChildServer>> Start(const fs::path& repository, const std::string& model,
                                                      const fs::path& log) {
    ASSIGN_OR_RETURN(int http_port, FreePort());
    ASSIGN_OR_RETURN(int grpc_port, FreePort());
    ASSIGN_OR_RETURN(int metrics_port, FreePort());
    std::vector<std::string> args{"/proc/self/exe", "serve", "--model-repository", repository.string(),
                                  "--model-control-mode", "explicit", "--load-model", model,
                                  "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1",
                                  "--http-port", std::to_string(http_port), "--grpc-port", std::to_string(grpc_port),
                                  "--metrics-port", std::to_string(metrics_port)};
    const pid_t pid = ::fork();
    if (pid < 0) return Status::Internal("fork failed");
    if (pid == 0) {
      FILE* out = std::freopen(log.c_str(), "w", stdout);
      if (out != nullptr) ::dup2(STDOUT_FILENO, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    auto server = std::unique_ptr<ChildServer>(new ChildServer(pid, "127.0.0.1:" + std::to_string(http_port), log));
    RETURN_IF_ERROR(server->WaitLive());
    return server;
  }
  ~ChildServer() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  const std::string& address() const { return address_; }

 private:
  ChildServer(pid_t pid, std::string address, fs::path log) : pid_(pid), address_(std::move(address)), log_(std::move(log)) {}

  Status WaitLive() {
    ConnectionFlags flags{.url = address_};
    for (int attempt = 0; attempt < 1200; ++attempt) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        return Status::Internal("the tuning server exited at start; its log is " + log_.string());
      }
      if (auto client = ConnectFrom(flags); client.ok()) {
        if (auto live = (*client)->ServerLive(); live.ok() && *live) return Status::Ok();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return Status::Unavailable("the tuning server did not come up in 120 s; its log is " + log_.string());
  }

  pid_t pid_;
  std::string address_;
  fs::path log_;
};

std::vector<Candidate> Candidates(const ModelConfig& base, const TuneFlags& flags) {
  std::vector<Candidate> candidates{{.label = "as configured", .as_configured = true}};
  std::vector<int64_t> delays = flags.delays_us;
  if (delays.empty()) delays = {0, static_cast<int64_t>(flags.latency_target_ms * 100)};  // 0 and a tenth of the target
  for (int instances = 1; instances <= flags.max_instances; instances *= 2) {
    if (base.max_batch_size() == 0) {  // the model does not batch: only the instance count varies
      candidates.push_back({.instances = instances});
      continue;
    }
    int largest = 1;
    for (int size : flags.batch_sizes) {
      if (size > base.max_batch_size()) continue;
      largest = std::max(largest, size);
      for (int64_t delay : delays) {
        if (size == 1 && delay > 0) continue;  // nothing to wait for
        candidates.push_back({.instances = instances, .max_batch = size, .delay_us = delay});
      }
    }
    if (largest > 1) candidates.push_back({.instances = instances, .max_batch = largest, .latency_target = true});
  }
  for (Candidate& candidate : candidates) {
    if (candidate.as_configured) continue;
    candidate.label = std::to_string(candidate.instances) + " instance(s), max_batch_size " +
                      std::to_string(candidate.max_batch) +
                      (candidate.latency_target ? ", latency_target_ms"
                                                : ", delay " + std::to_string(candidate.delay_us) + " us");
  }
  return candidates;
}

// The threads phase: intra_op_thread_count 1, 2, 4, ... up to max_threads, on the best config of
// the first pass. None for backends that do not run an execution on a team (only the ONNX engine does).
std::vector<int> TeamSizes(const ModelConfig& base, const TuneFlags& flags) {
  const BackendRegistry backends = BackendRegistry::WithBuiltins();
  auto backend = backends.Select(base);
  if (!backend.ok() || !(*backend)->UsesIntraOpThreads()) return {};
  const int max_threads = flags.max_threads > 0 ? flags.max_threads
                                                : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<int> sizes;
  for (int threads = 1; threads <= max_threads; threads *= 2) sizes.push_back(threads);
  return sizes;
}

Candidate WithThreads(const Candidate& best, int threads) {
  Candidate candidate = best;
  candidate.threads = threads;
  candidate.label = best.label + ", " + std::to_string(threads) + " intra-op thread(s)";
  return candidate;
}

const Outcome* BestOf(const std::vector<Outcome>& outcomes) {
  const Outcome* best = nullptr;
  for (const Outcome& outcome : outcomes) {
    if (outcome.best && (best == nullptr || outcome.best->throughput > best->best->throughput)) best = &outcome;
  }
  return best;
}

ModelConfig ConfigFor(const ModelConfig& base, const Candidate& candidate, double target_ms) {
  ModelConfig config = base;
  if (candidate.threads > 0) {
    (*config.mutable_parameters())["intra_op_thread_count"].set_string_value(std::to_string(candidate.threads));
  }
  if (candidate.as_configured) return config;
  // A team size or placement chosen for another instance count would not fit this one: the server
  // derives both from the instance count unless the threads phase sets the team.
  if (candidate.threads == 0) config.mutable_parameters()->erase("intra_op_thread_count");
  config.clear_instance_group();
  auto* group = config.add_instance_group();
  group->set_count(candidate.instances);
  group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  config.mutable_parameters()->erase("latency_target_ms");
  config.mutable_parameters()->erase("cpus");  // a placement made for another instance count
  if (base.max_batch_size() == 0) return config;
  config.set_max_batch_size(candidate.max_batch);
  auto* batching = config.mutable_dynamic_batching();
  batching->clear_preferred_batch_size();
  batching->set_max_queue_delay_microseconds(candidate.latency_target ? 0 : candidate.delay_us);
  if (candidate.latency_target) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", target_ms);
    (*config.mutable_parameters())["latency_target_ms"].set_string_value(text);
  }
  return config;
}

Outcome Measure(const TuneFlags& flags, const ModelConfig& base, const Candidate& candidate, client::Client* client,
                const ConnectionFlags& connection) {
  Outcome outcome{.candidate = candidate};
  const ModelConfig config = ConfigFor(base, candidate, flags.latency_target_ms);
  if (Status loaded = client->LoadModel(flags.model, ModelConfigToJson(config)); !loaded.ok()) {
    outcome.error = loaded.message();
    return outcome;
  }
  BenchFlags bench{.connection = connection, .model = flags.model, .warmup_ms = 500, .shapes = flags.shapes,
                   .progress = false};
  bench.duration_s = flags.seconds_per_level;
  std::vector<double> levels;
  for (int level = 1; level <= flags.max_concurrency; level *= 2) levels.push_back(level);
  auto results = MeasureConcurrencies(bench, client, levels, [&](const BenchResult& result) {
    // One level past the target is enough: more clients only queue longer.
    return result.errors == 0 && result.p99_ms <= flags.latency_target_ms;
  });
  if (!results.ok()) {
    outcome.error = results.status().message();
    return outcome;
  }
  outcome.levels = static_cast<int>(results->size());
  for (const BenchResult& result : *results) {
    if (result.errors > 0 || result.p99_ms > flags.latency_target_ms) continue;
    if (!outcome.best || result.throughput > outcome.best->throughput) outcome.best = result;
  }
  return outcome;
}

void PrintTable(const std::vector<Outcome>& outcomes, double target_ms) {
  int width = 52;  // the config column: as wide as the longest label
  for (const Outcome& outcome : outcomes) width = std::max(width, static_cast<int>(outcome.candidate.label.size()));
  std::printf("%-*s %12s %12s %10s  %s\n", width, "config", "concurrency", "infer/s", "p99 ms", "within target");
  for (const Outcome& outcome : outcomes) {
    const char* label = outcome.candidate.label.c_str();
    if (!outcome.error.empty()) {
      std::printf("%-*s %12s %12s %10s  error: %s\n", width, label, "-", "-", "-", outcome.error.c_str());
    } else if (!outcome.best) {
      std::printf("%-*s %12s %12s %10s  no (p99 above %g ms even at concurrency 1)\n", width, label, "1", "-", "-",
                  target_ms);
    } else {
      std::printf("%-*s %12g %12.1f %10.2f  yes\n", width, label, outcome.best->level, outcome.best->throughput,
                  outcome.best->p99_ms);
    }
  }
}

}  // namespace

void AddTuneFlags(CLI::App* command, TuneFlags* flags) {
  auto* repository = command->add_option("--model-repository", flags->repository,
                                         "Tune on a server of this binary's own over this repository (config.pbtxt is left as it is)");
  auto* url = command->add_option("-u,--url", flags->connection.url,
                                  "Tune on this running server instead (host:port); it serves each candidate "
                                  "while tuning and gets its config back at the end");
  repository->excludes(url);
  url->excludes(repository);
  command->add_option("-i,--protocol", flags->connection.protocol, "With -u: http or grpc")
      ->check(CLI::IsMember({"http", "grpc"}))
      ->capture_default_str();
  command->add_option("-m,--model", flags->model, "Model name")->required();
  command->add_option("--latency-target-ms", flags->latency_target_ms, "p99 latency each config must meet")
      ->required()
      ->check(CLI::PositiveNumber);
  command->add_option("--max-instances", flags->max_instances, "Instance counts tried: 1, 2, 4, ... up to this")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command->add_option("--batch-sizes", flags->batch_sizes, "Candidate max_batch_size values (capped by the model's)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16));
  command->add_option("--delays-us", flags->delays_us,
                      "Candidate max_queue_delay_microseconds values (default: 0 and a tenth of the target)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{0}, int64_t{60'000'000}));
  command->add_option("--max-threads", flags->max_threads,
                      "ONNX models: intra_op_thread_count tried on the best config, 1, 2, 4, ... up to this "
                      "(default: this machine's CPUs)")
      ->check(CLI::Range(1, 1024));
  command->add_option("--max-concurrency", flags->max_concurrency, "Closed-loop clients: 1, 2, 4, ... up to this")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command->add_option("--seconds-per-level", flags->seconds_per_level, "Measurement of one concurrency level")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--shape", flags->shapes, "NAME:d1,d2,... for inputs with variable dims (without the batch dim)");
  command->add_option("--out", flags->out, "Where the best config.pbtxt goes (default: MODEL.tuned.pbtxt)");
}

namespace {

// Measures every candidate of the first pass, then the team sizes on the best of them.
std::vector<Outcome> MeasureAll(const TuneFlags& flags, const ModelConfig& base, client::Client* client,
                                const ConnectionFlags& connection) {
  const std::vector<Candidate> candidates = Candidates(base, flags);
  const std::vector<int> team_sizes = TeamSizes(base, flags);
  std::fprintf(stderr, "tuning '%s' on %s: %zu configs, p99 target %g ms\n", flags.model.c_str(),
               connection.url.c_str(), candidates.size() + team_sizes.size(), flags.latency_target_ms);
  ProgressBar progress("configs", candidates.size() + team_sizes.size());
  progress.Update(0);
  std::vector<Outcome> outcomes;
  for (const Candidate& candidate : candidates) {
    outcomes.push_back(Measure(flags, base, candidate, client, connection));
    progress.Update(outcomes.size());
  }
  const Outcome* best = BestOf(outcomes);
  if (best == nullptr) {
    progress.Update(candidates.size() + team_sizes.size());
    return outcomes;
  }
  const Candidate best_candidate = best->candidate;  // outcomes grows below
  for (int threads : team_sizes) {
    outcomes.push_back(Measure(flags, base, WithThreads(best_candidate, threads), client, connection));
    progress.Update(outcomes.size());
  }
  return outcomes;
}

Status WriteBest(const TuneFlags& flags, const ModelConfig& base, const Outcome& best) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(ConfigFor(base, best.candidate, flags.latency_target_ms), &text);
  const std::string out = flags.out.empty() ? flags.model + ".tuned.pbtxt" : flags.out;
  std::ofstream file(out);
  file << "# inferd tune: " << best.candidate.label << ": " << best.best->throughput << " infer/s at p99 "
       << best.best->p99_ms << " ms (target " << flags.latency_target_ms << " ms), concurrency " << best.best->level
       << "\n" << text;
  if (!file) return Status::Internal("cannot write " + out);
  std::printf("\nbest: %s (%.1f infer/s, p99 %.2f ms); written to %s\n", best.candidate.label.c_str(),
              best.best->throughput, best.best->p99_ms, out.c_str());
  return Status::Ok();
}

}  // namespace

int RunTune(const TuneFlags& flags) {
  if (flags.repository.empty() == flags.connection.url.empty()) {
    return Fail(Status::InvalidArgument("give either --model-repository (tune on a server of its own) or -u URL"));
  }
  // Local mode: a server of our own, its log in a folder of its own, both gone at the end.
  std::error_code ignored;
  const fs::path work = fs::temp_directory_path() / ("inferd-tune-" + std::to_string(::getpid()));
  std::unique_ptr<ChildServer> child;
  ConnectionFlags connection = flags.connection;
  if (!flags.repository.empty()) {
    if (!fs::is_directory(fs::path(flags.repository) / flags.model)) {
      return Fail(Status::NotFound("no model folder " + (fs::path(flags.repository) / flags.model).string()));
    }
    fs::create_directories(work, ignored);
    auto started = ChildServer::Start(flags.repository, flags.model, work / "server.log");
    if (!started.ok()) return Fail(started.status());
    child = std::move(started).value();
    connection = {.url = child->address()};
  }
  auto client = ConnectFrom(connection);
  if (!client.ok()) return Fail(client.status());
  auto served_json = (*client)->GetModelConfigJson(flags.model);
  if (!served_json.ok()) return Fail(served_json.status());
  auto base = ModelConfigFromJson(*served_json, "model '" + flags.model + "' (as the server reports it)");
  if (!base.ok()) return Fail(base.status());
  if (IsComposite(*base)) return Fail(Status::InvalidArgument("an ensemble or router runs no instance of its own to tune"));

  const std::vector<Outcome> outcomes = MeasureAll(flags, *base, client->get(), connection);
  Status restored = Status::Ok();
  if (!child) restored = (*client)->LoadModel(flags.model, *served_json);  // what it served before
  child.reset();
  fs::remove_all(work, ignored);
  PrintTable(outcomes, flags.latency_target_ms);
  if (!restored.ok()) {
    std::fprintf(stderr, "warning: '%s' could not get its config back: %s\n", flags.model.c_str(),
                 restored.message().c_str());
  }
  const Outcome* best = BestOf(outcomes);
  if (best == nullptr) {
    std::fprintf(stderr, "no config met a p99 of %g ms: nothing written\n", flags.latency_target_ms);
    return 2;
  }
  if (Status written = WriteBest(flags, *base, *best); !written.ok()) return Fail(written);
  return restored.ok() ? 0 : 1;
}

}  // namespace inferd
