#include "runtime/ir/shape_inference.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string_view>

namespace inferd::runtime {
namespace {

// Integer tensors of rank 0 or 1 up to this many elements have their contents tracked.
constexpr size_t kMaxTrackedElements = 64;

Dim Known(int64_t value) { return Dim{.value = value}; }
bool IsNumber(const Dim& d, int64_t value) { return d.is_known() && d.value == value; }

Dim Symbolic(std::string symbol) { return Dim{.value = -1, .symbol = std::move(symbol)}; }

std::optional<std::vector<int64_t>> DimNumbers(const SymbolicShape& dims) {
  std::vector<int64_t> out;
  for (const Dim& d : dims) {
    if (!d.is_known()) return std::nullopt;
    out.push_back(d.value);
  }
  return out;
}

SymbolicShape FromNumbers(const std::vector<int64_t>& values) {
  SymbolicShape out;
  for (int64_t v : values) out.push_back(Known(v));
  return out;
}

std::optional<std::vector<int64_t>> Numbers(const std::vector<SymbolicInt>& contents) {
  std::vector<int64_t> out;
  for (const SymbolicInt& e : contents) {
    if (!e.number) return std::nullopt;
    out.push_back(*e.number);
  }
  return out;
}

std::vector<SymbolicInt> IntsOf(const std::vector<int64_t>& values) {
  std::vector<SymbolicInt> out;
  for (int64_t v : values) out.push_back({.number = v});
  return out;
}

SymbolicInt FromDim(const Dim& d) {
  if (d.is_known()) return {.number = d.value};
  return {.symbol = d.symbol};
}

// A tracked element used as a dim (Expand, ConstantOfShape): negative numbers are no size.
Dim ToDim(const SymbolicInt& e) {
  if (e.number) return *e.number >= 0 ? Known(*e.number) : Dim{};
  return e.symbol.empty() ? Dim{} : Symbolic(e.symbol);
}

SymbolicShape ToDims(const std::vector<SymbolicInt>& contents) {
  SymbolicShape out;
  for (const SymbolicInt& e : contents) out.push_back(ToDim(e));
  return out;
}

// "batch*12" -> ("batch", 12); "batch" -> ("batch", 1).
std::pair<std::string, int64_t> SplitSymbol(const std::string& symbol) {
  const size_t star = symbol.rfind('*');
  if (star == std::string::npos) return {symbol, 1};
  try {
    return {symbol.substr(0, star), std::stoll(symbol.substr(star + 1))};
  } catch (const std::exception&) {
    return {symbol, 1};
  }
}

std::string JoinSymbol(const std::string& base, int64_t factor) {
  return factor == 1 ? base : base + "*" + std::to_string(factor);
}

// One dim of a broadcast: a valid model makes an unknown or symbolic dim 1 or the other's size.
Dim BroadcastDim(const Dim& a, const Dim& b) {
  if (IsNumber(a, 1)) return b;
  if (IsNumber(b, 1)) return a;
  if (SameDim(a, b)) return a;
  if (a.is_known()) return b.is_known() ? Dim{} : a;
  if (b.is_known()) return b;
  return Dim{};
}

SymbolicShape Broadcast(const SymbolicShape& a, const SymbolicShape& b) {
  const size_t rank = std::max(a.size(), b.size());
  SymbolicShape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim one = Known(1);
    const Dim& da = i < rank - a.size() ? one : a[i - (rank - a.size())];
    const Dim& db = i < rank - b.size() ? one : b[i - (rank - b.size())];
    out[i] = BroadcastDim(da, db);
  }
  return out;
}

// The product of dims: a number, one symbol times 1, or unknown.
Dim Product(SymbolicShape::const_iterator begin, SymbolicShape::const_iterator end) {
  int64_t number = 1;
  const Dim* symbol = nullptr;
  for (auto it = begin; it != end; ++it) {
    if (it->is_known()) {
      number *= it->value;
    } else if (!it->symbol.empty() && symbol == nullptr) {
      symbol = &*it;
    } else {
      return Dim{};
    }
  }
  if (symbol == nullptr) return Known(number);
  auto scaled = ScaleSymbol(symbol->symbol, number);
  return scaled ? Symbolic(*scaled) : Dim{};
}

bool Normalize(int64_t* axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (*axis < 0) *axis += r;
  return *axis >= 0 && *axis < r;
}

// Conv and pool output size along one spatial dim (numbers only).
Dim WindowOutput(const Dim& in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin, int64_t pad_end,
                 const std::string& auto_pad) {
  if (!in.is_known() || stride <= 0) return Dim{};
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") return Known((in.value + stride - 1) / stride);
  const int64_t extent = (kernel - 1) * dilation + 1;
  const int64_t padded = auto_pad == "VALID" ? in.value : in.value + pad_begin + pad_end;
  if (padded < extent) return Dim{};
  return Known((padded - extent) / stride + 1);
}

bool IsSameShapeOp(std::string_view op) {
  static const std::set<std::string_view> ops = {
      "Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Log", "Neg", "Abs", "Softmax", "LogSoftmax", "Hardmax",
      "HardSwish", "HardSigmoid", "LeakyRelu", "Elu", "Selu", "Celu", "Clip", "Identity", "Cast", "CastLike", "Not",
      "Floor", "Ceil", "Round", "Reciprocal", "Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
      "Asinh", "Acosh", "Atanh", "Softplus", "Softsign", "Mish", "ThresholdedRelu", "LRN", "InstanceNormalization",
      "LayerNormalization", "BatchNormalization", "Dropout", "IsNaN", "IsInf", "CumSum", "Shrink",
      "MeanVarianceNormalization", "LpNormalization", "Trilu"};
  return ops.count(op) != 0;
}

bool IsBroadcastOp(std::string_view op) {
  static const std::set<std::string_view> ops = {
      "Add", "Sub", "Mul", "Div", "Pow", "Mod", "PRelu", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
      "And", "Or", "Xor", "BitShift", "Where", "Sum", "Mean", "Max", "Min"};
  return ops.count(op) != 0;
}

class Inference {
 public:
  explicit Inference(const Graph& graph) : graph_(graph) {
    const size_t count = graph.values.size();
    result_.shapes.resize(count);
    result_.contents.resize(count);
    result_.contents_type.resize(count, DataType::kInvalid);
    // Only the graph inputs' declared shapes are taken: an intermediate's value_info can be stale
    // (an export at batch 1 whose inputs were made dynamic afterwards), and folding a Shape of it
    // would bake the wrong size in.
    for (ValueId id : graph.inputs) result_.shapes[static_cast<size_t>(id)] = graph.values[static_cast<size_t>(id)].shape;
    for (const auto& [id, tensor] : graph.initializers) Seed(id, tensor);
  }

  const InferredShapes& result() const { return result_; }

  void Infer(const Node& node) {
    if (!node.domain.empty() && node.domain != "ai.onnx") return;
    InferNode(node);
  }

  void Seed(ValueId id, const Tensor& tensor) {
    result_.shapes[id] = FromNumbers(tensor.shape);
    if (tensor.shape.size() > 1 || (tensor.shape.size() == 1 && tensor.shape[0] > static_cast<int64_t>(kMaxTrackedElements))) return;
    std::vector<int64_t> values;
    const size_t count = tensor.shape.empty() ? 1 : static_cast<size_t>(tensor.shape[0]);
    if (tensor.dtype == DataType::kInt64) {
      const auto* data = reinterpret_cast<const int64_t*>(tensor.data.get());
      values.assign(data, data + count);
    } else if (tensor.dtype == DataType::kInt32) {
      const auto* data = reinterpret_cast<const int32_t*>(tensor.data.get());
      values.assign(data, data + count);
    } else {
      return;
    }
    result_.contents[id] = IntsOf(values);
    contents_type_[id] = tensor.dtype;
  }

 private:

  const std::optional<SymbolicShape>& ShapeOf(const Node& node, size_t input) const {
    static const std::optional<SymbolicShape> none;
    return node.HasInput(input) ? result_.shapes[node.inputs[input]] : none;
  }
  const std::optional<std::vector<SymbolicInt>>& ContentsOf(const Node& node, size_t input) const {
    static const std::optional<std::vector<SymbolicInt>> none;
    return node.HasInput(input) ? result_.contents[node.inputs[input]] : none;
  }
  // Contents that are all numbers.
  std::optional<std::vector<int64_t>> NumbersOf(const Node& node, size_t input) const {
    const auto& contents = ContentsOf(node, input);
    return contents ? Numbers(*contents) : std::nullopt;
  }
  // An ints attribute before `since_opset`, the numbers of input `input` from it.
  std::optional<std::vector<int64_t>> IntsFrom(const Node& node, const char* attribute, int since_opset,
                                               size_t input) const {
    if (graph_.opset < since_opset) {
      auto value = node.Ints(attribute);
      if (!value.ok() || !node.Has(attribute)) return std::nullopt;
      return *value;
    }
    return NumbersOf(node, input);
  }

  void SetShape(const Node& node, size_t output, SymbolicShape shape) {
    if (output < node.outputs.size() && node.outputs[output] != kNoValue) result_.shapes[node.outputs[output]] = std::move(shape);
  }
  void SetContents(const Node& node, std::vector<SymbolicInt> contents, bool scalar, DataType type) {
    const ValueId id = node.outputs[0];
    if (contents.size() > kMaxTrackedElements) return;
    result_.shapes[id] = scalar ? SymbolicShape{} : SymbolicShape{Known(static_cast<int64_t>(contents.size()))};
    result_.contents[id] = std::move(contents);
    contents_type_[id] = type;
  }

  void InferNode(const Node& node) {
    const std::string& op = node.op_type;
    if (node.outputs.empty() || node.outputs[0] == kNoValue) return;
    InferContents(node);
    if (result_.contents[node.outputs[0]]) return;  // SetContents gave the shape too
    const auto& x = ShapeOf(node, 0);
    if (IsSameShapeOp(op)) {
      if (x) {
        SetShape(node, 0, *x);
        if (op == "Dropout") SetShape(node, 1, *x);
      }
    } else if (IsBroadcastOp(op)) {
      std::optional<SymbolicShape> out;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const auto& s = ShapeOf(node, i);
        if (!s) return;
        out = out ? Broadcast(*out, *s) : *s;
      }
      if (out) SetShape(node, 0, *out);
    } else if (x) {
      InferShape(node, *x);
    }
  }

  void InferShape(const Node& node, const SymbolicShape& x) {
    const std::string& op = node.op_type;
    if (op == "MatMul") return MatMul(node, x);
    if (op == "Gemm") return Gemm(node, x);
    if (op == "Conv" || op == "MaxPool" || op == "AveragePool" || op == "LpPool") return Window(node, x);
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "GlobalLpPool") {
      SymbolicShape out = x;
      for (size_t i = 2; i < out.size(); ++i) out[i] = Known(1);
      return SetShape(node, 0, out);
    }
    if (op == "Transpose") return Transpose(node, x);
    if (op == "Reshape") return Reshape(node, x);
    if (op == "Flatten") return Flatten(node, x);
    if (op == "Squeeze") return Squeeze(node, x);
    if (op == "Unsqueeze") return Unsqueeze(node, x);
    if (op == "Concat") return Concat(node, x);
    if (op == "Split") return Split(node, x);
    if (op == "Slice") return Slice(node, x);
    if (op == "Gather") return Gather(node, x);
    if (op == "Expand") {
      if (const auto& target = ContentsOf(node, 1)) SetShape(node, 0, Broadcast(x, ToDims(*target)));
      return;
    }
    if (op == "Tile") return Tile(node, x);
    if (op == "Pad") return Pad(node, x);
    if (op.rfind("Reduce", 0) == 0 || op == "ArgMax" || op == "ArgMin") return Reduce(node, x);
    if (op == "ConstantOfShape") {
      if (const auto& target = ContentsOf(node, 0)) SetShape(node, 0, ToDims(*target));
      return;
    }
    if (op == "Resize") {
      // Only from `sizes`: scales round, and what they round to is the kernel's business.
      if (auto sizes = NumbersOf(node, 3); sizes && sizes->size() == x.size()) SetShape(node, 0, FromNumbers(*sizes));
      return;
    }
  }

  void MatMul(const Node& node, const SymbolicShape& a_shape) {
    const auto& b_shape = ShapeOf(node, 1);
    if (!b_shape || a_shape.empty() || b_shape->empty()) return;
    SymbolicShape a = a_shape, b = *b_shape;
    const bool a_vector = a.size() == 1, b_vector = b.size() == 1;
    if (a_vector) a.insert(a.begin(), Known(1));
    if (b_vector) b.push_back(Known(1));
    SymbolicShape out = Broadcast(SymbolicShape(a.begin(), a.end() - 2), SymbolicShape(b.begin(), b.end() - 2));
    if (!a_vector) out.push_back(a[a.size() - 2]);
    if (!b_vector) out.push_back(b.back());
    SetShape(node, 0, out);
  }

  void Gemm(const Node& node, const SymbolicShape& a) {
    const auto& b = ShapeOf(node, 1);
    auto trans_a = node.Int("transA", 0), trans_b = node.Int("transB", 0);
    if (!b || a.size() != 2 || b->size() != 2 || !trans_a.ok() || !trans_b.ok()) return;
    SetShape(node, 0, {a[*trans_a ? 1 : 0], (*b)[*trans_b ? 0 : 1]});
  }

  void Window(const Node& node, const SymbolicShape& x) {
    if (x.size() < 3) return;
    const size_t spatial = x.size() - 2;
    std::vector<int64_t> kernel;
    Dim channels = x[1];
    if (node.op_type == "Conv") {
      const auto& w = ShapeOf(node, 1);
      if (!w || w->size() != x.size()) return;
      channels = (*w)[0];
      auto numbers = DimNumbers(SymbolicShape(w->begin() + 2, w->end()));
      if (!numbers) return;
      kernel = *numbers;
    }
    auto kernel_shape = node.Ints("kernel_shape");
    if (kernel_shape.ok() && !kernel_shape->empty()) kernel = *kernel_shape;
    auto strides = node.Ints("strides", std::vector<int64_t>(spatial, 1));
    auto dilations = node.Ints("dilations", std::vector<int64_t>(spatial, 1));
    auto pads = node.Ints("pads", std::vector<int64_t>(2 * spatial, 0));
    auto auto_pad = node.String("auto_pad", "NOTSET");
    auto ceil_mode = node.Int("ceil_mode", 0);
    if (!strides.ok() || !dilations.ok() || !pads.ok() || !auto_pad.ok() || !ceil_mode.ok() || *ceil_mode != 0) return;
    if (kernel.size() != spatial || strides->size() != spatial || dilations->size() != spatial ||
        pads->size() != 2 * spatial) {
      return;
    }
    SymbolicShape out{x[0], channels};
    for (size_t i = 0; i < spatial; ++i) {
      out.push_back(WindowOutput(x[2 + i], kernel[i], (*strides)[i], (*dilations)[i], (*pads)[i], (*pads)[spatial + i],
                                 *auto_pad));
    }
    SetShape(node, 0, out);
  }

  void Transpose(const Node& node, const SymbolicShape& x) {
    auto perm = node.Ints("perm");
    if (!perm.ok()) return;
    std::vector<int64_t> order = *perm;
    if (order.empty()) {
      for (size_t i = x.size(); i-- > 0;) order.push_back(static_cast<int64_t>(i));
    }
    if (order.size() != x.size()) return;
    SymbolicShape out;
    for (int64_t p : order) {
      if (p < 0 || p >= static_cast<int64_t>(x.size())) return;
      out.push_back(x[static_cast<size_t>(p)]);
    }
    SetShape(node, 0, out);
  }

  void Reshape(const Node& node, const SymbolicShape& x) {
    std::optional<std::vector<SymbolicInt>> target;
    if (graph_.opset < 5) {
      auto shape = node.Ints("shape");
      if (shape.ok()) target = IntsOf(*shape);
    } else {
      target = ContentsOf(node, 1);
    }
    auto allow_zero = node.Int("allowzero", 0);
    if (!target || !allow_zero.ok()) return;
    SymbolicShape out;
    int inferred = -1;
    for (size_t i = 0; i < target->size(); ++i) {
      const SymbolicInt& e = (*target)[i];
      if (e.number == 0 && *allow_zero == 0) {
        if (i >= x.size()) return;
        out.push_back(x[i]);
      } else if (e.number == -1) {
        if (inferred >= 0) return;
        inferred = static_cast<int>(i);
        out.push_back(Dim{});
      } else if (e.number && *e.number < -1) {
        return;
      } else {
        out.push_back(ToDim(e));
      }
    }
    if (inferred >= 0) out[static_cast<size_t>(inferred)] = InferMinusOne(x, out, static_cast<size_t>(inferred));
    SetShape(node, 0, out);
  }

  // Reshape's -1: the input's elements over the other target dims, symbols cancelling.
  static Dim InferMinusOne(const SymbolicShape& in, const SymbolicShape& target, size_t skip) {
    int64_t in_number = 1, target_number = 1;
    std::multiset<std::string> symbols;
    for (const Dim& d : in) {
      if (d.is_known()) {
        in_number *= d.value;
      } else if (!d.symbol.empty()) {
        auto [base, factor] = SplitSymbol(d.symbol);
        symbols.insert(base);
        in_number *= factor;
      } else {
        return Dim{};
      }
    }
    for (size_t i = 0; i < target.size(); ++i) {
      if (i == skip) continue;
      const Dim& d = target[i];
      if (d.is_known()) {
        target_number *= d.value;
        continue;
      }
      auto [base, factor] = SplitSymbol(d.symbol);
      if (d.symbol.empty() || symbols.count(base) == 0) return Dim{};
      symbols.erase(symbols.find(base));
      target_number *= factor;
    }
    if (target_number <= 0 || in_number % target_number != 0) return Dim{};
    const int64_t rest = in_number / target_number;
    if (symbols.empty()) return Known(rest);
    if (symbols.size() == 1) return Symbolic(JoinSymbol(*symbols.begin(), rest));
    return Dim{};
  }

  void Flatten(const Node& node, const SymbolicShape& x) {
    auto axis = node.Int("axis", 1);
    if (!axis.ok()) return;
    int64_t a = *axis < 0 ? *axis + static_cast<int64_t>(x.size()) : *axis;
    if (a < 0 || a > static_cast<int64_t>(x.size())) return;
    SetShape(node, 0, {Product(x.begin(), x.begin() + a), Product(x.begin() + a, x.end())});
  }

  void Squeeze(const Node& node, const SymbolicShape& x) {
    std::optional<std::vector<int64_t>> axes = IntsFrom(node, "axes", 13, 1);
    SymbolicShape out;
    if (!axes) {
      const bool has_axes = graph_.opset < 13 ? node.Has("axes") : node.HasInput(1);
      if (has_axes) return;  // given but not known
      for (const Dim& d : x) {
        if (!d.is_known()) return;  // might be 1
        if (d.value != 1) out.push_back(d);
      }
      return SetShape(node, 0, out);
    }
    std::vector<bool> drop(x.size(), false);
    for (int64_t axis : *axes) {
      if (!Normalize(&axis, x.size())) return;
      drop[static_cast<size_t>(axis)] = true;
    }
    for (size_t i = 0; i < x.size(); ++i) {
      if (!drop[i]) out.push_back(x[i]);
    }
    SetShape(node, 0, out);
  }

  void Unsqueeze(const Node& node, const SymbolicShape& x) {
    auto axes = IntsFrom(node, "axes", 13, 1);
    if (!axes) return;
    const size_t rank = x.size() + axes->size();
    std::vector<bool> added(rank, false);
    for (int64_t axis : *axes) {
      if (!Normalize(&axis, rank) || added[static_cast<size_t>(axis)]) return;
      added[static_cast<size_t>(axis)] = true;
    }
    SymbolicShape out;
    size_t next = 0;
    for (size_t i = 0; i < rank; ++i) out.push_back(added[i] ? Known(1) : x[next++]);
    SetShape(node, 0, out);
  }

  void Concat(const Node& node, const SymbolicShape& x) {
    auto axis_attribute = node.Int("axis", 0);
    int64_t axis = axis_attribute.ok() ? *axis_attribute : 0;
    if (!axis_attribute.ok() || !Normalize(&axis, x.size())) return;
    SymbolicShape out = x;
    int64_t total = 0;
    bool numeric = true;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const auto& s = ShapeOf(node, i);
      if (!s || s->size() != x.size()) return;
      const Dim& d = (*s)[static_cast<size_t>(axis)];
      numeric &= d.is_known();
      if (d.is_known()) total += d.value;
      for (size_t k = 0; k < x.size(); ++k) {
        if (k != static_cast<size_t>(axis) && !out[k].is_known() && (*s)[k].is_known()) out[k] = (*s)[k];
      }
    }
    out[static_cast<size_t>(axis)] = numeric ? Known(total) : Dim{};
    SetShape(node, 0, out);
  }

  void Split(const Node& node, const SymbolicShape& x) {
    auto axis_attribute = node.Int("axis", 0);
    int64_t axis = axis_attribute.ok() ? *axis_attribute : 0;
    if (!axis_attribute.ok() || !Normalize(&axis, x.size())) return;
    const size_t outputs = node.outputs.size();
    std::optional<std::vector<int64_t>> sizes = IntsFrom(node, "split", 13, 1);
    const Dim& d = x[static_cast<size_t>(axis)];
    if (!sizes) {
      const bool given = graph_.opset < 13 ? node.Has("split") : node.HasInput(1);
      if (given || !d.is_known() || d.value % static_cast<int64_t>(outputs) != 0) return;
      sizes = std::vector<int64_t>(outputs, d.value / static_cast<int64_t>(outputs));
    }
    if (sizes->size() != outputs) return;
    for (size_t o = 0; o < outputs; ++o) {
      SymbolicShape out = x;
      out[static_cast<size_t>(axis)] = Known((*sizes)[o]);
      SetShape(node, o, out);
    }
  }

  void Slice(const Node& node, const SymbolicShape& x) {
    std::optional<std::vector<int64_t>> starts, ends, axes, steps;
    if (graph_.opset < 10) {
      auto s = node.Ints("starts"), e = node.Ints("ends"), a = node.Ints("axes");
      if (!s.ok() || !e.ok() || !a.ok()) return;
      starts = *s;
      ends = *e;
      if (!a->empty()) axes = *a;
    } else {
      starts = NumbersOf(node, 1);
      ends = NumbersOf(node, 2);
      if (node.HasInput(3) && !(axes = NumbersOf(node, 3))) return;
      if (node.HasInput(4) && !(steps = NumbersOf(node, 4))) return;
    }
    if (!starts || !ends || starts->size() != ends->size()) return;
    if (!axes) {
      axes = std::vector<int64_t>(starts->size());
      for (size_t i = 0; i < axes->size(); ++i) (*axes)[i] = static_cast<int64_t>(i);
    }
    if (!steps) steps = std::vector<int64_t>(starts->size(), 1);
    if (axes->size() != starts->size() || steps->size() != starts->size()) return;
    SymbolicShape out = x;
    for (size_t i = 0; i < starts->size(); ++i) {
      int64_t axis = (*axes)[i];
      const int64_t step = (*steps)[i];
      if (!Normalize(&axis, x.size()) || step == 0) return;
      const Dim& d = x[static_cast<size_t>(axis)];
      if (!d.is_known()) {
        // The whole of a symbolic dim stays it.
        const bool whole = step == 1 && (*starts)[i] == 0 && (*ends)[i] >= std::numeric_limits<int32_t>::max();
        out[static_cast<size_t>(axis)] = whole ? d : Dim{};
        continue;
      }
      out[static_cast<size_t>(axis)] = Known(SliceLength(d.value, (*starts)[i], (*ends)[i], step));
    }
    SetShape(node, 0, out);
  }

  static int64_t SliceLength(int64_t size, int64_t start, int64_t end, int64_t step) {
    auto clamp = [&](int64_t v, int64_t low, int64_t high) {
      if (v < 0) v += size;
      return std::clamp(v, low, high);
    };
    if (step > 0) {
      start = clamp(start, 0, size);
      end = clamp(end, 0, size);
      return end > start ? (end - start + step - 1) / step : 0;
    }
    start = clamp(start, 0, size - 1);
    end = clamp(end, -1, size - 1);
    return start > end ? (start - end - step - 1) / -step : 0;
  }

  void Gather(const Node& node, const SymbolicShape& x) {
    const auto& indices = ShapeOf(node, 1);
    auto axis_attribute = node.Int("axis", 0);
    int64_t axis = axis_attribute.ok() ? *axis_attribute : 0;
    if (!indices || !axis_attribute.ok() || !Normalize(&axis, x.size())) return;
    SymbolicShape out(x.begin(), x.begin() + axis);
    out.insert(out.end(), indices->begin(), indices->end());
    out.insert(out.end(), x.begin() + axis + 1, x.end());
    SetShape(node, 0, out);
  }

  void Tile(const Node& node, const SymbolicShape& x) {
    auto repeats = NumbersOf(node, 1);
    if (!repeats || repeats->size() != x.size()) return;
    SymbolicShape out = x;
    for (size_t i = 0; i < x.size(); ++i) {
      if ((*repeats)[i] != 1) out[i] = x[i].is_known() ? Known(x[i].value * (*repeats)[i]) : Dim{};
    }
    SetShape(node, 0, out);
  }

  void Pad(const Node& node, const SymbolicShape& x) {
    auto pads = IntsFrom(node, graph_.opset < 2 ? "paddings" : "pads", 11, 1);
    if (!pads || pads->size() != 2 * x.size() || (graph_.opset >= 18 && node.HasInput(3))) return;
    SymbolicShape out = x;
    for (size_t i = 0; i < x.size(); ++i) {
      const int64_t extra = (*pads)[i] + (*pads)[x.size() + i];
      if (extra != 0) out[i] = x[i].is_known() ? Known(x[i].value + extra) : Dim{};
    }
    SetShape(node, 0, out);
  }

  void Reduce(const Node& node, const SymbolicShape& x) {
    const bool arg = node.op_type == "ArgMax" || node.op_type == "ArgMin";
    auto keepdims = node.Int("keepdims", 1);
    if (!keepdims.ok()) return;
    std::optional<std::vector<int64_t>> axes;
    if (arg) {
      auto axis = node.Int("axis", 0);
      if (!axis.ok()) return;
      axes = std::vector<int64_t>{*axis};
    } else if (node.op_type == "ReduceSum" && graph_.opset >= 13) {
      if (node.HasInput(1) && !(axes = NumbersOf(node, 1))) return;
    } else {
      auto a = node.Ints("axes");
      if (!a.ok()) return;
      if (!a->empty()) axes = *a;
    }
    if (axes && axes->empty()) axes.reset();
    if (!axes) {
      auto noop = node.Int("noop_with_empty_axes", 0);
      if (!noop.ok()) return;
      if (*noop != 0) return SetShape(node, 0, x);
    }
    std::vector<bool> reduced(x.size(), !axes);
    if (axes) {
      for (int64_t axis : *axes) {
        if (!Normalize(&axis, x.size())) return;
        reduced[static_cast<size_t>(axis)] = true;
      }
    }
    SymbolicShape out;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!reduced[i]) out.push_back(x[i]);
      else if (*keepdims != 0) out.push_back(Known(1));
    }
    SetShape(node, 0, out);
  }

  // ---- contents of small integer tensors ----

  void InferContents(const Node& node) {
    const std::string& op = node.op_type;
    if (op == "Shape") {
      const auto& x = ShapeOf(node, 0);
      if (!x) return;
      auto start = node.Int("start", 0), end = node.Int("end", static_cast<int64_t>(x->size()));
      if (!start.ok() || !end.ok()) return;
      const auto rank = static_cast<int64_t>(x->size());
      auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
      const int64_t s = clamp(*start), e = clamp(*end);
      std::vector<SymbolicInt> dims;
      for (int64_t i = s; i < e; ++i) dims.push_back(FromDim((*x)[static_cast<size_t>(i)]));
      return SetContents(node, dims, false, DataType::kInt64);
    }
    if (op == "Size") {
      const auto& x = ShapeOf(node, 0);
      if (x) {
        const Dim size = Product(x->begin(), x->end());
        if (size.is_known()) SetContents(node, {FromDim(size)}, true, DataType::kInt64);
      }
      return;
    }
    const auto& first = ContentsOf(node, 0);
    if (!first) return;
    const DataType type = contents_type_[node.inputs[0]];
    const bool scalar = ShapeOf(node, 0) && ShapeOf(node, 0)->empty();
    if (op == "Identity") return SetContents(node, *first, scalar, type);
    if (op == "Cast") {
      auto to = node.Int("to", 0);
      // ONNX's INT64 and INT32.
      if (to.ok() && (*to == 7 || *to == 6)) SetContents(node, *first, scalar, *to == 7 ? DataType::kInt64 : DataType::kInt32);
      return;
    }
    if (op == "Gather") return GatherContents(node, *first, type);
    if (op == "Unsqueeze" && scalar) {
      auto axes = IntsFrom(node, "axes", 13, 1);
      if (axes && axes->size() == 1 && ((*axes)[0] == 0 || (*axes)[0] == -1)) SetContents(node, *first, false, type);
      return;
    }
    if (op == "Squeeze" && !scalar && first->size() == 1) return SetContents(node, *first, true, type);
    if (op == "Concat") {
      std::vector<SymbolicInt> all;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const auto& c = ContentsOf(node, i);
        const auto& s = ShapeOf(node, i);
        if (!c || !s || s->size() != 1) return;
        all.insert(all.end(), c->begin(), c->end());
      }
      return SetContents(node, all, false, type);
    }
    if (op == "Slice" && !scalar && graph_.opset >= 10) return SliceContents(node, *first, type);
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return ArithmeticContents(node, type);
  }

  void GatherContents(const Node& node, const std::vector<SymbolicInt>& data, DataType type) {
    const auto& data_shape = ShapeOf(node, 0);
    auto indices = NumbersOf(node, 1);
    const auto& indices_shape = ShapeOf(node, 1);
    if (!data_shape || data_shape->size() != 1 || !indices || !indices_shape || indices_shape->size() > 1) return;
    std::vector<SymbolicInt> out;
    for (int64_t index : *indices) {
      if (!Normalize(&index, data.size())) return;
      out.push_back(data[static_cast<size_t>(index)]);
    }
    SetContents(node, out, indices_shape->empty(), type);
  }

  void SliceContents(const Node& node, const std::vector<SymbolicInt>& data, DataType type) {
    auto starts = NumbersOf(node, 1), ends = NumbersOf(node, 2);
    std::optional<std::vector<int64_t>> steps;
    if (node.HasInput(3)) {
      auto axes = NumbersOf(node, 3);
      if (!axes || axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1)) return;
    }
    if (node.HasInput(4) && !(steps = NumbersOf(node, 4))) return;
    if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return;
    const int64_t step = steps ? (*steps)[0] : 1;
    if (step == 0) return;
    const auto size = static_cast<int64_t>(data.size());
    int64_t start = (*starts)[0], end = (*ends)[0];
    const int64_t length = SliceLength(size, start, end, step);
    if (start < 0) start += size;
    start = step > 0 ? std::clamp<int64_t>(start, 0, size) : std::clamp<int64_t>(start, 0, size - 1);
    std::vector<SymbolicInt> out;
    for (int64_t i = 0; i < length; ++i) out.push_back(data[static_cast<size_t>(start + i * step)]);
    SetContents(node, out, false, type);
  }

  void ArithmeticContents(const Node& node, DataType type) {
    const auto& a = ContentsOf(node, 0);
    const auto& b = ContentsOf(node, 1);
    const auto& a_shape = ShapeOf(node, 0);
    const auto& b_shape = ShapeOf(node, 1);
    if (!a || !b || !a_shape || !b_shape || contents_type_[node.inputs[1]] != type) return;
    const size_t count = std::max(a->size(), b->size());
    if ((a->size() != count && a->size() != 1) || (b->size() != count && b->size() != 1)) return;
    std::vector<SymbolicInt> out;
    for (size_t i = 0; i < count; ++i) {
      out.push_back(Arithmetic(node.op_type, (*a)[a->size() == 1 ? 0 : i], (*b)[b->size() == 1 ? 0 : i]));
    }
    SetContents(node, out, a_shape->empty() && b_shape->empty(), type);
  }

  // One element of Add/Sub/Mul/Div on shape values: numbers compute (integer division rounds
  // toward zero, as ONNX's Div on integers), a symbol survives scaling and +0.
  static SymbolicInt Arithmetic(const std::string& op, const SymbolicInt& x, const SymbolicInt& y) {
    if (x.number && y.number) {
      if (op == "Add") return {.number = *x.number + *y.number};
      if (op == "Sub") return {.number = *x.number - *y.number};
      if (op == "Mul") return {.number = *x.number * *y.number};
      if (*y.number == 0) return {};
      return {.number = *x.number / *y.number};
    }
    std::optional<std::string> symbol;
    if (!x.symbol.empty() && y.number) {
      if (op == "Mul") symbol = ScaleSymbol(x.symbol, *y.number);
      if (op == "Div") symbol = DivideSymbol(x.symbol, *y.number);
      if ((op == "Add" || op == "Sub") && *y.number == 0) symbol = x.symbol;
    } else if (!y.symbol.empty() && x.number) {
      if (op == "Mul") symbol = ScaleSymbol(y.symbol, *x.number);
      if (op == "Add" && *x.number == 0) symbol = y.symbol;
    }
    return symbol ? SymbolicInt{.symbol = *symbol} : SymbolicInt{};
  }

  const Graph& graph_;
  InferredShapes result_;
  std::vector<DataType>& contents_type_ = result_.contents_type;
};

}  // namespace

bool SameDim(const Dim& a, const Dim& b) {
  if (a.is_known() || b.is_known()) return a.is_known() && b.is_known() && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

std::string DimsToString(const std::vector<Dim>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += ",";
    out += dims[i].is_known() ? std::to_string(dims[i].value) : dims[i].symbol.empty() ? "?" : dims[i].symbol;
  }
  return out + "]";
}

std::string ContentsToString(const std::vector<SymbolicInt>& contents) {
  std::string out = "[";
  for (size_t i = 0; i < contents.size(); ++i) {
    if (i > 0) out += ",";
    out += contents[i].number ? std::to_string(*contents[i].number) : contents[i].symbol.empty() ? "?" : contents[i].symbol;
  }
  return out + "]";
}

std::optional<std::string> ScaleSymbol(const std::string& symbol, int64_t factor) {
  if (symbol.empty() || factor <= 0) return std::nullopt;
  auto [base, own] = SplitSymbol(symbol);
  return JoinSymbol(base, own * factor);
}

std::optional<std::string> DivideSymbol(const std::string& symbol, int64_t divisor) {
  if (symbol.empty() || divisor <= 0) return std::nullopt;
  auto [base, own] = SplitSymbol(symbol);
  if (own % divisor != 0) return std::nullopt;
  return JoinSymbol(base, own / divisor);
}

class ShapeInference::Impl : public Inference {
 public:
  using Inference::Inference;
};

ShapeInference::ShapeInference(const Graph& graph) : impl_(std::make_unique<Impl>(graph)) {}
ShapeInference::~ShapeInference() = default;
void ShapeInference::Infer(const Node& node) { impl_->Infer(node); }
void ShapeInference::AddConstant(ValueId id, const Tensor& tensor) { impl_->Seed(id, tensor); }
const InferredShapes& ShapeInference::result() const { return impl_->result(); }

InferredShapes InferShapes(const Graph& graph) {
  ShapeInference inference(graph);
  for (const Node& node : graph.nodes) inference.Infer(node);
  return inference.result();
}

}  // namespace inferd::runtime
