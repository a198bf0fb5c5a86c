#include "runtime/session.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/onnx/onnx_import.h"
#include "runtime/passes/bf16_outputs.h"
#include "runtime/threading.h"

namespace inferd::runtime {

Session::Session() : packed_weights_(std::make_unique<dnnl_kernels::PackedWeightsCache>()) {}
Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::Load(const std::filesystem::path& model_path, SessionOptions options) {
  ASSIGN_OR_RETURN(Graph graph, ImportOnnxFile(model_path));
  if (options.persist_tuning && options.tuning_cache.empty()) options.tuning_cache = TuningCachePath(model_path);
  auto session = FromGraph(std::move(graph), options);
  if (!session.ok()) return session.status().WithPrefix(model_path.string());
  return session;
}

namespace {

// The convolutions' and matrix products' kernels read the precision from the node (`_precision`),
// as they read their layouts and fused post-ops. Products only with constant 2-D weights (a Linear
// layer): those are packed once in bf16; attention's activation x activation products stay fp32.
void MarkPrecision(Graph* graph, Precision precision) {
  if (precision == Precision::kFp32) return;
  for (Node& node : graph->nodes) {
    if (!node.domain.empty()) continue;
    const bool linear = (node.op_type == "MatMul" || node.op_type == "Gemm") && node.HasInput(1) &&
                        graph->initializers.count(node.inputs[1]) && graph->initializers.at(node.inputs[1]).shape.size() == 2;
    if (node.op_type != "Conv" && !linear) continue;
    Attribute attribute;
    attribute.kind = Attribute::Kind::kString;
    attribute.s = std::string(PrecisionName(precision));
    node.attributes[kPrecisionAttribute] = attribute;
  }
}

}  // namespace

StatusOr<std::unique_ptr<Session>> Session::FromGraph(Graph graph, SessionOptions options) {
  std::unique_ptr<Session> session(new Session());
  session->graph_ = std::move(graph);
  session->tune_ = options.tune;
  session->max_shape_sets_ = std::max<size_t>(1, options.max_shape_sets);
  const int threads = options.intra_op_threads > 0 ? options.intra_op_threads : IntraOpThreads();
  session->tuning_cache_ = options.persist_tuning && !options.tuning_cache.empty()
                               ? TuningCache::Shared(options.tuning_cache, threads)
                               : std::make_shared<TuningCache>("", threads);
  const KernelRegistry& registry = options.registry ? *options.registry : KernelRegistry::Default();
  // Passes that rewrite for oneDNN's kernels (layouts, fused int8, bf16 outputs) run only for them.
  const bool onednn_kernels = &registry == &KernelRegistry::Default();
  if (options.optimize) {
    OptimizerOptions optimizer_options;
    optimizer_options.onednn_kernels = onednn_kernels;
    ASSIGN_OR_RETURN(session->optimization_, Optimize(&session->graph_, optimizer_options));
  }
  if (auto unavailable = PrecisionUnavailable(options.precision)) {
    session->precision_fallback_ = "precision " + std::string(PrecisionName(options.precision)) + " runs as fp32: " + *unavailable;
  } else {
    session->precision_ = options.precision;
    MarkPrecision(&session->graph_, session->precision_);
    // Only oneDNN's Conv kernel reads `_bf16_output`: another registry's would write fp32 there.
    if (options.optimize && onednn_kernels) RETURN_IF_ERROR(KeepBf16BetweenConvolutions(&session->graph_).status());
  }
  for (const auto& [id, tensor] : session->graph_.initializers) session->packed_weights_->AddConstant(tensor.data);
  RETURN_IF_ERROR(session->BuildKernels(registry));
  return session;
}

Status Session::BuildKernels(const KernelRegistry& registry) {
  // Every problem in one error: the user fixes the model (or asks for ops) once, not op by op.
  std::map<std::string, std::vector<std::string>> unsupported_nodes;  // op -> node names
  std::vector<std::string> invalid;
  for (const Node& node : graph_.nodes) {
    const KernelFactory* factory = registry.Find(node.op_type, node.domain, graph_.opset);
    if (factory == nullptr) {
      std::string op = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
      unsupported_nodes[op].push_back(node.name);
      kernels_.push_back(nullptr);
      continue;
    }
    auto kernel = (*factory)(node, graph_.opset);
    if (!kernel.ok()) {
      invalid.push_back(kernel.status().message());
      kernels_.push_back(nullptr);
      continue;
    }
    kernels_.push_back(std::move(kernel).value());
  }
  // One entry per op type, naming up to three of its nodes: a model with 45 ScatterND nodes gets a
  // readable message.
  std::vector<std::string> unsupported;
  for (const auto& [op, names] : unsupported_nodes) {
    std::string entry = op + " (node";
    entry += names.size() > 1 ? "s " : " ";
    for (size_t i = 0; i < names.size() && i < 3; ++i) entry += (i ? ", '" : "'") + names[i] + "'";
    if (names.size() > 3) entry += " and " + std::to_string(names.size() - 3) + " more";
    unsupported.push_back(entry + ")");
  }
  if (!unsupported.empty() || !invalid.empty()) {
    std::string message;
    auto join = [](const std::vector<std::string>& items) {
      std::string text;
      for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
      return text;
    };
    if (!unsupported.empty()) {
      message = std::to_string(unsupported.size()) + " unsupported operator type(s) at opset " +
                std::to_string(graph_.opset) + ": " + join(unsupported);
    }
    if (!invalid.empty()) message += (message.empty() ? "" : "; ") + join(invalid);
    return Status::Unimplemented(message);
  }

  std::set<ValueId> keep(graph_.outputs.begin(), graph_.outputs.end());
  std::vector<int>& last_reader = last_reader_;
  last_reader.assign(graph_.values.size(), -1);
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    for (ValueId id : graph_.nodes[i].inputs) {
      if (id != kNoValue) last_reader[id] = static_cast<int>(i);
    }
  }
  release_after_.assign(graph_.nodes.size(), {});
  for (size_t id = 0; id < last_reader.size(); ++id) {
    const auto value = static_cast<ValueId>(id);
    if (last_reader[id] >= 0 && !keep.count(value) && !graph_.initializers.count(value)) {
      release_after_[last_reader[id]].push_back(value);
    }
  }
  return Status::Ok();
}

Status Session::CheckInput(size_t index, const Tensor& tensor) const {
  const ValueInfo& info = input(index);
  if (info.dtype != DataType::kInvalid && tensor.dtype != info.dtype) {
    return Status::InvalidArgument("input '" + info.name + "' must be " + std::string(DataTypeName(info.dtype)) +
                                   ", got " + std::string(DataTypeName(tensor.dtype)));
  }
  if (info.shape) {
    bool matches = info.shape->size() == tensor.shape.size();
    for (size_t d = 0; matches && d < tensor.shape.size(); ++d) {
      const Dim& dim = (*info.shape)[d];
      matches = !dim.is_known() || dim.value == tensor.shape[d];
    }
    if (!matches) {
      return Status::InvalidArgument("input '" + info.name + "' has shape " + ShapeToString(tensor.shape) +
                                     ", which the model does not accept");
    }
  }
  return Status::Ok();
}

// The optimizer took dims with one symbol to be equal (passes/shape_folding.cc): inputs must agree.
Status Session::CheckSymbols(std::span<const Tensor> inputs) const {
  std::map<std::string_view, std::pair<int64_t, size_t>> bound;  // symbol -> size, input
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo& info = input(i);
    if (!info.shape || info.shape->size() != inputs[i].shape.size()) continue;
    for (size_t d = 0; d < inputs[i].shape.size(); ++d) {
      const Dim& dim = (*info.shape)[d];
      if (dim.is_known() || dim.symbol.empty()) continue;
      auto [it, added] = bound.emplace(dim.symbol, std::make_pair(inputs[i].shape[d], i));
      if (!added && it->second.first != inputs[i].shape[d]) {
        return Status::InvalidArgument("dim '" + dim.symbol + "' is " + std::to_string(it->second.first) + " in input '" +
                                       input(it->second.second).name + "' but " + std::to_string(inputs[i].shape[d]) +
                                       " in input '" + info.name + "'");
      }
    }
  }
  return Status::Ok();
}

Status Session::Run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  if (inputs.size() != graph_.inputs.size()) {
    return Status::InvalidArgument("the model takes " + std::to_string(graph_.inputs.size()) + " inputs, got " +
                                   std::to_string(inputs.size()));
  }
  std::vector<Shape> input_shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    RETURN_IF_ERROR(CheckInput(i, inputs[i]));
    input_shapes.push_back(inputs[i].shape);
  }
  RETURN_IF_ERROR(CheckSymbols(inputs));

  auto kept = plans_.find(input_shapes);
  if (kept != plans_.end()) {
    kept->second.last_run = ++runs_;
    RETURN_IF_ERROR(Execute(inputs, kept->second.id, &kept->second.plan, nullptr, outputs));
  } else {
    // A new shape set: the kernels prepare for it while this run records what its memory plan
    // needs. The least recently run shape set makes room first, so that what the kernels keep is
    // bounded by max_shape_sets, not by every shape ever seen.
    if (plans_.size() >= max_shape_sets_) ForgetLeastRecentShapeSet();
    const ShapeSetId id = next_shape_set_++;
    ++shape_preparations_;
    RunRecord record;
    Status status = Execute(inputs, id, nullptr, &record, outputs);
    if (status.ok()) plans_.emplace(std::move(input_shapes), PreparedShapeSet{BuildMemoryPlan(record), id, ++runs_});
    if (!status.ok()) ForgetInKernels(id);  // not kept: what was prepared for it goes
    AllocateArena();  // the recording run released it
    RETURN_IF_ERROR(status);
  }
  // New timings persist at once (a no-op otherwise). A folder we cannot write only costs the
  // timing again at the next start.
  (void)tuning_cache_->SaveIfChanged();
  return Status::Ok();
}

// One arena for every kept plan, as large as the largest. The recording run's buffers are free but
// still resident in the allocator's pools: they are handed back first, or the arena comes on top.
void Session::AllocateArena() {
  TrimHeap();
  arena_size_ = 0;
  for (const auto& [shapes, prepared] : plans_) arena_size_ = std::max(arena_size_, prepared.plan.report.arena_bytes);
  arena_ = arena_size_ > 0 ? AllocateBuffer(arena_size_).memory : nullptr;
}

void Session::ForgetLeastRecentShapeSet() {
  auto oldest = std::min_element(plans_.begin(), plans_.end(), [](const auto& a, const auto& b) {
    return a.second.last_run < b.second.last_run;
  });
  if (oldest == plans_.end()) return;
  const ShapeSetId id = oldest->second.id;
  plans_.erase(oldest);
  ForgetInKernels(id);  // oneDNN keeps no cache of its own (dnnl_context.cc): that frees them
}

void Session::ForgetInKernels(ShapeSetId shape_set) {
  for (auto& kernel : kernels_) kernel->ForgetShapeSet(shape_set);
}

Status Session::Execute(std::span<const Tensor> inputs, ShapeSetId shape_set, const MemoryPlan* plan, RunRecord* record,
                        std::vector<Tensor>* outputs) {
  std::vector<Tensor> values(graph_.values.size());
  std::vector<const Tensor*> slots(graph_.values.size(), nullptr);
  for (const auto& [id, tensor] : graph_.initializers) slots[id] = &tensor;
  for (size_t i = 0; i < inputs.size(); ++i) slots[graph_.inputs[i]] = &inputs[i];

  // With a plan, outputs go to the arena; each run's tensors there get a new owner (so that a
  // kernel's cache keyed on an input buffer cannot mistake this run's contents for the last's).
  std::shared_ptr<const uint8_t> arena;
  if (plan != nullptr) {
    auto owner = std::make_shared<std::shared_ptr<uint8_t[]>>(arena_);
    arena = std::shared_ptr<const uint8_t>(owner, arena_.get());
  }
  // Without one, this run records what a plan needs. Buffers are told apart by owner. An entry
  // goes when the last value viewing its buffer is released, so recording frees what a plain run
  // frees (a weak pointer would not: the buffer and its count are one allocation).
  const bool recording = record != nullptr;
  std::map<std::shared_ptr<const uint8_t>, ValueId, std::owner_less<>> owners;
  std::vector<int> live_views;  // per planned buffer (its first value): values still viewing it
  if (recording) {
    // A recording run does not use the arena: it is released meanwhile, or the arena of the
    // largest plan so far and this run's own buffers would be resident together. So is the
    // kernels' scratch, which grows back to what this shape needs. What a forgotten shape set
    // freed goes back to the system first (resnet50 batch 32 after 31: peak 626 -> 606 MB).
    arena_.reset();
    scratch_ = ScratchBuffer();
    scratchpad_ = ScratchBuffer();
    TrimHeap();
    record->bytes.assign(graph_.values.size(), 0);
    record->view_of.assign(graph_.values.size(), kNoValue);
    record->plannable.assign(graph_.values.size(), false);
    live_views.assign(graph_.values.size(), 0);
    for (const auto& [id, tensor] : graph_.initializers) owners.emplace(tensor.data, kNoValue);
    for (const Tensor& input : inputs) owners.emplace(input.data, kNoValue);
  }
  std::optional<ScopedMappedBuffers> mapped_buffers;
  if (recording) mapped_buffers.emplace();
  std::vector<const Tensor*> node_inputs;
  std::vector<Tensor> node_outputs;
  const RunScope run_scope({tune_, tuning_cache_.get(), packed_weights_.get(), &scratch_, &scratchpad_, shape_set});
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    const Node& node = graph_.nodes[n];
    node_inputs.clear();
    for (ValueId id : node.inputs) node_inputs.push_back(id == kNoValue ? nullptr : slots[id]);
    node_outputs.assign(node.outputs.size(), Tensor{});
    if (plan != nullptr) {
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const auto [offset, capacity] = plan->slots[n][o];
        if (capacity == 0) continue;
        node_outputs[o].data = std::shared_ptr<const uint8_t>(arena, arena.get() + offset);
        node_outputs[o].byte_size = capacity;
      }
    }
    const auto start = node_seconds_.empty() ? std::chrono::steady_clock::time_point() : std::chrono::steady_clock::now();
    Status status = kernels_[n]->Run(node_inputs, node_outputs);
    if (!node_seconds_.empty()) {
      node_seconds_[n] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    if (!status.ok()) return status.WithPrefix(node.Describe());
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const ValueId id = node.outputs[o];
      if (id == kNoValue) continue;
      if (IsArenaSlot(node_outputs[o])) node_outputs[o] = Tensor{};  // an optional output the kernel left out
      values[id] = std::move(node_outputs[o]);
      slots[id] = &values[id];
      if (recording && values[id].data != nullptr) {
        auto [it, fresh] = owners.emplace(values[id].data, id);
        record->view_of[id] = it->second;
        record->plannable[id] = fresh;
        if (fresh) record->bytes[id] = values[id].byte_size;
        if (it->second != kNoValue) ++live_views[it->second];
      }
    }
    for (ValueId id : release_after_[n]) {
      if (recording && values[id].data != nullptr) {
        const ValueId root = record->view_of[id];
        if (root != kNoValue && --live_views[root] == 0) owners.erase(values[id].data);
      }
      values[id] = Tensor{};
      slots[id] = nullptr;
    }
  }
  outputs->clear();
  for (ValueId id : graph_.outputs) {
    if (slots[id] == nullptr) return Status::Internal("output '" + graph_.value(id).name + "' was not produced");
    Tensor result = *slots[id];
    result.name = graph_.value(id).name;
    outputs->push_back(std::move(result));
  }
  return Status::Ok();
}

Session::MemoryPlan Session::BuildMemoryPlan(const RunRecord& record) const {
  const size_t value_count = graph_.values.size();
  std::vector<int> producer(value_count, -1);
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    for (ValueId id : graph_.nodes[n].outputs) {
      if (id != kNoValue) producer[id] = static_cast<int>(n);
    }
  }
  // A buffer lives from its producer to the last reader of any view of it; one that a graph output
  // shares leaves the run, so it is not planned.
  std::vector<int> end(value_count, -1);
  std::vector<bool> excluded(value_count, false);
  for (size_t v = 0; v < value_count; ++v) {
    const ValueId root = record.view_of[v];
    if (root == kNoValue || !record.plannable[root]) continue;
    end[root] = std::max({end[root], last_reader_[v], producer[v]});
  }
  for (ValueId id : graph_.outputs) {
    const ValueId root = record.view_of[id];
    if (root != kNoValue) excluded[root] = true;
  }
  std::vector<bool> planned(value_count);
  for (size_t v = 0; v < value_count; ++v) planned[v] = record.plannable[v] && !excluded[v] && producer[v] >= 0;
  const std::vector<ValueId> holder = ReusedBuffers(record, end, planned);
  std::vector<int> held_until = end;  // per holder: the end of the last value in its buffer
  for (size_t v = 0; v < value_count; ++v) {
    if (planned[v] && holder[v] != static_cast<ValueId>(v)) held_until[holder[v]] = std::max(held_until[holder[v]], end[v]);
  }
  struct Item {
    ValueId value;
    size_t bytes;
    int start, end;
    size_t offset = 0;
  };
  constexpr size_t kAlignment = 64;
  std::vector<Item> items;
  MemoryPlan plan;
  for (size_t v = 0; v < value_count; ++v) {
    if (!planned[v]) continue;
    plan.report.intermediate_bytes += record.bytes[v];
    if (holder[v] != static_cast<ValueId>(v)) continue;  // placed with its holder
    const size_t bytes = (std::max<size_t>(record.bytes[v], 1) + kAlignment - 1) / kAlignment * kAlignment;
    items.push_back({static_cast<ValueId>(v), bytes, producer[v], held_until[v]});
  }
  // Largest first, each at the lowest offset clear of every placed buffer alive at the same time.
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.bytes > b.bytes; });
  std::vector<const Item*> placed;
  for (Item& item : items) {
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, offset + bytes)
    for (const Item* other : placed) {
      if (other->start <= item.end && item.start <= other->end) busy.emplace_back(other->offset, other->offset + other->bytes);
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [begin, finish] : busy) {
      if (offset + item.bytes <= begin) break;
      offset = std::max(offset, finish);
    }
    item.offset = offset;
    placed.push_back(&item);
    plan.report.arena_bytes = std::max(plan.report.arena_bytes, offset + item.bytes);
  }
  std::vector<size_t> offset_of(value_count, 0);
  for (const Item& item : items) offset_of[item.value] = item.offset;
  plan.slots.resize(graph_.nodes.size());
  for (size_t n = 0; n < graph_.nodes.size(); ++n) plan.slots[n].assign(graph_.nodes[n].outputs.size(), {0, 0});
  for (size_t v = 0; v < value_count; ++v) {
    if (!planned[v]) continue;
    const Node& node = graph_.nodes[producer[v]];
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == static_cast<ValueId>(v)) plan.slots[producer[v]][o] = {offset_of[holder[v]], record.bytes[v]};
    }
    ++plan.report.planned_values;
    if (holder[v] != static_cast<ValueId>(v)) ++plan.report.reused_buffers;
  }
  return plan;
}

// For each planned value, the value whose arena slot it takes: itself, or, where its producer may
// write over an input (Kernel::OutputMayReuseInput), that input's holder, when the input is a
// buffer of its own (not a view, not shared with a graph output), of the same size, read last by
// this node and through no other of its inputs (the kernel would read what it is overwriting).
std::vector<ValueId> Session::ReusedBuffers(const RunRecord& record, const std::vector<int>& end,
                                            const std::vector<bool>& planned) const {
  std::vector<ValueId> holder(graph_.values.size());
  for (size_t v = 0; v < holder.size(); ++v) holder[v] = static_cast<ValueId>(v);
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    const Node& node = graph_.nodes[n];
    if (!kernels_[n] || node.outputs.empty() || node.outputs[0] == kNoValue || !planned[node.outputs[0]]) continue;
    const ValueId out = node.outputs[0];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const ValueId in = node.inputs[k];
      if (in == kNoValue || !planned[in] || !kernels_[n]->OutputMayReuseInput(k)) continue;
      if (record.view_of[in] != in || record.view_of[out] != out || end[in] != static_cast<int>(n) ||
          record.bytes[in] != record.bytes[out]) {
        continue;
      }
      bool read_elsewhere = false;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (i != k && node.inputs[i] != kNoValue && record.view_of[node.inputs[i]] == in) read_elsewhere = true;
      }
      if (read_elsewhere) continue;
      holder[out] = holder[in];
      break;
    }
  }
  return holder;
}

std::optional<MemoryPlanReport> Session::memory_plan(const std::vector<Shape>& input_shapes) const {
  auto it = plans_.find(input_shapes);
  if (it == plans_.end()) return std::nullopt;
  return it->second.plan.report;
}

SessionMemory Session::memory() const {
  SessionMemory memory;
  for (const auto& [id, tensor] : graph_.initializers) memory.weight_bytes += tensor.byte_size;
  memory.packed_weight_bytes = packed_weights_ ? packed_weights_->bytes() : 0;
  memory.arena_bytes = arena_size_;
  memory.scratch_bytes = scratch_.capacity() + scratchpad_.capacity();
  return memory;
}

}  // namespace inferd::runtime
