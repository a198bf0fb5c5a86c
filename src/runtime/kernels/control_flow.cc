// Control flow: If, Loop, Scan (opset 9+) and SequenceMap. Each subgraph is a Session of its own, built at
// load from the node's graph attribute; a run binds the subgraph's formal inputs and the outer
// values it captures (the node's implicit inputs, onnx_import.cc) and runs it.
#include <cstring>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/session.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

// One subgraph attribute, ready to run.
class Subgraph {
 public:
  static StatusOr<Subgraph> Build(const Node& node, std::string_view attribute_name) {
    const Attribute* attribute = node.Find(attribute_name);
    if (attribute == nullptr || attribute->kind != Attribute::Kind::kGraph || attribute->graph == nullptr)
      return Status::InvalidArgument(node.Describe() + ": needs the graph attribute '" + std::string(attribute_name) + "'");
    Subgraph subgraph;
    subgraph.capture_slots_ = attribute->capture_slots;
    subgraph.formal_count_ = attribute->graph->inputs.size() - attribute->capture_slots.size();
    subgraph.implicit_begin_ = node.inputs.size() - node.implicit_input_count;
    auto session = Session::FromGraph(*attribute->graph);
    if (!session.ok()) return session.status().WithPrefix(node.Describe() + " subgraph '" + std::string(attribute_name) + "'");
    subgraph.session_ = std::move(session).value();
    return subgraph;
  }

  size_t formal_count() const { return formal_count_; }
  size_t output_count() const { return session_->output_count(); }
  DataType output_dtype(size_t i) const { return session_->output(i).dtype; }

  // Runs on `formal` inputs plus the captured values among the node's inputs.
  Status Run(std::vector<Tensor> formal, Inputs node_inputs, std::vector<Tensor>* outputs) {
    if (formal.size() != formal_count_) {
      return Status::InvalidArgument("the subgraph takes " + std::to_string(formal_count_) + " inputs, got " +
                                     std::to_string(formal.size()));
    }
    for (size_t slot : capture_slots_) {
      const Tensor* captured = node_inputs[implicit_begin_ + slot];
      if (captured == nullptr) return Status::Internal("a captured value is missing");
      formal.push_back(*captured);
    }
    return session_->Run(formal, outputs);
  }

 private:
  std::unique_ptr<Session> session_;
  std::vector<size_t> capture_slots_;
  size_t formal_count_ = 0;
  size_t implicit_begin_ = 0;
};

StatusOr<bool> ReadCondition(const Tensor& tensor, const char* what) {
  if (tensor.dtype != DataType::kBool || ElementsOf(tensor) != 1)
    return Status::InvalidArgument(std::string(what) + " must be one BOOL value");
  return ValuesOf<uint8_t>(tensor)[0] != 0;
}

template <typename T>
Tensor Scalar(DataType dtype, T value) {
  Tensor tensor;
  *AllocateOutputAs<T>(&tensor, dtype, {}).value() = value;
  return tensor;
}

// Copies `slices` (equal shapes and types) into one tensor with a new axis at `axis` (the slice
// order along it). An empty list gives [0] of `dtype`.
StatusOr<Tensor> Stack(const std::vector<Tensor>& slices, int64_t axis, DataType dtype) {
  Tensor out;
  if (slices.empty()) {
    RETURN_IF_ERROR(AllocateOutput(&out, dtype, {0}).status());
    return out;
  }
  const Tensor& first = slices[0];
  if (first.sequence != nullptr || DataTypeSize(first.dtype) == 0)
    return Status::Unimplemented("scan outputs must be tensors of a fixed-size type");
  const int64_t rank = static_cast<int64_t>(first.shape.size());
  if (axis < 0) axis += rank + 1;
  if (axis < 0 || axis > rank) return Status::InvalidArgument("scan output axis is out of range");
  for (const Tensor& slice : slices) {
    if (slice.shape != first.shape || slice.dtype != first.dtype)
      return Status::InvalidArgument("scan output slices differ in shape or type between iterations");
  }
  Shape shape = first.shape;
  const int64_t count = static_cast<int64_t>(slices.size());
  shape.insert(shape.begin() + axis, count);
  ASSIGN_OR_RETURN(uint8_t * dst, AllocateOutput(&out, first.dtype, shape));
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= first.shape[d];
  const size_t inner = first.byte_size / static_cast<size_t>(std::max<int64_t>(outer, 1));
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t* src = slices[static_cast<size_t>(i)].data.get();
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + (o * count + i) * inner, src + o * inner, inner);
  }
  return out;
}

// Slice `index` of `tensor` along `axis`, without that axis.
StatusOr<Tensor> SliceAt(const Tensor& tensor, int64_t axis, int64_t index) {
  if (DataTypeSize(tensor.dtype) == 0) return Status::Unimplemented("scan inputs must be of a fixed-size type");
  Shape shape = tensor.shape;
  const int64_t count = shape[axis];
  shape.erase(shape.begin() + axis);
  Tensor out;
  ASSIGN_OR_RETURN(uint8_t * dst, AllocateOutput(&out, tensor.dtype, shape));
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= tensor.shape[d];
  const size_t inner = out.byte_size / static_cast<size_t>(std::max<int64_t>(outer, 1));
  for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * inner, tensor.data.get() + (o * count + index) * inner, inner);
  return out;
}

class IfKernel final : public Kernel {
 public:
  IfKernel(Subgraph then_branch, Subgraph else_branch)
      : then_(std::move(then_branch)), else_(std::move(else_branch)) {}

  Status Run(Inputs in, Outputs out) override {
    RETURN_IF_ERROR(RequireInputs(in, 1, "If"));
    ASSIGN_OR_RETURN(bool condition, ReadCondition(*in[0], "If's condition"));
    std::vector<Tensor> results;
    RETURN_IF_ERROR((condition ? then_ : else_).Run({}, in, &results));
    if (results.size() < out.size()) return Status::InvalidArgument("If: the branch gives fewer outputs than the node has");
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::move(results[i]);
    return Status::Ok();
  }

 private:
  Subgraph then_, else_;
};

// Loop(M, cond, v...): runs the body while the trip count and the condition allow; the body maps
// (iteration, cond, v...) to (cond, v..., scan outputs...); the node gives the final v... and each
// scan output stacked over the iterations.
class LoopKernel final : public Kernel {
 public:
  LoopKernel(Subgraph body, size_t explicit_inputs) : body_(std::move(body)), carried_(explicit_inputs - 2) {}

  Status Run(Inputs in, Outputs out) override {
    std::optional<int64_t> trip_limit;
    if (const Tensor* m = InputAt(in, 0)) {
      ASSIGN_OR_RETURN(std::vector<int64_t> limit, ReadInts(*m, "Loop's trip count"));
      if (limit.size() != 1) return Status::InvalidArgument("Loop's trip count must be one value");
      trip_limit = limit[0];
    }
    bool keep_going = true;
    if (const Tensor* cond = InputAt(in, 1)) {
      ASSIGN_OR_RETURN(keep_going, ReadCondition(*cond, "Loop's condition"));
    }
    std::vector<Tensor> carried;
    for (size_t i = 0; i < carried_; ++i) {
      if (in[2 + i] == nullptr) return Status::InvalidArgument("Loop: a loop-carried initial value is missing");
      carried.push_back(*in[2 + i]);
    }
    const size_t scans = body_.output_count() - 1 - carried_;
    std::vector<std::vector<Tensor>> scanned(scans);
    for (int64_t i = 0; (!trip_limit || i < *trip_limit) && keep_going; ++i) {
      std::vector<Tensor> formal{Scalar<int64_t>(DataType::kInt64, i), Scalar<uint8_t>(DataType::kBool, 1)};
      formal.insert(formal.end(), carried.begin(), carried.end());
      std::vector<Tensor> results;
      RETURN_IF_ERROR(body_.Run(std::move(formal), in, &results));
      ASSIGN_OR_RETURN(keep_going, ReadCondition(results[0], "Loop body's condition"));
      for (size_t v = 0; v < carried_; ++v) carried[v] = std::move(results[1 + v]);
      for (size_t k = 0; k < scans; ++k) scanned[k].push_back(std::move(results[1 + carried_ + k]));
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (i < carried_) {
        out[i] = std::move(carried[i]);
      } else if (i - carried_ < scans) {
        ASSIGN_OR_RETURN(out[i], Stack(scanned[i - carried_], 0, body_.output_dtype(1 + i)));
      }
    }
    return Status::Ok();
  }

 private:
  Subgraph body_;
  const size_t carried_;
};

struct ScanAttributes {
  int64_t scan_inputs = 0;
  std::vector<int64_t> input_axes, input_directions, output_axes, output_directions;
};

// Scan (opset 9+): N state values then M scan inputs; the body maps (states, one slice of each scan
// input) to (states, one slice of each scan output); the node gives the final states and the
// scan outputs stacked along their axes.
class ScanKernel final : public Kernel {
 public:
  ScanKernel(Subgraph body, ScanAttributes a, size_t explicit_inputs)
      : body_(std::move(body)), a_(std::move(a)), states_(explicit_inputs - static_cast<size_t>(a_.scan_inputs)) {}

  Status Run(Inputs in, Outputs out) override {
    const size_t m = static_cast<size_t>(a_.scan_inputs);
    std::vector<Tensor> states;
    for (size_t i = 0; i < states_; ++i) states.push_back(*in[i]);
    int64_t steps = -1;
    std::vector<int64_t> axes(m);
    for (size_t j = 0; j < m; ++j) {
      const Tensor& input = *in[states_ + j];
      const int64_t rank = static_cast<int64_t>(input.shape.size());
      int64_t axis = j < a_.input_axes.size() ? a_.input_axes[j] : 0;
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) return Status::InvalidArgument("Scan: scan_input_axes is out of range");
      axes[j] = axis;
      if (steps >= 0 && input.shape[axis] != steps) return Status::InvalidArgument("Scan: scan inputs differ in length");
      steps = input.shape[axis];
    }
    const size_t scans = body_.output_count() - states_;
    std::vector<std::vector<Tensor>> scanned(scans);
    for (int64_t t = 0; t < steps; ++t) {
      std::vector<Tensor> formal = states;
      for (size_t j = 0; j < m; ++j) {
        const bool reverse = j < a_.input_directions.size() && a_.input_directions[j] == 1;
        ASSIGN_OR_RETURN(Tensor slice, SliceAt(*in[states_ + j], axes[j], reverse ? steps - 1 - t : t));
        formal.push_back(std::move(slice));
      }
      std::vector<Tensor> results;
      RETURN_IF_ERROR(body_.Run(std::move(formal), in, &results));
      for (size_t i = 0; i < states_; ++i) states[i] = std::move(results[i]);
      for (size_t k = 0; k < scans; ++k) scanned[k].push_back(std::move(results[states_ + k]));
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (i < states_) {
        out[i] = std::move(states[i]);
        continue;
      }
      const size_t k = i - states_;
      if (k >= scans) break;
      if (k < a_.output_directions.size() && a_.output_directions[k] == 1) std::reverse(scanned[k].begin(), scanned[k].end());
      ASSIGN_OR_RETURN(out[i], Stack(scanned[k], k < a_.output_axes.size() ? a_.output_axes[k] : 0, body_.output_dtype(i)));
    }
    return Status::Ok();
  }

 private:
  Subgraph body_;
  const ScanAttributes a_;
  const size_t states_;
};

// SequenceMap(sequence, extra...): runs the body once per item; an extra input that is a sequence
// gives its item i, a tensor is passed whole. Each body output is collected into a sequence, as
// owned copies (a body output may be a captured value living in an arena slot).
class SequenceMapKernel final : public Kernel {
 public:
  SequenceMapKernel(Subgraph body, size_t explicit_inputs) : body_(std::move(body)), explicit_(explicit_inputs) {}

  Status Run(Inputs in, Outputs out) override {
    if (in.empty() || in[0] == nullptr || in[0]->sequence == nullptr)
      return Status::InvalidArgument("SequenceMap: input 0 must be a sequence");
    const size_t count = in[0]->sequence->size();
    for (size_t j = 1; j < explicit_; ++j) {
      if (in[j] == nullptr) return Status::InvalidArgument("SequenceMap: an input is missing");
      if (in[j]->sequence != nullptr && in[j]->sequence->size() != count)
        return Status::InvalidArgument("SequenceMap: the input sequences differ in length");
    }
    std::vector<std::vector<Tensor>> collected(out.size());
    for (size_t i = 0; i < count; ++i) {
      std::vector<Tensor> formal;
      for (size_t j = 0; j < explicit_; ++j) formal.push_back(in[j]->sequence != nullptr ? (*in[j]->sequence)[i] : *in[j]);
      std::vector<Tensor> results;
      RETURN_IF_ERROR(body_.Run(std::move(formal), in, &results));
      for (size_t k = 0; k < out.size() && k < results.size(); ++k) collected[k].push_back(OwnedCopy(results[k]));
    }
    for (size_t k = 0; k < out.size(); ++k) {
      out[k] = Tensor{};
      out[k].sequence = std::make_shared<const std::vector<Tensor>>(std::move(collected[k]));
    }
    return Status::Ok();
  }

 private:
  Subgraph body_;
  const size_t explicit_;
};

size_t ExplicitInputs(const Node& node) { return node.inputs.size() - node.implicit_input_count; }

StatusOr<std::unique_ptr<Kernel>> MakeIf(const Node& node, int) {
  ASSIGN_OR_RETURN(Subgraph then_branch, Subgraph::Build(node, "then_branch"));
  ASSIGN_OR_RETURN(Subgraph else_branch, Subgraph::Build(node, "else_branch"));
  if (then_branch.formal_count() != 0 || else_branch.formal_count() != 0)
    return Status::InvalidArgument(node.Describe() + ": If's branches take no inputs");
  return std::unique_ptr<Kernel>(std::make_unique<IfKernel>(std::move(then_branch), std::move(else_branch)));
}

StatusOr<std::unique_ptr<Kernel>> MakeLoop(const Node& node, int) {
  ASSIGN_OR_RETURN(Subgraph body, Subgraph::Build(node, "body"));
  const size_t explicit_inputs = ExplicitInputs(node);
  if (explicit_inputs < 2 || body.formal_count() != explicit_inputs || body.output_count() < explicit_inputs - 1)
    return Status::InvalidArgument(node.Describe() + ": the body's inputs and outputs do not match the loop's");
  return std::unique_ptr<Kernel>(std::make_unique<LoopKernel>(std::move(body), explicit_inputs));
}

StatusOr<std::unique_ptr<Kernel>> MakeSequenceMap(const Node& node, int) {
  ASSIGN_OR_RETURN(Subgraph body, Subgraph::Build(node, "body"));
  const size_t explicit_inputs = ExplicitInputs(node);
  if (explicit_inputs < 1 || body.formal_count() != explicit_inputs)
    return Status::InvalidArgument(node.Describe() + ": the body must take one input per node input");
  return std::unique_ptr<Kernel>(std::make_unique<SequenceMapKernel>(std::move(body), explicit_inputs));
}

StatusOr<std::unique_ptr<Kernel>> MakeScan(const Node& node, int) {
  ASSIGN_OR_RETURN(Subgraph body, Subgraph::Build(node, "body"));
  ScanAttributes a;
  ASSIGN_OR_RETURN(a.scan_inputs, node.Int("num_scan_inputs", 0));
  ASSIGN_OR_RETURN(a.input_axes, node.Ints("scan_input_axes"));
  ASSIGN_OR_RETURN(a.input_directions, node.Ints("scan_input_directions"));
  ASSIGN_OR_RETURN(a.output_axes, node.Ints("scan_output_axes"));
  ASSIGN_OR_RETURN(a.output_directions, node.Ints("scan_output_directions"));
  const size_t explicit_inputs = ExplicitInputs(node);
  if (a.scan_inputs < 1 || static_cast<size_t>(a.scan_inputs) > explicit_inputs || body.formal_count() != explicit_inputs)
    return Status::InvalidArgument(node.Describe() + ": num_scan_inputs and the body's inputs do not match the node's");
  return std::unique_ptr<Kernel>(std::make_unique<ScanKernel>(std::move(body), std::move(a), explicit_inputs));
}

}  // namespace

void RegisterControlFlowKernels(KernelRegistry* r) {
  r->Register("If", 1, MakeIf);
  r->Register("Loop", 1, MakeLoop);
  r->Register("Scan", 9, MakeScan);
  r->Register("SequenceMap", 17, MakeSequenceMap);  // opset 8's Scan (batched, with sequence_lens) is not supported
}

}  // namespace inferd::runtime
