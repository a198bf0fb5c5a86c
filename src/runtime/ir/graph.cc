#include "runtime/ir/graph.h"

namespace inferd::runtime {
namespace {

const char* KindName(Attribute::Kind kind) {
  switch (kind) {
    case Attribute::Kind::kFloat:
      return "float";
    case Attribute::Kind::kInt:
      return "int";
    case Attribute::Kind::kString:
      return "string";
    case Attribute::Kind::kTensor:
      return "tensor";
    case Attribute::Kind::kFloats:
      return "floats";
    case Attribute::Kind::kInts:
      return "ints";
    case Attribute::Kind::kStrings:
      return "strings";
    case Attribute::Kind::kGraph:
      return "graph";
    case Attribute::Kind::kType:
      return "type";
  }
  return "?";
}

template <typename T>
StatusOr<T> Read(const Node& node, std::string_view name, Attribute::Kind kind, T fallback,
                 T Attribute::*member) {
  const Attribute* attribute = node.Find(name);
  if (attribute == nullptr) return fallback;
  if (attribute->kind != kind) {
    return Status::InvalidArgument(node.Describe() + ": attribute '" + std::string(name) + "' is " +
                                   KindName(attribute->kind) + ", expected " + KindName(kind));
  }
  return attribute->*member;
}

}  // namespace

const Attribute* Node::Find(std::string_view attribute) const {
  auto it = attributes.find(attribute);
  return it == attributes.end() ? nullptr : &it->second;
}

StatusOr<int64_t> Node::Int(std::string_view attribute, int64_t fallback) const {
  return Read(*this, attribute, Attribute::Kind::kInt, fallback, &Attribute::i);
}
StatusOr<float> Node::Float(std::string_view attribute, float fallback) const {
  return Read(*this, attribute, Attribute::Kind::kFloat, fallback, &Attribute::f);
}
StatusOr<std::string> Node::String(std::string_view attribute, std::string fallback) const {
  return Read(*this, attribute, Attribute::Kind::kString, std::move(fallback), &Attribute::s);
}
StatusOr<std::vector<int64_t>> Node::Ints(std::string_view attribute, std::vector<int64_t> fallback) const {
  return Read(*this, attribute, Attribute::Kind::kInts, std::move(fallback), &Attribute::ints);
}
StatusOr<std::vector<float>> Node::Floats(std::string_view attribute, std::vector<float> fallback) const {
  return Read(*this, attribute, Attribute::Kind::kFloats, std::move(fallback), &Attribute::floats);
}

std::string Node::Describe() const {
  return op_type + (name.empty() ? std::string() : " '" + name + "'");
}

ValueId Graph::AddValue(ValueInfo info) {
  values.push_back(std::move(info));
  return static_cast<ValueId>(values.size() - 1);
}

std::optional<ValueId> Graph::FindValue(std::string_view name) const {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].name == name) return static_cast<ValueId>(i);
  }
  return std::nullopt;
}

Status Graph::CheckTopologicalOrder() const {
  std::vector<bool> available(values.size(), false);
  for (ValueId id : inputs) available[id] = true;
  for (const auto& [id, tensor] : initializers) available[id] = true;
  for (const Node& node : nodes) {
    for (ValueId id : node.inputs) {
      if (id != kNoValue && !available[id]) {
        return Status::InvalidArgument(node.Describe() + " reads '" + values[id].name +
                                       "' before any node produces it (the graph is not topologically "
                                       "sorted or the value does not exist)");
      }
    }
    for (ValueId id : node.outputs) {
      if (id != kNoValue) available[id] = true;
    }
  }
  for (ValueId id : outputs) {
    if (!available[id]) return Status::InvalidArgument("graph output '" + values[id].name + "' is never produced");
  }
  return Status::Ok();
}

}  // namespace inferd::runtime
