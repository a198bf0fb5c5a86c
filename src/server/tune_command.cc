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
#include "lifecycle/model_repository.h"
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

// The model's config as the server would serve it: config.pbtxt, or for an ONNX model without one,
// what the backend completes from the newest version's file (Triton's auto-complete).
StatusOr<ModelConfig> EffectiveConfig(const fs::path& model_dir, const std::string& model) {
  if (!fs::is_directory(model_dir)) return Status::NotFound("no model folder " + model_dir.string());
  ModelSource source = ReadModelSource(model, {model_dir});
  if (!source.status.ok()) return source.status;
  if (!source.config) return Status::InvalidArgument("model '" + model + "': no config");
  if (source.versions.empty()) return Status::NotFound("model '" + model + "': no version folder in " + model_dir.string());
  ModelConfig config = *source.config;
  if (IsComposite(config)) return config;
  BackendRegistry backends = BackendRegistry::WithBuiltins();
  ASSIGN_OR_RETURN(Backend * backend, backends.Select(config));
  RETURN_IF_ERROR(backend->CompleteConfig(model_dir / std::to_string(source.versions.back()), &config));
  RETURN_IF_ERROR(ValidateModelConfig(config, "model '" + model + "' (completed config)"));
  return config;
}

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

ModelConfig ConfigFor(const ModelConfig& base, const Candidate& candidate, double target_ms) {
  if (candidate.as_configured) return base;
  ModelConfig config = base;
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

// The model's folder with this config.pbtxt and the original's other entries linked in.
Status WriteModelFolder(const fs::path& original, const fs::path& copy, const ModelConfig& config) {
  std::error_code error;
  fs::create_directories(copy, error);
  for (const auto& entry : fs::directory_iterator(original, error)) {
    if (entry.path().filename() == "config.pbtxt") continue;
    const fs::path link = copy / entry.path().filename();
    if (!fs::exists(link)) fs::create_symlink(fs::absolute(entry.path()), link, error);
    if (error) return Status::Internal("linking " + entry.path().string() + ": " + error.message());
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(config, &text);
  std::ofstream(copy / "config.pbtxt") << text;
  return Status::Ok();
}

Outcome Measure(const TuneFlags& flags, const Candidate& candidate, client::Client* client, const std::string& address) {
  Outcome outcome{.candidate = candidate};
  if (Status loaded = client->LoadModel(flags.model); !loaded.ok()) {
    outcome.error = loaded.message();
    return outcome;
  }
  BenchFlags bench{.connection = {.url = address}, .model = flags.model, .warmup_ms = 500, .shapes = flags.shapes,
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
  std::printf("%-52s %12s %12s %10s  %s\n", "config", "concurrency", "infer/s", "p99 ms", "within target");
  for (const Outcome& outcome : outcomes) {
    if (!outcome.error.empty()) {
      std::printf("%-52s %12s %12s %10s  error: %s\n", outcome.candidate.label.c_str(), "-", "-", "-", outcome.error.c_str());
    } else if (!outcome.best) {
      std::printf("%-52s %12s %12s %10s  no (p99 above %g ms even at concurrency 1)\n", outcome.candidate.label.c_str(),
                  "1", "-", "-", target_ms);
    } else {
      std::printf("%-52s %12g %12.1f %10.2f  yes\n", outcome.candidate.label.c_str(), outcome.best->level,
                  outcome.best->throughput, outcome.best->p99_ms);
    }
  }
}

}  // namespace

void AddTuneFlags(CLI::App* command, TuneFlags* flags) {
  command->add_option("--model-repository", flags->repository, "The repository holding the model")->required();
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
  command->add_option("--max-concurrency", flags->max_concurrency, "Closed-loop clients: 1, 2, 4, ... up to this")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command->add_option("--seconds-per-level", flags->seconds_per_level, "Measurement of one concurrency level")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--shape", flags->shapes, "NAME:d1,d2,... for inputs with variable dims (without the batch dim)");
  command->add_option("--out", flags->out, "Where the best config.pbtxt goes (default: MODEL.tuned.pbtxt)");
}

int RunTune(const TuneFlags& flags) {
  const fs::path original = fs::path(flags.repository) / flags.model;
  auto base = EffectiveConfig(original, flags.model);
  if (!base.ok()) return Fail(base.status());
  if (IsComposite(*base)) return Fail(Status::InvalidArgument("an ensemble or router runs no instance of its own to tune"));
  const std::vector<Candidate> candidates = Candidates(*base, flags);

  std::error_code ignored;
  const fs::path work = fs::temp_directory_path() / ("inferd-tune-" + std::to_string(::getpid()));
  fs::create_directories(work / "repository", ignored);
  if (Status written = WriteModelFolder(original, work / "repository" / flags.model, *base); !written.ok()) return Fail(written);
  std::vector<Outcome> outcomes;
  {
    auto server = ChildServer::Start(work / "repository", flags.model, work / "server.log");
    if (!server.ok()) return Fail(server.status());
    auto client = ConnectFrom({.url = (*server)->address()});
    if (!client.ok()) return Fail(client.status());
    std::fprintf(stderr, "tuning '%s': %zu configs, p99 target %g ms (the server's log: %s)\n", flags.model.c_str(),
                 candidates.size(), flags.latency_target_ms, (work / "server.log").c_str());
    ProgressBar progress("configs", candidates.size());
    progress.Update(0);
    for (const Candidate& candidate : candidates) {
      const ModelConfig config = ConfigFor(*base, candidate, flags.latency_target_ms);
      if (Status written = WriteModelFolder(original, work / "repository" / flags.model, config); !written.ok()) {
        return Fail(written);
      }
      outcomes.push_back(Measure(flags, candidate, client->get(), (*server)->address()));
      progress.Update(outcomes.size());
    }
  }
  PrintTable(outcomes, flags.latency_target_ms);
  const Outcome* best = nullptr;
  for (const Outcome& outcome : outcomes) {
    if (outcome.best && (best == nullptr || outcome.best->throughput > best->best->throughput)) best = &outcome;
  }
  fs::remove_all(work, ignored);
  if (best == nullptr) {
    std::fprintf(stderr, "no config met a p99 of %g ms: nothing written\n", flags.latency_target_ms);
    return 2;
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(ConfigFor(*base, best->candidate, flags.latency_target_ms), &text);
  const std::string out = flags.out.empty() ? flags.model + ".tuned.pbtxt" : flags.out;
  std::ofstream file(out);
  file << "# inferd tune: " << best->candidate.label << ": " << best->best->throughput << " infer/s at p99 "
       << best->best->p99_ms << " ms (target " << flags.latency_target_ms << " ms), concurrency " << best->best->level
       << "\n" << text;
  if (!file) return Fail(Status::Internal("cannot write " + out));
  std::printf("\nbest: %s (%.1f infer/s, p99 %.2f ms); written to %s\n", best->candidate.label.c_str(),
              best->best->throughput, best->best->p99_ms, out.c_str());
  return 0;
}

}  // namespace inferd
