#include "server/run_command.h"

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "common/container_resources.h"
#include "common/npy.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/session.h"
#include "runtime/threading.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;
using runtime::Session;
using Clock = std::chrono::steady_clock;

double Milliseconds(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Random values for an input the user did not give: floats in [-1, 1], integers in [0, 10) (small
// enough to be valid indices for embedding-style inputs), bools at random.
StatusOr<Tensor> RandomInput(const runtime::ValueInfo& info, int64_t batch, std::mt19937* rng) {
  if (!info.shape) return Status::InvalidArgument("input '" + info.name + "' has no shape in the model; give it with --input");
  Shape shape;
  for (size_t d = 0; d < info.shape->size(); ++d) {
    const runtime::Dim& dim = (*info.shape)[d];
    if (dim.is_known()) {
      shape.push_back(dim.value);
    } else if (d == 0) {
      shape.push_back(batch);
    } else {
      return Status::InvalidArgument("input '" + info.name + "' has the symbolic dim '" + dim.symbol + "' beyond the batch; give it with --input");
    }
  }
  Tensor tensor;
  ASSIGN_OR_RETURN(uint8_t * raw, runtime::AllocateOutput(&tensor, info.dtype, shape));
  const int64_t n = runtime::ElementsOf(tensor);
  std::uniform_real_distribution<float> real(-1, 1);
  std::uniform_int_distribution<int> small(0, 9);
  Status status = runtime::DispatchAny(info.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* data = reinterpret_cast<T*>(raw);
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<T>) data[i] = static_cast<T>(real(*rng));
      else if constexpr (std::is_same_v<T, bool>) data[i] = small(*rng) % 2 == 0;
      else data[i] = static_cast<T>(small(*rng));
    }
    return Status::Ok();
  });
  RETURN_IF_ERROR(status);
  tensor.name = info.name;
  return tensor;
}

StatusOr<std::vector<Tensor>> PrepareInputs(const Session& session, const RunFlags& flags, int64_t batch) {
  std::map<std::string, std::string> files;
  for (const std::string& spec : flags.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos) return Status::InvalidArgument("--input '" + spec + "' is not NAME=FILE.npy");
    files[spec.substr(0, eq)] = spec.substr(eq + 1);
  }
  std::mt19937 rng(42);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < session.input_count(); ++i) {
    const runtime::ValueInfo& info = session.input(i);
    auto file = files.find(info.name);
    if (file != files.end()) {
      ASSIGN_OR_RETURN(Tensor tensor, ReadNpy(file->second));
      tensor.name = info.name;
      inputs.push_back(std::move(tensor));
      files.erase(file);
    } else {
      ASSIGN_OR_RETURN(Tensor tensor, RandomInput(info, batch, &rng));
      inputs.push_back(std::move(tensor));
    }
  }
  if (!files.empty()) return Status::InvalidArgument("the model has no input '" + files.begin()->first + "'");
  return inputs;
}

void DumpGraph(const Session& session) {
  std::map<std::string, int> ops;
  std::map<std::string, std::map<std::string, int>> implementations;
  for (size_t i = 0; i < session.graph().nodes.size(); ++i) {
    const std::string& op = session.graph().nodes[i].op_type;
    ops[op]++;
    implementations[op][session.kernel(i).Implementation()]++;
  }
  const runtime::OptimizationReport& report = session.optimization();
  int before = 0;
  for (const auto& [op, count] : report.ops_before) before += count;
  std::printf("graph: %d nodes as imported, %zu after the optimizer, opset %d\n", before,
              session.graph().nodes.size(), session.graph().opset);
  for (const auto& [pass, rewrites] : report.rewrites) std::printf("  pass %-26s %d rewrite(s)\n", pass.c_str(), rewrites);
  std::set<std::string> all_ops;
  for (const auto& [op, count] : report.ops_before) all_ops.insert(op);
  for (const auto& [op, count] : ops) all_ops.insert(op);
  std::printf("%-24s %6s %6s  %s\n", "op", "before", "after", "implementation (last run)");
  for (const std::string& op : all_ops) {
    std::string used;
    for (const auto& [name, n] : implementations[op]) used += (used.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    auto was = report.ops_before.find(op);
    std::printf("%-24s %6d %6d  %s\n", op.c_str(), was == report.ops_before.end() ? 0 : was->second,
                ops.count(op) ? ops[op] : 0, used.c_str());
  }
}

// The nodes that took longest, so a slow layer can be found by name (after fusion: a Conv node
// may carry its activation and residual Add).
void PrintSlowestNodes(const Session& session, int runs, double total) {
  constexpr size_t kShown = 15;
  const auto& seconds = session.node_seconds();
  std::vector<size_t> order(seconds.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const size_t shown = std::min(kShown, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    [&](size_t a, size_t b) { return seconds[a] > seconds[b]; });
  std::printf("\n%-56s %-12s %10s %7s\n", "slowest nodes", "op", "ms/run", "share");
  for (size_t k = 0; k < shown; ++k) {
    const auto& node = session.graph().nodes[order[k]];
    std::printf("%-56s %-12s %10.3f %6.1f%%\n", node.name.c_str(), node.op_type.c_str(), seconds[order[k]] * 1000 / runs,
                100 * seconds[order[k]] / std::max(total, 1e-12));
  }
}

void PrintProfile(const Session& session, int runs) {
  std::map<std::string, std::pair<double, int>> by_op;
  double total = 0;
  for (size_t i = 0; i < session.node_seconds().size(); ++i) {
    auto& [seconds, count] = by_op[session.graph().nodes[i].op_type];
    seconds += session.node_seconds()[i];
    count++;
    total += session.node_seconds()[i];
  }
  std::vector<std::pair<double, std::string>> sorted;
  for (const auto& [op, entry] : by_op) sorted.emplace_back(entry.first, op);
  std::sort(sorted.rbegin(), sorted.rend());
  std::printf("%-24s %10s %7s %6s\n", "op", "ms/run", "share", "nodes");
  for (const auto& [seconds, op] : sorted) {
    std::printf("%-24s %10.3f %6.1f%% %6d\n", op.c_str(), seconds * 1000 / runs, 100 * seconds / std::max(total, 1e-12),
                by_op[op].second);
  }
  PrintSlowestNodes(session, runs, total);
}

// For names from a model file inside a JSON string.
std::string JsonEscaped(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      escaped += '\\';
      escaped += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char code[8];
      std::snprintf(code, sizeof(code), "\\u%04x", c);
      escaped += code;
    } else {
      escaped += c;
    }
  }
  return escaped;
}

// Every node's time, in graph order, as `"profile": [{"name", "op", "ms"}...]` (bench/layer_compare.py
// matches them with ONNX Runtime's). Node names come from the model file: escaped.
void PrintProfileJson(const Session& session, int runs) {
  std::printf(", \"profile\": [");
  for (size_t i = 0; i < session.node_seconds().size(); ++i) {
    const auto& node = session.graph().nodes[i];
    std::printf("%s{\"name\": \"%s\", \"op\": \"%s\", \"ms\": %.4f}", i ? ", " : "", JsonEscaped(node.name).c_str(),
                JsonEscaped(node.op_type).c_str(), session.node_seconds()[i] * 1000 / runs);
  }
  std::printf("]");
}

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(p / 100.0 * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// "1-7,16" -> {1, ..., 7, 16}; "3-1" -> {3, 2, 1}.
StatusOr<std::vector<int64_t>> ParseBatchList(const std::string& text) {
  std::vector<int64_t> sizes;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    const char* const item_end = item.data() + item.size();
    long long first = 0, last = 0;
    auto [dash, parsed] = std::from_chars(item.data(), item_end, first);
    bool valid = parsed == std::errc() && dash != item.data();
    last = first;
    if (valid && dash != item_end) {
      const auto [rest, parsed_last] = std::from_chars(dash + 1, item_end, last);
      valid = *dash == '-' && parsed_last == std::errc() && rest == item_end && rest != dash + 1;
    }
    if (!valid || std::min(first, last) < 1 || std::max(first, last) > (1 << 20)) {
      return Status::InvalidArgument("--before-batches: '" + item + "' is not a size or a range like 1-8 or 8-1");
    }
    const long long step = first <= last ? 1 : -1;
    for (long long size = first; size != last + step; size += step) sizes.push_back(size);
    begin = end + 1;
  }
  return sizes;
}

// A line of /proc/self/status in MB (VmHWM: the peak resident set, VmRSS: the current one).
double ProcStatusMegabytes(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::strtod(line.c_str() + std::strlen(field), nullptr) / 1024.0;  // kB
  }
  return 0;
}

// The process's peak resident set: VmHWM, which starts afresh at exec. getrusage's ru_maxrss does
// not: a child starts from its parent's peak (a benchmark script that had imported numpy made
// every engine it launched report at least the script's 100 MB).
double PeakRssMegabytes() {
  if (double peak = ProcStatusMegabytes("VmHWM:"); peak > 0) return peak;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

}  // namespace

void AddRunFlags(CLI::App* command, RunFlags* flags) {
  command->add_option("model", flags->model, "The .onnx file")->required()->check(CLI::ExistingFile);
  command->add_option("--input", flags->inputs, "NAME=FILE.npy; repeatable (random values for inputs not given)");
  command->add_option("--output-dir", flags->output_dir, "Write each output to DIR/NAME.npy");
  command->add_option("--batch", flags->batch, "Batch size for random inputs with a symbolic first dim")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  command->add_option("--before-batches", flags->before_batches,
                      "Run these batch sizes once each first, in this order (e.g. 1-7,16 or 16-1), so that the report shows what they leave behind");
  command->add_option("--keep-shapes", flags->keep_shapes,
                      "Input shape sets kept prepared at once; a new one beyond them forgets the least recently run (1: the report is that of --batch alone)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command->add_option("--iterations", flags->iterations, "Timed runs")->check(CLI::Range(1, 1000000))->capture_default_str();
  command->add_option("--warmup", flags->warmup, "Untimed runs first")->check(CLI::Range(0, 1000000))->capture_default_str();
  command->add_option("--threads", flags->threads, "Intra-op threads (0: the CPUs available to the process, cgroup quota and affinity)")->check(CLI::Range(0, 4096))->capture_default_str();
  command->add_flag("--json", flags->json, "Print the report as JSON");
  command->add_flag("--dump-graph", flags->dump_graph, "Print op counts and the kernel implementation per op");
  command->add_flag("--profile", flags->profile, "Print the time spent per op type and the slowest nodes over the timed runs (with --json: every node's)");
  command->add_option("--tune", flags->tune,
                      "Kernel auto-tuning: off (built-in choices), fast or full (time the candidates on the first "
                      "run; choices are cached in MODEL.onnx.tuning)")
      ->check(CLI::IsMember({"off", "fast", "full"}))
      ->capture_default_str();
  command->add_option("--precision", flags->precision,
                      "The convolutions' arithmetic: fp32, or bf16 where the CPU has native bf16 (else fp32, with a warning)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
}

int RunRun(const RunFlags& flags) {
  const int threads = flags.threads > 0 ? flags.threads : AvailableCpus();  // the container's, not the node's
  runtime::SetIntraOpThreads(threads);
  const auto load_start = Clock::now();
  runtime::SessionOptions options;
  options.tune = runtime::ParseTuneMode(flags.tune).value_or(runtime::TuneMode::kFast);
  options.precision = runtime::ParsePrecision(flags.precision).value_or(runtime::Precision::kFp32);
  options.intra_op_threads = threads;
  options.persist_tuning = true;
  options.max_shape_sets = static_cast<size_t>(flags.keep_shapes);
  auto session = Session::Load(flags.model, options);
  if (!session.ok()) {
    std::fprintf(stderr, "error: %s\n", session.status().message().c_str());
    return 1;
  }
  if (!(*session)->precision_fallback().empty()) std::fprintf(stderr, "warning: %s\n", (*session)->precision_fallback().c_str());
  const double load_ms = Milliseconds(Clock::now() - load_start);
  const double load_peak_rss_mb = PeakRssMegabytes();  // the load's peak, before any run
  const double load_rss_mb = ProcStatusMegabytes("VmRSS:");
  auto before = ParseBatchList(flags.before_batches);
  if (!before.ok()) {
    std::fprintf(stderr, "error: %s\n", before.status().message().c_str());
    return 1;
  }
  std::vector<Tensor> outputs;
  for (int64_t size : *before) {
    auto other = PrepareInputs(**session, flags, size);
    Status status = other.ok() ? (*session)->Run(*other, &outputs) : other.status();
    if (!status.ok()) {
      std::fprintf(stderr, "error: batch %lld: %s\n", static_cast<long long>(size), status.message().c_str());
      return 1;
    }
  }
  auto inputs = PrepareInputs(**session, flags, flags.batch);
  if (!inputs.ok()) {
    std::fprintf(stderr, "error: %s\n", inputs.status().message().c_str());
    return 1;
  }
  std::vector<double> latencies;
  for (int i = 0; i < flags.warmup + flags.iterations; ++i) {
    if (flags.profile && i == flags.warmup) (*session)->EnableProfiling();
    const auto start = Clock::now();
    Status status = (*session)->Run(*inputs, &outputs);
    if (!status.ok()) {
      std::fprintf(stderr, "error: %s\n", status.message().c_str());
      return 1;
    }
    if (i >= flags.warmup) latencies.push_back(Milliseconds(Clock::now() - start));
  }
  if (!flags.output_dir.empty()) {
    fs::create_directories(flags.output_dir);
    for (const Tensor& output : outputs) {
      Status status = WriteNpy(fs::path(flags.output_dir) / (output.name + ".npy"), output);
      if (!status.ok()) std::fprintf(stderr, "warning: output '%s': %s\n", output.name.c_str(), status.message().c_str());
    }
  }
  const int64_t batch = inputs->empty() || inputs->front().shape.empty() ? 1 : inputs->front().shape[0];
  double total_ms = 0;
  for (double l : latencies) total_ms += l;
  const double throughput = static_cast<double>(batch) * static_cast<double>(latencies.size()) / (total_ms / 1000.0);
  const double p50 = Percentile(latencies, 50), p90 = Percentile(latencies, 90), p99 = Percentile(latencies, 99);
  std::vector<Shape> input_shapes;
  for (const Tensor& input : *inputs) input_shapes.push_back(input.shape);
  const runtime::MemoryPlanReport memory = (*session)->memory_plan(input_shapes).value_or(runtime::MemoryPlanReport{});
  const double arena_mb = static_cast<double>(memory.arena_bytes) / (1 << 20);
  const double intermediates_mb = static_cast<double>(memory.intermediate_bytes) / (1 << 20);
  if (flags.json) {
    std::printf("{\"model\": \"%s\", \"peak_rss_mb\": %.1f, \"rss_mb\": %.1f, \"load_ms\": %.3f, \"load_peak_rss_mb\": %.1f, "
                "\"load_rss_mb\": %.1f, \"threads\": %d, \"precision\": \"%s\", \"batch\": %lld, \"iterations\": %zu, "
                "\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, \"throughput_per_s\": %.2f, \"arena_mb\": %.2f, "
                "\"intermediates_mb\": %.2f, \"outputs\": [",
                JsonEscaped(flags.model).c_str(), PeakRssMegabytes(), ProcStatusMegabytes("VmRSS:"), load_ms, load_peak_rss_mb,
                load_rss_mb, threads, std::string(runtime::PrecisionName((*session)->precision())).c_str(),
                static_cast<long long>(batch), latencies.size(), p50, p90, p99,
                throughput, arena_mb, intermediates_mb);
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::printf("%s{\"name\": \"%s\", \"datatype\": \"%s\", \"shape\": %s}", i ? ", " : "", outputs[i].name.c_str(),
                  std::string(DataTypeName(outputs[i].dtype)).c_str(), ShapeToString(outputs[i].shape).c_str());
    }
    std::printf("], \"reused_buffers\": %d, \"shape_sets_kept\": %zu, \"shape_preparations\": %llu", memory.reused_buffers,
                (*session)->prepared_shapes(), static_cast<unsigned long long>((*session)->shape_preparations()));
    if (flags.profile) PrintProfileJson(**session, static_cast<int>(latencies.size()));
    std::printf("}\n");
  } else {
    std::printf("model: %s (%zu nodes, opset %d, %s), loaded in %.1f ms, %d intra-op threads\n", flags.model.c_str(),
                (*session)->graph().nodes.size(), (*session)->graph().opset,
                std::string(runtime::PrecisionName((*session)->precision())).c_str(), load_ms, threads);
    std::printf("batch %lld, %zu runs after %d warm-up: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, %.1f items/s\n",
                static_cast<long long>(batch), latencies.size(), flags.warmup, p50, p90, p99, throughput);
    std::printf("memory plan: %.1f MB arena for %.1f MB of intermediates (%d values, %d written over an input)\n",
                arena_mb, intermediates_mb, memory.planned_values, memory.reused_buffers);
    std::printf("resident memory: %.1f MB now, %.1f MB at the peak\n", ProcStatusMegabytes("VmRSS:"), PeakRssMegabytes());
    for (const Tensor& output : outputs) {
      std::printf("output %s: %s %s\n", output.name.c_str(), std::string(DataTypeName(output.dtype)).c_str(),
                  ShapeToString(output.shape).c_str());
    }
  }
  if (flags.dump_graph) DumpGraph(**session);
  if (flags.profile && !flags.json) PrintProfile(**session, static_cast<int>(latencies.size()));
  return 0;
}

}  // namespace inferd
