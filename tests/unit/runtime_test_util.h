// Helpers shared by the runtime unit tests: seeded random tensors, attribute builders and a graph
// builder.
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/ir/graph.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime::testing_util {

inline Tensor Random(const Shape& shape, uint32_t seed, float low = -1, float high = 1) {
  Tensor t;
  float* data = AllocateOutputAs<float>(&t, DataType::kFp32, shape).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  for (int64_t i = 0; i < ElementsOf(t); ++i) data[i] = dist(rng);
  return t;
}

inline Attribute Ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
inline Attribute Int(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}
inline Attribute Float(float v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = v;
  return a;
}
inline Attribute String(std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = std::move(v);
  return a;
}

inline Attribute Floats(std::vector<float> v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloats;
  a.floats = std::move(v);
  return a;
}
inline Attribute Strings(std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::kStrings;
  a.strings = std::move(v);
  return a;
}

// Builds graphs by value name.
class GraphBuilder {
 public:
  GraphBuilder() { graph_.opset = 17; }
  ValueId Value(const std::string& name) {
    if (auto id = graph_.FindValue(name)) return *id;
    return graph_.AddValue({.name = name, .dtype = DataType::kFp32});
  }
  GraphBuilder& Input(const std::string& name) {
    graph_.inputs.push_back(Value(name));
    return *this;
  }
  GraphBuilder& Constant(const std::string& name, Tensor t) {
    graph_.initializers[Value(name)] = std::move(t);
    return *this;
  }
  GraphBuilder& Op(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                   std::map<std::string, Attribute, std::less<>> attributes = {}) {
    Node node;
    node.op_type = op;
    node.name = outputs[0] + "_node";
    for (const auto& name : inputs) node.inputs.push_back(name.empty() ? kNoValue : Value(name));
    for (const auto& name : outputs) node.outputs.push_back(Value(name));
    node.attributes = std::move(attributes);
    graph_.nodes.push_back(std::move(node));
    return *this;
  }
  GraphBuilder& Output(const std::string& name) {
    graph_.outputs.push_back(Value(name));
    return *this;
  }
  Graph graph() const { return graph_; }

 private:
  Graph graph_;
};

}  // namespace inferd::runtime::testing_util
