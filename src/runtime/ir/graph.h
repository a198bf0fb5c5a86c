// The runtime's graph IR: typed, shaped values and the nodes between them, independent of the ONNX
// protobuf classes so that optimizer passes can build and rewrite nodes freely.
//
// Values are numbered; a node refers to its inputs and outputs by value id. An optional input that
// is absent (ONNX's empty name) is kNoValue.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd::runtime {

using ValueId = int32_t;

// The domain of inferd's own ops, which only the optimizer creates (Swish, Reorder). The kernel
// registry files them as "inferd.<op>".
inline constexpr std::string_view kInferdDomain = "inferd";
inline constexpr ValueId kNoValue = -1;

// One dimension: a number, or a symbol (e.g. "batch") fixed only when a plan is built.
struct Dim {
  int64_t value = -1;  // -1 when symbolic or unknown
  std::string symbol;
  bool is_known() const { return value >= 0; }
};

struct ValueInfo {
  std::string name;
  DataType dtype = DataType::kInvalid;
  std::optional<std::vector<Dim>> shape;  // nullopt: rank unknown
};

struct Graph;

struct Attribute {
  enum class Kind { kFloat, kInt, kString, kTensor, kFloats, kInts, kStrings, kGraph, kType };  // kType: a TypeProto, not kept
  Kind kind = Kind::kInt;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  // kGraph: a subgraph (If's branches, Loop's and Scan's body). Its inputs are its formal inputs,
  // then the values it reads from enclosing graphs ("captures"); capture_slots[k] says which of the
  // node's implicit inputs feeds capture k.
  std::shared_ptr<const Graph> graph;
  std::vector<size_t> capture_slots;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::map<std::string, Attribute, std::less<>> attributes;
  // The last `implicit_input_count` inputs are outer values its subgraphs read (an ONNX subgraph
  // may use any value of an enclosing graph; as node inputs they are kept alive and ordered).
  size_t implicit_input_count = 0;

  bool Has(std::string_view attribute) const { return attributes.find(attribute) != attributes.end(); }
  // Typed attribute reads: the default when absent, an error naming the node when of another kind.
  StatusOr<int64_t> Int(std::string_view attribute, int64_t fallback) const;
  StatusOr<float> Float(std::string_view attribute, float fallback) const;
  StatusOr<std::string> String(std::string_view attribute, std::string fallback) const;
  StatusOr<std::vector<int64_t>> Ints(std::string_view attribute, std::vector<int64_t> fallback = {}) const;
  StatusOr<std::vector<float>> Floats(std::string_view attribute, std::vector<float> fallback = {}) const;
  const Attribute* Find(std::string_view attribute) const;

  // "Conv 'conv1'" for messages.
  std::string Describe() const;
  size_t input_count() const { return inputs.size(); }
  bool HasInput(size_t index) const { return index < inputs.size() && inputs[index] != kNoValue; }
};

struct Graph {
  std::vector<ValueInfo> values;
  std::vector<Node> nodes;  // topologically sorted
  std::map<ValueId, Tensor> initializers;
  std::vector<ValueId> inputs;   // graph inputs that are not initializers
  std::vector<ValueId> outputs;
  int opset = 0;  // of the default ONNX domain

  ValueId AddValue(ValueInfo info);
  std::optional<ValueId> FindValue(std::string_view name) const;
  const ValueInfo& value(ValueId id) const { return values[static_cast<size_t>(id)]; }

  // Checks that every node reads only values produced earlier (or inputs and initializers).
  Status CheckTopologicalOrder() const;
};

}  // namespace inferd::runtime
