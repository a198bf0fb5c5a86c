// Symbolic shape inference: the shape of every value the graph's inputs determine (from their
// declared shapes only, never an intermediate's value_info), with the
// inputs' symbolic dims ("batch") carried through as symbols, and the contents of the small
// integer tensors that shape arithmetic passes around (Shape -> Gather -> Concat -> Reshape), so
// that everything not depending on a symbol is known at load and folds into constants
// (passes/shape_folding.cc) instead of running on every request.
//
// A dim is a number, a symbol, or unknown (Dim{} in graph.h: value -1, no symbol). Inference is
// conservative: an op it has no rule for, or a rule that meets what it cannot decide, gives
// unknown, never a guess. Two dims with the same symbol are equal: the session checks that the
// inputs bind each symbol to one size (Session::Run).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "runtime/ir/graph.h"

namespace inferd::runtime {

using SymbolicShape = std::vector<Dim>;

// An element of a tracked integer tensor: a number (of any sign: -1 in a reshape target, a
// negative index), a symbol, or unknown (neither).
struct SymbolicInt {
  std::optional<int64_t> number;
  std::string symbol;
};

struct InferredShapes {
  // Per value: its shape (nullopt: rank unknown).
  std::vector<std::optional<SymbolicShape>> shapes;
  // Per value: the elements of an integer tensor of rank 0 or 1 (nullopt: not tracked).
  std::vector<std::optional<std::vector<SymbolicInt>>> contents;
  std::vector<DataType> contents_type;  // INT64 or INT32 where contents are tracked
};

// Inference one node at a time, in graph order, for passes that change constants as they go (a
// folded value is known to the nodes after it in the same sweep).
class ShapeInference {
 public:
  explicit ShapeInference(const Graph& graph);
  ~ShapeInference();
  void Infer(const Node& node);
  // A value that became a constant (its shape, and its contents when it is a small integer one).
  void AddConstant(ValueId id, const Tensor& tensor);
  const InferredShapes& result() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

InferredShapes InferShapes(const Graph& graph);

// Both known and equal, or the same symbol.
bool SameDim(const Dim& a, const Dim& b);
std::string DimsToString(const std::vector<Dim>& dims);
std::string ContentsToString(const std::vector<SymbolicInt>& contents);

// Symbols times a number: "batch" * 12 is "batch*12", which a later / 12 takes back to "batch".
// nullopt where the result is not of that form.
std::optional<std::string> ScaleSymbol(const std::string& symbol, int64_t factor);
std::optional<std::string> DivideSymbol(const std::string& symbol, int64_t divisor);

}  // namespace inferd::runtime
