// Kernels that move elements without arithmetic: shape queries, reshapes (zero copy), transposes,
// slicing, gathering, concatenation, padding, constants.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/ir/onnx_types.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/strided_view.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;


// out[i...] = in[offset + sum(i_k * strides_k)] for every index of out_shape.
Status GatherStrided(const Tensor& in, int64_t offset, const std::vector<int64_t>& strides, const Shape& out_shape,
                     Tensor* out) {
  ASSIGN_OR_RETURN(uint8_t * raw, AllocateOutput(out, in.dtype, out_shape));
  return DispatchBySize(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = ValuesOf<T>(in) + offset;
    T* dst = reinterpret_cast<T*>(raw);
    int64_t i = 0;
    ForEachIndex<1>(out_shape, std::array<std::vector<int64_t>, 1>{strides},
                    [&](const std::array<int64_t, 1>& at) { dst[i++] = src[at[0]]; });
    return Status::Ok();
  });
}

// ---- Shape, Size, Identity, Dropout, Constant ----

StatusOr<std::unique_ptr<Kernel>> MakeShape(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t start, node.Int("start", 0));
  const bool has_end = node.Has("end");
  ASSIGN_OR_RETURN(int64_t end, node.Int("end", 0));
  return MakeKernel([start, end, has_end](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Shape"));
    const int64_t rank = static_cast<int64_t>(in[0]->shape.size());
    auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
    const int64_t from = clamp(start);
    const int64_t to = has_end ? clamp(end) : rank;
    const int64_t count = std::max<int64_t>(0, to - from);
    ASSIGN_OR_RETURN(int64_t * dst, AllocateOutputAs<int64_t>(&out[0], DataType::kInt64, {count}));
    for (int64_t i = 0; i < count; ++i) dst[i] = in[0]->shape[from + i];
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeSize(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Size"));
    ASSIGN_OR_RETURN(int64_t * dst, AllocateOutputAs<int64_t>(&out[0], DataType::kInt64, {}));
    *dst = ElementsOf(*in[0]);
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeIdentity(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Identity"));
    out[0] = *in[0];
    return Status::Ok();
  });
}

// Inference mode: the input passes through; the optional mask is all true.
StatusOr<std::unique_ptr<Kernel>> MakeDropout(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Dropout"));
    // Training mode drops nothing when the ratio is 0 (PyTorch exports attention dropout so).
    const Tensor* training = InputAt(in, 2);
    const Tensor* ratio = InputAt(in, 1);
    if (training != nullptr && ElementsOf(*training) > 0 && ValuesOf<bool>(*training)[0]) {
      double drop = 0.5;  // the default ratio
      if (ratio != nullptr) {
        ASSIGN_OR_RETURN(drop, ScalarAsDouble(*ratio));
      }
      if (drop != 0) return Status::Unimplemented("Dropout in training mode is not supported (inference only)");
    }
    out[0] = *in[0];
    if (out.size() > 1) {
      ASSIGN_OR_RETURN(bool* mask, AllocateOutputAs<bool>(&out[1], DataType::kBool, in[0]->shape));
      std::fill_n(mask, ElementsOf(*in[0]), true);
    }
    return Status::Ok();
  });
}

StatusOr<Tensor> ScalarOrListTensor(const Node& node) {
  Tensor t;
  if (const Attribute* a = node.Find("value")) {
    if (a->kind != Attribute::Kind::kTensor) return Status::InvalidArgument(node.Describe() + ": value must be a tensor");
    return a->t;
  }
  if (const Attribute* a = node.Find("value_float")) {
    ASSIGN_OR_RETURN(float* v, AllocateOutputAs<float>(&t, DataType::kFp32, {}));
    *v = a->f;
  } else if (const Attribute* a = node.Find("value_floats")) {
    ASSIGN_OR_RETURN(float* v, AllocateOutputAs<float>(&t, DataType::kFp32, {static_cast<int64_t>(a->floats.size())}));
    std::copy(a->floats.begin(), a->floats.end(), v);
  } else if (const Attribute* a = node.Find("value_int")) {
    ASSIGN_OR_RETURN(int64_t * v, AllocateOutputAs<int64_t>(&t, DataType::kInt64, {}));
    *v = a->i;
  } else if (const Attribute* a = node.Find("value_ints")) {
    ASSIGN_OR_RETURN(int64_t * v, AllocateOutputAs<int64_t>(&t, DataType::kInt64, {static_cast<int64_t>(a->ints.size())}));
    std::copy(a->ints.begin(), a->ints.end(), v);
  } else {
    return Status::Unimplemented(node.Describe() + ": only value, value_float(s) and value_int(s) are supported");
  }
  return t;
}

StatusOr<std::unique_ptr<Kernel>> MakeConstant(const Node& node, int) {
  ASSIGN_OR_RETURN(Tensor value, ScalarOrListTensor(node));
  return MakeKernel([value](Inputs, Outputs out) -> Status {
    out[0] = value;
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeConstantOfShape(const Node& node, int) {
  Tensor value;
  if (const Attribute* a = node.Find("value")) {
    value = a->t;
  } else {
    ASSIGN_OR_RETURN(float* v, AllocateOutputAs<float>(&value, DataType::kFp32, {1}));
    *v = 0;
  }
  return MakeKernel([value](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "ConstantOfShape"));
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(*in[0], "ConstantOfShape shape"));
    ASSIGN_OR_RETURN(uint8_t * raw, AllocateOutput(&out[0], value.dtype, shape));
    const size_t size = DataTypeSize(value.dtype);
    for (int64_t i = 0; i < ElementsOf(out[0]); ++i) std::memcpy(raw + i * size, value.data.get(), size);
    return Status::Ok();
  });
}

// ---- Reshape family (zero copy) ----

StatusOr<std::unique_ptr<Kernel>> MakeReshape(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t allowzero, node.Int("allowzero", 0));
  return MakeKernel([allowzero](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "Reshape"));
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(*in[1], "Reshape shape"));
    int64_t known = 1;
    int inferred = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && !allowzero) {
        if (i >= in[0]->shape.size()) return Status::InvalidArgument("Reshape: 0 refers to a missing input dim");
        shape[i] = in[0]->shape[i];
      }
      if (shape[i] == -1) {
        if (inferred >= 0) return Status::InvalidArgument("Reshape: more than one -1 in the shape");
        inferred = static_cast<int>(i);
      } else if (shape[i] < 0) {
        return Status::InvalidArgument("Reshape: negative dim " + std::to_string(shape[i]));
      } else {
        known *= shape[i];
      }
    }
    const int64_t total = ElementsOf(*in[0]);
    if (inferred >= 0) {
      if (known == 0 || total % known != 0) return Status::InvalidArgument("Reshape: cannot infer the -1 dim");
      shape[inferred] = total / known;
    } else if (known != total) {
      return Status::InvalidArgument("Reshape: " + ShapeToString(in[0]->shape) + " cannot become " + ShapeToString(shape));
    }
    AliasOutput(&out[0], *in[0], shape);
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeFlatten(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis, node.Int("axis", 1));
  return MakeKernel([axis](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Flatten"));
    const int64_t rank = static_cast<int64_t>(in[0]->shape.size());
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a > rank) return Status::InvalidArgument("Flatten: axis out of range");
    int64_t outer = 1;
    for (int64_t i = 0; i < a; ++i) outer *= in[0]->shape[i];
    int64_t inner = 1;
    for (int64_t i = a; i < rank; ++i) inner *= in[0]->shape[i];
    AliasOutput(&out[0], *in[0], {outer, inner});
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeSqueeze(const Node& node, int opset) {
  ASSIGN_OR_RETURN(std::vector<int64_t> attribute_axes, node.Ints("axes"));
  return MakeKernel([opset, attribute_axes](Inputs in, Outputs out) mutable -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Squeeze"));
    std::vector<int64_t> axes = attribute_axes;
    if (opset >= 13 && InputAt(in, 1) != nullptr) {
      ASSIGN_OR_RETURN(axes, ReadInts(*in[1], "Squeeze axes"));
    }
    const Shape& shape = in[0]->shape;
    const int64_t rank = static_cast<int64_t>(shape.size());
    std::vector<bool> drop(shape.size(), false);
    if (axes.empty()) {
      for (size_t i = 0; i < shape.size(); ++i) drop[i] = shape[i] == 1;
    }
    for (int64_t axis : axes) {
      ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axis, rank, "Squeeze"));
      if (shape[a] != 1) return Status::InvalidArgument("Squeeze: dim " + std::to_string(a) + " is not 1");
      drop[a] = true;
    }
    Shape result;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (!drop[i]) result.push_back(shape[i]);
    }
    AliasOutput(&out[0], *in[0], result);
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeUnsqueeze(const Node& node, int opset) {
  ASSIGN_OR_RETURN(std::vector<int64_t> attribute_axes, node.Ints("axes"));
  return MakeKernel([opset, attribute_axes](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Unsqueeze"));
    std::vector<int64_t> axes = attribute_axes;
    if (opset >= 13) {
      RETURN_IF_ERROR(RequireInputs(in, 2, "Unsqueeze"));
      ASSIGN_OR_RETURN(axes, ReadInts(*in[1], "Unsqueeze axes"));
    }
    const int64_t rank = static_cast<int64_t>(in[0]->shape.size() + axes.size());
    std::vector<bool> inserted(static_cast<size_t>(rank), false);
    for (int64_t axis : axes) {
      ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axis, rank, "Unsqueeze"));
      if (inserted[a]) return Status::InvalidArgument("Unsqueeze: axis repeated");
      inserted[a] = true;
    }
    Shape result;
    size_t next = 0;
    for (int64_t i = 0; i < rank; ++i) result.push_back(inserted[i] ? 1 : in[0]->shape[next++]);
    AliasOutput(&out[0], *in[0], result);
    return Status::Ok();
  });
}

// ---- Transpose, Expand, Tile ----

StatusOr<std::unique_ptr<Kernel>> MakeTranspose(const Node& node, int) {
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, node.Ints("perm"));
  return MakeKernel([perm](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Transpose"));
    ASSIGN_OR_RETURN(StridedView view, TransposeView(in[0]->shape, perm));
    return GatherStrided(*in[0], view.offset, view.strides, view.shape, &out[0]);
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeExpand(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "Expand"));
    ASSIGN_OR_RETURN(std::vector<int64_t> target, ReadInts(*in[1], "Expand shape"));
    ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(in[0]->shape, target));
    return GatherStrided(*in[0], 0, BroadcastStrides(in[0]->shape, shape), shape, &out[0]);
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeTile(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "Tile"));
    ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ReadInts(*in[1], "Tile repeats"));
    const Shape& shape = in[0]->shape;
    if (repeats.size() != shape.size()) return Status::InvalidArgument("Tile: repeats must have one entry per dim");
    // View the output as [r0, d0, r1, d1, ...] with stride 0 on each repeat dim.
    Shape view;
    std::vector<int64_t> strides;
    std::vector<int64_t> own = ContiguousStrides(shape);
    Shape out_shape;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (repeats[i] < 0) return Status::InvalidArgument("Tile: negative repeat");
      view.push_back(repeats[i]);
      strides.push_back(0);
      view.push_back(shape[i]);
      strides.push_back(own[i]);
      out_shape.push_back(shape[i] * repeats[i]);
    }
    RETURN_IF_ERROR(GatherStrided(*in[0], 0, strides, view, &out[0]));
    out[0].shape = out_shape;
    return Status::Ok();
  });
}

// ---- Concat, Split, Slice ----

StatusOr<std::unique_ptr<Kernel>> MakeConcat(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", 0));
  return MakeKernel([axis_attribute](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Concat"));
    const Tensor& first = *in[0];
    const int64_t rank = static_cast<int64_t>(first.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "Concat"));
    Shape shape = first.shape;
    shape[axis] = 0;
    for (const Tensor* t : in) {
      if (t->dtype != first.dtype || static_cast<int64_t>(t->shape.size()) != rank) {
        return Status::InvalidArgument("Concat: inputs differ in type or rank");
      }
      for (int64_t d = 0; d < rank; ++d) {
        if (d != axis && t->shape[d] != first.shape[d]) return Status::InvalidArgument("Concat: inputs differ in shape");
      }
      shape[axis] += t->shape[axis];
    }
    ASSIGN_OR_RETURN(uint8_t * dst, AllocateOutput(&out[0], first.dtype, shape));
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    int64_t inner = static_cast<int64_t>(DataTypeSize(first.dtype));
    for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[d];
    const int64_t out_row = shape[axis] * inner;
    int64_t column = 0;
    for (const Tensor* t : in) {
      const int64_t row = t->shape[axis] * inner;
      for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * out_row + column, t->data.get() + o * row, row);
      column += row;
    }
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeSplit(const Node& node, int opset) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> split_attribute, node.Ints("split"));
  return MakeKernel([axis_attribute, split_attribute, opset](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Split"));
    const Tensor& input = *in[0];
    const int64_t rank = static_cast<int64_t>(input.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "Split"));
    std::vector<int64_t> split = split_attribute;
    if (opset >= 13 && InputAt(in, 1) != nullptr) {
      ASSIGN_OR_RETURN(split, ReadInts(*in[1], "Split split"));
    }
    const int64_t dim = input.shape[axis];
    const int64_t parts = static_cast<int64_t>(out.size());
    if (split.empty()) {
      // Equal parts; the last one smaller when the dim does not divide (opset 18 semantics).
      const int64_t size = (dim + parts - 1) / parts;
      for (int64_t p = 0; p < parts; ++p) split.push_back(std::min(size, dim - p * size));
    }
    if (static_cast<int64_t>(split.size()) != parts || std::accumulate(split.begin(), split.end(), int64_t{0}) != dim) {
      return Status::InvalidArgument("Split: sizes do not add up to the dim");
    }
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= input.shape[d];
    int64_t inner = static_cast<int64_t>(DataTypeSize(input.dtype));
    for (int64_t d = axis + 1; d < rank; ++d) inner *= input.shape[d];
    int64_t column = 0;
    for (int64_t p = 0; p < parts; ++p) {
      Shape shape = input.shape;
      shape[axis] = split[p];
      ASSIGN_OR_RETURN(uint8_t * dst, AllocateOutput(&out[p], input.dtype, shape));
      const int64_t row = split[p] * inner;
      for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * row, input.data.get() + o * dim * inner + column, row);
      column += row;
    }
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeSlice(const Node& node, int opset) {
  ASSIGN_OR_RETURN(SliceAttributes attributes, ReadSliceAttributes(node));
  return MakeKernel([attributes, opset](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Slice"));
    ASSIGN_OR_RETURN(StridedView view, SliceView(in, opset, attributes));
    for (int64_t d : view.shape) {
      if (d == 0) return AllocateOutput(&out[0], in[0]->dtype, view.shape).status();
    }
    return GatherStrided(*in[0], view.offset, view.strides, view.shape, &out[0]);
  });
}

// ---- Gather, GatherElements ----

StatusOr<std::unique_ptr<Kernel>> MakeGather(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", 0));
  return MakeKernel([axis_attribute](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "Gather"));
    const Tensor& data = *in[0];
    const int64_t rank = static_cast<int64_t>(data.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "Gather"));
    ASSIGN_OR_RETURN(std::vector<int64_t> indices, ReadInts(*in[1], "Gather indices"));
    Shape shape(data.shape.begin(), data.shape.begin() + axis);
    shape.insert(shape.end(), in[1]->shape.begin(), in[1]->shape.end());
    shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
    ASSIGN_OR_RETURN(uint8_t * dst, AllocateOutput(&out[0], data.dtype, shape));
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= data.shape[d];
    int64_t inner = static_cast<int64_t>(DataTypeSize(data.dtype));
    for (int64_t d = axis + 1; d < rank; ++d) inner *= data.shape[d];
    const int64_t dim = data.shape[axis];
    for (int64_t& index : indices) {
      if (index < -dim || index >= dim) return Status::InvalidArgument("Gather: index " + std::to_string(index) + " out of range");
      if (index < 0) index += dim;
    }
    const int64_t count = static_cast<int64_t>(indices.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < count; ++k) {
        std::memcpy(dst + (o * count + k) * inner, data.data.get() + (o * dim + indices[k]) * inner, inner);
      }
    }
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeGatherElements(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", 0));
  return MakeKernel([axis_attribute](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "GatherElements"));
    const Tensor& data = *in[0];
    const int64_t rank = static_cast<int64_t>(data.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "GatherElements"));
    ASSIGN_OR_RETURN(std::vector<int64_t> indices, ReadInts(*in[1], "GatherElements indices"));
    const Shape& shape = in[1]->shape;
    if (static_cast<int64_t>(shape.size()) != rank) return Status::InvalidArgument("GatherElements: rank mismatch");
    std::vector<int64_t> data_strides = ContiguousStrides(data.shape);
    std::vector<int64_t> strides = data_strides;
    strides[axis] = 0;  // the index along `axis` comes from `indices`
    return DispatchBySize(data.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], data.dtype, shape));
      const T* src = ValuesOf<T>(data);
      const int64_t dim = data.shape[axis];
      int64_t i = 0;
      Status status;
      ForEachIndex<1>(shape, std::array<std::vector<int64_t>, 1>{strides}, [&](const std::array<int64_t, 1>& at) {
        int64_t index = indices[i];
        if (index < 0) index += dim;
        if (index < 0 || index >= dim) {
          status = Status::InvalidArgument("GatherElements: index out of range");
          index = 0;
        }
        dst[i++] = src[at[0] + index * data_strides[axis]];
      });
      return status;
    });
  });
}

// ---- ScatterND, ScatterElements: a copy of data with some elements replaced (or added/multiplied) ----

enum class Reduction { kNone, kAdd, kMul };

StatusOr<Reduction> ReadReduction(const Node& node) {
  ASSIGN_OR_RETURN(std::string reduction, node.String("reduction", "none"));
  if (reduction == "none") return Reduction::kNone;
  if (reduction == "add") return Reduction::kAdd;
  if (reduction == "mul") return Reduction::kMul;
  return Status::Unimplemented(node.Describe() + ": reduction '" + reduction + "' is not supported");
}

template <typename T>
void Combine(T* target, T value, Reduction reduction) {
  if (reduction == Reduction::kAdd) *target = static_cast<T>(*target + value);
  else if (reduction == Reduction::kMul) *target = static_cast<T>(*target * value);
  else *target = value;
}

StatusOr<std::unique_ptr<Kernel>> MakeScatterND(const Node& node, int) {
  ASSIGN_OR_RETURN(Reduction reduction, ReadReduction(node));
  return MakeKernel([reduction](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 3, "ScatterND"));
    const Tensor &data = *in[0], &updates = *in[2];
    ASSIGN_OR_RETURN(std::vector<int64_t> indices, ReadInts(*in[1], "ScatterND indices"));
    const Shape& index_shape = in[1]->shape;
    if (index_shape.empty()) return Status::InvalidArgument("ScatterND: indices must have rank >= 1");
    const size_t k = static_cast<size_t>(index_shape.back());
    if (k > data.shape.size()) return Status::InvalidArgument("ScatterND: index tuples longer than the data rank");
    int64_t slice = 1;
    for (size_t d = k; d < data.shape.size(); ++d) slice *= data.shape[d];
    const int64_t tuples = k == 0 ? ElementsOf(*in[1]) : static_cast<int64_t>(indices.size() / k);
    if (updates.dtype != data.dtype || ElementsOf(updates) != tuples * slice) {
      return Status::InvalidArgument("ScatterND: updates do not match indices and data");
    }
    std::vector<int64_t> strides = ContiguousStrides(data.shape);
    return DispatchAny(data.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], data.dtype, data.shape));
      std::copy_n(ValuesOf<T>(data), ElementsOf(data), dst);
      const T* src = ValuesOf<T>(updates);
      for (int64_t t = 0; t < tuples; ++t) {
        int64_t offset = 0;
        for (size_t d = 0; d < k; ++d) {
          int64_t index = indices[t * k + d];
          if (index < 0) index += data.shape[d];
          if (index < 0 || index >= data.shape[d]) return Status::InvalidArgument("ScatterND: index out of range");
          offset += index * strides[d];
        }
        for (int64_t i = 0; i < slice; ++i) Combine(dst + offset + i, src[t * slice + i], reduction);
      }
      return Status::Ok();
    });
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeScatterElements(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", 0));
  ASSIGN_OR_RETURN(Reduction reduction, ReadReduction(node));
  return MakeKernel([axis_attribute, reduction](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 3, "ScatterElements"));
    const Tensor &data = *in[0], &updates = *in[2];
    const int64_t rank = static_cast<int64_t>(data.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "ScatterElements"));
    ASSIGN_OR_RETURN(std::vector<int64_t> indices, ReadInts(*in[1], "ScatterElements indices"));
    const Shape& shape = in[1]->shape;
    if (updates.shape != shape || updates.dtype != data.dtype || static_cast<int64_t>(shape.size()) != rank) {
      return Status::InvalidArgument("ScatterElements: indices, updates and data do not match");
    }
    std::vector<int64_t> strides = ContiguousStrides(data.shape);
    std::vector<int64_t> walk = strides;
    walk[axis] = 0;  // the position along `axis` comes from indices
    return DispatchAny(data.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], data.dtype, data.shape));
      std::copy_n(ValuesOf<T>(data), ElementsOf(data), dst);
      const T* src = ValuesOf<T>(updates);
      const int64_t dim = data.shape[axis];
      int64_t i = 0;
      Status status;
      ForEachIndex<1>(shape, std::array<std::vector<int64_t>, 1>{walk}, [&](const std::array<int64_t, 1>& at) {
        int64_t index = indices[i];
        if (index < 0) index += dim;
        if (index < 0 || index >= dim) {
          status = Status::InvalidArgument("ScatterElements: index out of range");
        } else {
          Combine(dst + at[0] + index * strides[axis], src[i], reduction);
        }
        ++i;
      });
      return status;
    });
  });
}

// ---- Range, Pad, DepthToSpace, SpaceToDepth ----

StatusOr<std::unique_ptr<Kernel>> MakeRange(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 3, "Range"));
    return DispatchNumeric(in[0]->dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T start = ValuesOf<T>(*in[0])[0], limit = ValuesOf<T>(*in[1])[0], delta = ValuesOf<T>(*in[2])[0];
      if (delta == 0) return Status::InvalidArgument("Range: delta is 0");
      const int64_t count = std::max<int64_t>(
          0, static_cast<int64_t>(std::ceil((static_cast<double>(limit) - start) / static_cast<double>(delta))));
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], in[0]->dtype, {count}));
      for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<T>(start + static_cast<T>(i) * delta);
      return Status::Ok();
    });
  });
}

// Constant padding without cropping: the fill everywhere, then each innermost row of the input
// copied whole into place (the general loop below divides per element).
template <typename T>
void CopyIntoPadded(const T* src, const Shape& in_shape, const std::vector<int64_t>& pads, T fill, T* dst,
                    const Shape& out_shape) {
  const int64_t rank = static_cast<int64_t>(in_shape.size());
  std::fill(dst, dst + ElementsOf(Tensor{.shape = out_shape}), fill);
  const int64_t row = in_shape[rank - 1];
  if (row == 0) return;
  const std::vector<int64_t> out_strides = ContiguousStrides(out_shape);
  std::vector<int64_t> index(rank - 1, 0);
  const int64_t rows = ElementsOf(Tensor{.shape = in_shape}) / row;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = pads[rank - 1];
    for (int64_t d = 0; d + 1 < rank; ++d) offset += (index[d] + pads[d]) * out_strides[d];
    std::copy(src + r * row, src + (r + 1) * row, dst + offset);
    for (int64_t d = rank - 2; d >= 0 && ++index[d] == in_shape[d]; --d) index[d] = 0;
  }
}

StatusOr<std::unique_ptr<Kernel>> MakePad(const Node& node, int opset) {
  ASSIGN_OR_RETURN(std::string mode, node.String("mode", "constant"));
  std::vector<int64_t> pads_attribute;
  if (opset < 11) {
    ASSIGN_OR_RETURN(pads_attribute, node.Ints("pads"));
  }
  ASSIGN_OR_RETURN(float value_attribute, node.Float("value", 0.0f));
  if (mode != "constant" && mode != "reflect" && mode != "edge") {
    return Status::Unimplemented(node.Describe() + ": Pad mode '" + mode + "' is not supported");
  }
  return MakeKernel([=](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Pad"));
    const Tensor& data = *in[0];
    const int64_t rank = static_cast<int64_t>(data.shape.size());
    std::vector<int64_t> pads = pads_attribute;
    if (opset >= 11) {
      RETURN_IF_ERROR(RequireInputs(in, 2, "Pad"));
      ASSIGN_OR_RETURN(pads, ReadInts(*in[1], "Pad pads"));
    }
    if (static_cast<int64_t>(pads.size()) != 2 * rank) {
      // Opset 18 adds `axes`; older models always give 2 * rank pads.
      return Status::InvalidArgument("Pad: pads must have 2 * rank entries");
    }
    Shape shape = data.shape;
    for (int64_t d = 0; d < rank; ++d) {
      shape[d] += pads[d] + pads[d + rank];
      if (shape[d] < 0) return Status::InvalidArgument("Pad: negative output dim");
    }
    return DispatchAny(data.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T fill = static_cast<T>(value_attribute);
      if (opset >= 11 && InputAt(in, 2) != nullptr && ElementsOf(*in[2]) > 0) fill = ValuesOf<T>(*in[2])[0];
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], data.dtype, shape));
      const T* src = ValuesOf<T>(data);
      const bool growing = std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p >= 0; });
      if (mode == "constant" && growing && rank > 0) {
        CopyIntoPadded(src, data.shape, pads, fill, dst, shape);
        return Status::Ok();
      }
      std::vector<int64_t> strides = ContiguousStrides(data.shape);
      const int64_t total = ElementsOf(out[0]);
      for (int64_t i = 0; i < total; ++i) {
        int64_t rest = i, offset = 0;
        bool inside = true;
        for (int64_t d = rank - 1; d >= 0; --d) {
          int64_t coordinate = rest % shape[d] - pads[d];
          rest /= shape[d];
          const int64_t dim = data.shape[d];
          if (coordinate < 0 || coordinate >= dim) {
            if (mode == "constant" || dim == 0) {
              inside = false;
              break;
            }
            if (mode == "edge") {
              coordinate = std::clamp<int64_t>(coordinate, 0, dim - 1);
            } else {  // reflect, without repeating the edge
              const int64_t period = std::max<int64_t>(1, 2 * (dim - 1));
              coordinate = ((coordinate % period) + period) % period;
              if (coordinate >= dim) coordinate = period - coordinate;
            }
          }
          offset += coordinate * strides[d];
        }
        dst[i] = inside ? src[offset] : fill;
      }
      return Status::Ok();
    });
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeDepthSpace(const Node& node, bool to_space) {
  ASSIGN_OR_RETURN(int64_t block, node.Int("blocksize", 0));
  ASSIGN_OR_RETURN(std::string mode, node.String("mode", "DCR"));
  if (block <= 0) return Status::InvalidArgument(node.Describe() + ": blocksize must be positive");
  return MakeKernel([block, mode, to_space](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "DepthToSpace/SpaceToDepth"));
    const Shape& s = in[0]->shape;
    if (s.size() != 4) return Status::InvalidArgument("DepthToSpace/SpaceToDepth needs NCHW input");
    const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
    if (to_space) {
      if (c % (block * block)) return Status::InvalidArgument("DepthToSpace: channels not divisible");
      const int64_t oc = c / (block * block);
      // View input as 6-D, permute, reshape.
      Shape view = mode == "DCR" ? Shape{n, block, block, oc, h, w} : Shape{n, oc, block, block, h, w};
      std::vector<int64_t> vs = ContiguousStrides(view);
      // Output order: n, oc, h, b1, w, b2.
      std::vector<int64_t> strides = mode == "DCR" ? std::vector<int64_t>{vs[0], vs[3], vs[4], vs[1], vs[5], vs[2]}
                                                   : std::vector<int64_t>{vs[0], vs[1], vs[4], vs[2], vs[5], vs[3]};
      RETURN_IF_ERROR(GatherStrided(*in[0], 0, strides, {n, oc, h, block, w, block}, &out[0]));
      out[0].shape = {n, oc, h * block, w * block};
    } else {
      if (h % block || w % block) return Status::InvalidArgument("SpaceToDepth: spatial dims not divisible");
      const int64_t oh = h / block, ow = w / block;
      Shape view{n, c, oh, block, ow, block};
      std::vector<int64_t> vs = ContiguousStrides(view);
      // Output order: n, b1, b2, c, oh, ow.
      RETURN_IF_ERROR(GatherStrided(*in[0], 0, {vs[0], vs[3], vs[5], vs[1], vs[2], vs[4]},
                                    {n, block, block, c, oh, ow}, &out[0]));
      out[0].shape = {n, c * block * block, oh, ow};
    }
    return Status::Ok();
  });
}

}  // namespace

StatusOr<StridedView> TransposeView(const Shape& shape, std::vector<int64_t> perm) {
  if (perm.empty()) {
    perm.resize(shape.size());
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  if (perm.size() != shape.size()) return Status::InvalidArgument("Transpose: perm does not match the rank");
  const std::vector<int64_t> in_strides = ContiguousStrides(shape);
  StridedView view;
  view.shape.resize(shape.size());
  view.strides.resize(shape.size());
  std::vector<bool> seen(shape.size(), false);
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(shape.size()) || seen[perm[i]]) {
      return Status::InvalidArgument("Transpose: perm is not a permutation");
    }
    seen[perm[i]] = true;
    view.shape[i] = shape[perm[i]];
    view.strides[i] = in_strides[perm[i]];
  }
  return view;
}

StatusOr<SliceAttributes> ReadSliceAttributes(const Node& node) {
  SliceAttributes attributes;
  ASSIGN_OR_RETURN(attributes.starts, node.Ints("starts"));
  ASSIGN_OR_RETURN(attributes.ends, node.Ints("ends"));
  ASSIGN_OR_RETURN(attributes.axes, node.Ints("axes"));
  return attributes;
}

StatusOr<StridedView> SliceView(std::span<const Tensor* const> in, int opset, const SliceAttributes& attributes) {
  std::vector<int64_t> starts = attributes.starts, ends = attributes.ends, axes = attributes.axes, steps;
  if (opset >= 10) {
    RETURN_IF_ERROR(RequireInputs(in, 3, "Slice"));
    ASSIGN_OR_RETURN(starts, ReadInts(*in[1], "Slice starts"));
    ASSIGN_OR_RETURN(ends, ReadInts(*in[2], "Slice ends"));
    axes.clear();
    if (InputAt(in, 3)) {
      ASSIGN_OR_RETURN(axes, ReadInts(*in[3], "Slice axes"));
    }
    if (InputAt(in, 4)) {
      ASSIGN_OR_RETURN(steps, ReadInts(*in[4], "Slice steps"));
    }
  }
  const Shape& shape = in[0]->shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return Status::InvalidArgument("Slice: starts, ends, axes and steps differ in length");
  }
  const std::vector<int64_t> in_strides = ContiguousStrides(shape);
  StridedView view{0, in_strides, shape};
  for (size_t i = 0; i < starts.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axes[i], rank, "Slice"));
    const int64_t dim = shape[axis];
    const int64_t step = steps[i];
    if (step == 0) return Status::InvalidArgument("Slice: step 0");
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      view.shape[axis] = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      view.shape[axis] = start > end ? (start - end - step - 1) / -step : 0;
    }
    view.offset += start * in_strides[axis];
    view.strides[axis] = in_strides[axis] * step;
  }
  return view;
}

void RegisterShapeKernels(KernelRegistry* r) {
  r->Register("Shape", 1, MakeShape);
  r->Register("Size", 1, MakeSize);
  r->Register("Identity", 1, MakeIdentity);
  r->Register("Dropout", 7, MakeDropout);
  r->Register("Constant", 1, MakeConstant);
  r->Register("ConstantOfShape", 9, MakeConstantOfShape);
  r->Register("Reshape", 5, MakeReshape);
  r->Register("Flatten", 1, MakeFlatten);
  r->Register("Squeeze", 1, MakeSqueeze);
  r->Register("Unsqueeze", 1, MakeUnsqueeze);
  r->Register("Transpose", 1, MakeTranspose);
  r->Register("Expand", 8, MakeExpand);
  r->Register("Tile", 6, MakeTile);
  r->Register("Concat", 4, MakeConcat);
  r->Register("Split", 2, MakeSplit);
  r->Register("Slice", 1, MakeSlice);
  r->Register("Gather", 1, MakeGather);
  r->Register("GatherElements", 11, MakeGatherElements);
  r->Register("Range", 11, MakeRange);
  r->Register("ScatterND", 11, MakeScatterND);
  r->Register("ScatterElements", 11, MakeScatterElements);
  r->Register("Scatter", 9, MakeScatterElements);  // ScatterElements' name in opsets 9-10
  r->Register("Pad", 2, MakePad);
  r->Register("DepthToSpace", 1, [](const Node& n, int) { return MakeDepthSpace(n, true); });
  r->Register("SpaceToDepth", 1, [](const Node& n, int) { return MakeDepthSpace(n, false); });
}

}  // namespace inferd::runtime
