// `inferd run MODEL.onnx`: runs a model offline on the runtime, without the server. Reads inputs
// from .npy files (random where none is given), writes outputs as .npy, and reports load time,
// latency percentiles and throughput.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace inferd {

struct RunFlags {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::string output_dir;
  int64_t batch = 1;
  // Batch sizes run once each (random inputs) before the runs at `batch`: what they leave behind
  // (plans, tuning, buffers) shows in the reported memory.
  std::string before_batches;  // "1-7,16"
  // Input shape sets the session keeps prepared (runtime SessionOptions::max_shape_sets). One by
  // default: the report is that of `batch` alone, whatever ran before it.
  int keep_shapes = 1;
  int iterations = 10;
  int warmup = 2;
  int threads = 0;
  bool json = false;
  bool dump_graph = false;
  std::string tune = "fast";  // off | fast | full (runtime/tuning.h)
  std::string precision = "fp32";  // fp32 | bf16 (runtime/precision.h)
  bool profile = false;
};

void AddRunFlags(CLI::App* command, RunFlags* flags);
int RunRun(const RunFlags& flags);

}  // namespace inferd
