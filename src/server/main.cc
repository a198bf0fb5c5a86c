// inferd: one binary, subcommands (`serve`, `run`). The CLI is thin and every flag is declared
// once, with its help and default (and, for the server, an INFERD_* environment variable).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <thread>

#include "server/bench_command.h"
#include "server/client_commands.h"
#include "server/lifecycle_commands.h"
#include "server/quantize_command.h"
#include "server/tune_command.h"
#include "server/run_command.h"
#include "server/serve_command.h"

int main(int argc, char** argv) {
  CLI::App app{"inferd: an inference server for ONNX and built-in models (KServe v2 / Triton compatible)"};
  app.require_subcommand(1);
  inferd::ServeFlags serve_flags;
  CLI::App* serve = app.add_subcommand("serve", "Serve the models of one or more model repositories");
  inferd::AddServeFlags(serve, &serve_flags);
  inferd::RunFlags run_flags;
  CLI::App* run = app.add_subcommand("run", "Run an ONNX model offline: outputs as .npy, latency and throughput");
  inferd::AddRunFlags(run, &run_flags);
  inferd::QuantizeFlags quantize_flags;
  CLI::App* quantize = app.add_subcommand("quantize", "Quantise an ONNX model to int8 (QDQ) with a calibration set");
  inferd::AddQuantizeFlags(quantize, &quantize_flags);
  inferd::InferFlags infer_flags;
  CLI::App* infer = app.add_subcommand("infer", "Send one inference request to a server (HTTP or gRPC)");
  inferd::AddInferFlags(infer, &infer_flags);
  inferd::ModelsFlags models_flags;
  CLI::App* models = app.add_subcommand("models", "List a server's models, versions and states");
  inferd::AddModelsFlags(models, &models_flags);
  inferd::HealthFlags health_flags;
  CLI::App* health = app.add_subcommand("health", "Exit 0 if a server is ready (or live): a probe for HEALTHCHECK");
  inferd::AddHealthFlags(health, &health_flags);
  inferd::TrafficFlags traffic_flags;
  CLI::App* traffic = app.add_subcommand("traffic", "Show or set a model's traffic split and version labels");
  inferd::AddTrafficFlags(traffic, &traffic_flags);
  inferd::RolloutFlags rollout_flags;
  CLI::App* rollout = app.add_subcommand("rollout", "Start, watch or roll back a canary rollout of a model version");
  inferd::AddRolloutFlags(rollout, &rollout_flags);
  inferd::BenchFlags bench_flags;
  CLI::App* bench = app.add_subcommand("bench", "Load-test a model on a server: throughput, latency percentiles, "
                                                "server queue/compute split");
  inferd::AddBenchFlags(bench, &bench_flags);
  inferd::TuneFlags tune_flags;
  CLI::App* tune = app.add_subcommand("tune", "Find the config (instances, max batch size, queue delay, threads) that serves a "
                                              "model fastest within a p99 latency target");
  inferd::AddTuneFlags(tune, &tune_flags);
  CLI11_PARSE(app, argc, argv);
  if (serve->parsed()) return inferd::RunServe(serve_flags);
  if (run->parsed()) return inferd::RunRun(run_flags);
  if (quantize->parsed()) return inferd::RunQuantize(quantize_flags);
  if (infer->parsed()) return inferd::RunInfer(infer_flags);
  if (models->parsed()) return inferd::RunModels(models_flags);
  if (health->parsed()) return inferd::RunHealth(health_flags);
  if (bench->parsed()) return inferd::RunBench(bench_flags);
  if (tune->parsed()) return inferd::RunTune(tune_flags);
  if (traffic->parsed()) return inferd::RunTraffic(traffic_flags);
  if (rollout->parsed()) return inferd::RunRollout(rollout_flags);
  return 0;
}
