// A loaded model ready to run: the graph plus one kernel per node. Usable without the server:
//
//   ASSIGN_OR_RETURN(auto session, Session::Load("model.onnx"));
//   std::vector<Tensor> outputs;
//   RETURN_IF_ERROR(session->Run(inputs, &outputs));   // inputs in graph input order
//
// Load fails with one error listing every unsupported op (type and node name), never at run time.
// A Session is used by one thread at a time (one per model instance).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/ir/graph.h"
#include "runtime/kernels/kernel.h"
#include "runtime/passes/optimizer.h"
#include "runtime/run_context.h"
#include "runtime/precision.h"
#include "runtime/tuning.h"

namespace inferd::runtime {

// What the memory plan for one set of input shapes does: intermediates live in one arena, at
// offsets chosen so that values whose lifetimes overlap never share bytes.
struct MemoryPlanReport {
  size_t arena_bytes = 0;         // the arena this plan needs
  size_t intermediate_bytes = 0;  // the sum of the intermediates it places (what a plan-less run allocates)
  int planned_values = 0;
  int reused_buffers = 0;  // outputs written over an input's buffer (Kernel::OutputMayReuseInput)
};

// What a session holds besides its kernels' own state.
struct SessionMemory {
  size_t weight_bytes = 0;         // the graph's initializers, after optimisation
  size_t packed_weight_bytes = 0;  // weights reordered into the kernels' layouts, shared by them
  size_t arena_bytes = 0;          // the memory plans' arena (the largest plan's)
  size_t scratch_bytes = 0;        // scratch lent to the kernels and to oneDNN's primitives
};

struct SessionOptions {
  const KernelRegistry* registry = nullptr;  // default: KernelRegistry::Default()
  bool optimize = true;                      // run the optimizer passes (passes/optimizer.h)
  TuneMode tune = TuneMode::kFast;           // kernel auto-tuning (runtime/tuning.h)
  // Tuning choices persist in a file when persist_tuning is set: `tuning_cache`, or for Load()
  // TuningCachePath(model) next to the model. Off by default: a library call writes no files;
  // the server and `inferd run` turn it on.
  std::filesystem::path tuning_cache;
  bool persist_tuning = false;
  int intra_op_threads = 0;    // what runs will use, for the tuning cache (0: the calling thread's)
  // Input shape sets kept prepared (kernels' primitives and plans, a memory plan): a run with a new
  // one beyond this first forgets the least recently run, whose next run prepares it again. What
  // the session holds then follows this bound, not every shape it has seen (a free sequence length
  // would otherwise grow it without end). The server sets it to at least its planned batch sizes.
  size_t max_shape_sets = 16;
  // bf16 runs the convolutions in bfloat16 where the CPU has native bf16 (precision.h); elsewhere
  // the session stays fp32 and precision_fallback() says why.
  Precision precision = Precision::kFp32;
};

class Session {
 public:
  ~Session();
  static StatusOr<std::unique_ptr<Session>> Load(const std::filesystem::path& model_path, SessionOptions options = {});
  static StatusOr<std::unique_ptr<Session>> FromGraph(Graph graph, SessionOptions options = {});

  const Graph& graph() const { return graph_; }
  // What the optimizer did (empty when SessionOptions::optimize was false).
  const OptimizationReport& optimization() const { return optimization_; }
  const ValueInfo& input(size_t i) const { return graph_.value(graph_.inputs[i]); }
  const ValueInfo& output(size_t i) const { return graph_.value(graph_.outputs[i]); }
  size_t input_count() const { return graph_.inputs.size(); }
  size_t output_count() const { return graph_.outputs.size(); }

  // `inputs` in the order of graph().inputs; checks element types and known dims.
  Status Run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs);

  // Per-node wall time of every Run from now on, summed (for `inferd run --profile`).
  void EnableProfiling() { node_seconds_.assign(graph_.nodes.size(), 0.0); }
  const std::vector<double>& node_seconds() const { return node_seconds_; }

  // The precision the convolutions run in, and why it is not the one asked for (empty if it is).
  Precision precision() const { return precision_; }
  const std::string& precision_fallback() const { return precision_fallback_; }

  // The tuning choices this session knows (loaded from the cache file or timed since).
  const TuningCache& tuning() const { return *tuning_cache_; }

  // The kernel of node i (e.g. to ask what implementation ran last).
  const Kernel& kernel(size_t node_index) const { return *kernels_[node_index]; }

  // Input shape sets this session keeps prepared (kernels tuned and built, memory planned): the
  // first run with each is the slow one. At most SessionOptions::max_shape_sets.
  size_t prepared_shapes() const { return plans_.size(); }
  // How many times a run has prepared a shape set, counting again those forgotten and prepared anew.
  uint64_t shape_preparations() const { return shape_preparations_; }

  // The memory plan used for inputs of these shapes (nullopt until a run with them has happened).
  std::optional<MemoryPlanReport> memory_plan(const std::vector<Shape>& input_shapes) const;
  // What the session holds now (the arena grows as shape sets are prepared).
  SessionMemory memory() const;

 private:
  // Memory planning: the first run with new input shapes allocates every output on its own and
  // records sizes and which outputs are views of others (Reshape, Squeeze...); the plan built from
  // that gives each later run one arena for all intermediates. Graph outputs are never in it (the
  // caller keeps them), nor are views of inputs or initializers.
  struct MemoryPlan {
    // Per node, per output: offset and capacity in the arena; capacity 0 = not planned.
    std::vector<std::vector<std::pair<size_t, size_t>>> slots;
    MemoryPlanReport report;
  };
  // A kept input shape set: its memory plan (the plans share one arena, as runs never overlap) and
  // the id its kernels know it by (kernels/shape_plans.h).
  struct PreparedShapeSet {
    MemoryPlan plan;
    ShapeSetId id;
    uint64_t last_run;  // runs_ at its last run, for forgetting the least recent
  };

  Session();
  Status BuildKernels(const KernelRegistry& registry);
  Status CheckSymbols(std::span<const Tensor> inputs) const;
  Status CheckInput(size_t index, const Tensor& tensor) const;
  // The allocations of a run without a plan, as BuildMemoryPlan reads them.
  struct RunRecord {
    std::vector<size_t> bytes;       // per value: size of its buffer when it owns it
    std::vector<ValueId> view_of;    // per value: the value whose buffer it shares, or itself
    std::vector<bool> plannable;     // per value: produced by a node into a buffer of its own
  };
  // One run: with `plan`, intermediates go to the arena; without, each is allocated and `record`
  // is filled for BuildMemoryPlan.
  Status Execute(std::span<const Tensor> inputs, ShapeSetId shape_set, const MemoryPlan* plan, RunRecord* record,
                 std::vector<Tensor>* outputs);
  void AllocateArena();
  void ForgetLeastRecentShapeSet();
  void ForgetInKernels(ShapeSetId shape_set);
  MemoryPlan BuildMemoryPlan(const RunRecord& record) const;
  std::vector<ValueId> ReusedBuffers(const RunRecord& record, const std::vector<int>& end,
                                     const std::vector<bool>& planned) const;

  Graph graph_;
  OptimizationReport optimization_;
  std::vector<std::unique_ptr<Kernel>> kernels_;  // one per node
  // For each node, the values whose last reader it is: released after it runs so that peak memory
  // follows the graph's width, not its length.
  std::vector<std::vector<ValueId>> release_after_;
  std::vector<int> last_reader_;  // per value: the last node reading it, -1 if none
  std::vector<double> node_seconds_;  // empty unless profiling
  std::map<std::vector<Shape>, PreparedShapeSet> plans_;
  size_t max_shape_sets_ = 16;
  ShapeSetId next_shape_set_ = kNoShapeSet + 1;
  uint64_t runs_ = 0;
  uint64_t shape_preparations_ = 0;
  std::shared_ptr<uint8_t[]> arena_;
  size_t arena_size_ = 0;
  TuneMode tune_ = TuneMode::kFast;
  Precision precision_ = Precision::kFp32;
  std::string precision_fallback_;
  std::shared_ptr<TuningCache> tuning_cache_;  // shared by the sessions of one model file
  std::unique_ptr<dnnl_kernels::PackedWeightsCache> packed_weights_;
  ScratchBuffer scratch_;     // lent to the kernels through the RunContext
  ScratchBuffer scratchpad_;  // and to their oneDNN primitives
};

}  // namespace inferd::runtime
