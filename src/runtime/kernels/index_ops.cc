// Index and selection ops (reference kernels): Trilu, CumSum, OneHot, TopK, GatherND, NonZero,
// EyeLike, Compress. What exporters put around the heavy ops: causal masks (Trilu), position ids
// (CumSum), detection heads (TopK, NonZero, GatherND).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "runtime/ir/onnx_types.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

StatusOr<int64_t> ScalarInt(const Tensor& t, std::string_view what) {
  ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadInts(t, what));
  if (values.size() != 1) return Status::InvalidArgument(std::string(what) + " must hold one value");
  return values[0];
}

// Trilu: the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims; zeros elsewhere.
StatusOr<std::unique_ptr<Kernel>> MakeTrilu(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t upper, node.Int("upper", 1));
  return MakeKernel([upper](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Trilu"));
    const Tensor& x = *in[0];
    if (x.shape.size() < 2) return Status::InvalidArgument("Trilu needs rank 2 or more");
    int64_t k = 0;
    if (const Tensor* offset = InputAt(in, 1)) {
      ASSIGN_OR_RETURN(k, ScalarInt(*offset, "Trilu k"));
    }
    const int64_t rows = x.shape.end()[-2], columns = x.shape.back();
    const int64_t matrices = ElementsOf(x) / std::max<int64_t>(1, rows * columns);
    return DispatchBySize(x.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], x.dtype, x.shape));
      const T* src = ValuesOf<T>(x);
      for (int64_t m = 0; m < matrices; ++m) {
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < columns; ++j) {
            const int64_t at = (m * rows + i) * columns + j;
            const bool keep = upper != 0 ? j - i >= k : j - i <= k;
            dst[at] = keep ? src[at] : T{};
          }
        }
      }
      return Status::Ok();
    });
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeCumSum(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t exclusive, node.Int("exclusive", 0));
  ASSIGN_OR_RETURN(int64_t reverse, node.Int("reverse", 0));
  return MakeKernel([exclusive, reverse](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "CumSum"));
    const Tensor& x = *in[0];
    ASSIGN_OR_RETURN(int64_t axis_value, ScalarInt(*in[1], "CumSum axis"));
    const auto rank = static_cast<int64_t>(x.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_value, rank, "CumSum"));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[d];
    const int64_t length = x.shape[axis];
    return DispatchNumeric(x.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], x.dtype, x.shape));
      const T* src = ValuesOf<T>(x);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          T sum{};
          for (int64_t step = 0; step < length; ++step) {
            const int64_t position = reverse != 0 ? length - 1 - step : step;
            const int64_t at = (o * length + position) * inner + i;
            if (exclusive != 0) {
              dst[at] = sum;
              sum += src[at];
            } else {
              sum += src[at];
              dst[at] = sum;
            }
          }
        }
      }
      return Status::Ok();
    });
  });
}

// OneHot(indices, depth, values=[off, on]): a new dim of `depth` at `axis`, `on` at each index.
StatusOr<std::unique_ptr<Kernel>> MakeOneHot(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", -1));
  return MakeKernel([axis_attribute](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 3, "OneHot"));
    const Tensor& indices_tensor = *in[0];
    ASSIGN_OR_RETURN(double depth_value, ScalarAsDouble(*in[1]));
    const auto depth = static_cast<int64_t>(depth_value);
    if (depth <= 0) return Status::InvalidArgument("OneHot: depth must be positive");
    const Tensor& values = *in[2];
    if (ElementsOf(values) != 2) return Status::InvalidArgument("OneHot: values must be [off, on]");
    std::vector<double> index_values(static_cast<size_t>(ElementsOf(indices_tensor)));
    RETURN_IF_ERROR(DispatchNumeric(indices_tensor.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* data = ValuesOf<T>(indices_tensor);
      for (size_t i = 0; i < index_values.size(); ++i) index_values[i] = static_cast<double>(data[i]);
      return Status::Ok();
    }));
    const auto rank = static_cast<int64_t>(indices_tensor.shape.size()) + 1;
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "OneHot"));
    Shape shape = indices_tensor.shape;
    shape.insert(shape.begin() + axis, depth);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[d];
    return DispatchBySize(values.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], values.dtype, shape));
      const T off = ValuesOf<T>(values)[0], on = ValuesOf<T>(values)[1];
      std::fill(dst, dst + ElementsOf(out[0]), off);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          auto index = static_cast<int64_t>(index_values[static_cast<size_t>(o * inner + i)]);
          if (index < 0) index += depth;
          if (index >= 0 && index < depth) dst[(o * depth + index) * inner + i] = on;
        }
      }
      return Status::Ok();
    });
  });
}

// TopK: the k largest (or smallest) along an axis, ties to the lower index, and their indices.
StatusOr<std::unique_ptr<Kernel>> MakeTopK(const Node& node, int opset) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", -1));
  ASSIGN_OR_RETURN(int64_t largest, node.Int("largest", 1));
  ASSIGN_OR_RETURN(int64_t k_attribute, node.Int("k", -1));  // before opset 10
  return MakeKernel([=](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "TopK"));
    const Tensor& x = *in[0];
    int64_t k = k_attribute;
    if (opset >= 10) {
      RETURN_IF_ERROR(RequireInputs(in, 2, "TopK"));
      ASSIGN_OR_RETURN(k, ScalarInt(*in[1], "TopK k"));
    }
    const auto rank = static_cast<int64_t>(x.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "TopK"));
    const int64_t length = x.shape[axis];
    if (k < 0 || k > length) return Status::InvalidArgument("TopK: k is outside [0, " + std::to_string(length) + "]");
    Shape shape = x.shape;
    shape[axis] = k;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[d];
    return DispatchNumeric(x.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * values, AllocateOutputAs<T>(&out[0], x.dtype, shape));
      int64_t* indices = nullptr;
      if (out.size() > 1) {
        ASSIGN_OR_RETURN(indices, AllocateOutputAs<int64_t>(&out[1], DataType::kInt64, shape));
      }
      const T* src = ValuesOf<T>(x);
      std::vector<int64_t> order(static_cast<size_t>(length));
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          auto at = [&](int64_t position) { return src[(o * length + position) * inner + i]; };
          std::iota(order.begin(), order.end(), 0);
          std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
            if (at(a) != at(b)) return largest != 0 ? at(a) > at(b) : at(a) < at(b);
            return a < b;
          });
          for (int64_t r = 0; r < k; ++r) {
            const int64_t to = (o * k + r) * inner + i;
            values[to] = at(order[static_cast<size_t>(r)]);
            if (indices != nullptr) indices[to] = order[static_cast<size_t>(r)];
          }
        }
      }
      return Status::Ok();
    });
  });
}

// GatherND: each index tuple (the last dim of `indices`) picks a slice of `data`, after
// `batch_dims` leading dims the two share.
StatusOr<std::unique_ptr<Kernel>> MakeGatherND(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t batch_dims, node.Int("batch_dims", 0));
  return MakeKernel([batch_dims](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "GatherND"));
    const Tensor& data = *in[0];
    ASSIGN_OR_RETURN(std::vector<int64_t> indices, ReadInts(*in[1], "GatherND indices"));
    const Shape& index_shape = in[1]->shape;
    const auto b = static_cast<size_t>(batch_dims);
    if (index_shape.empty() || index_shape.size() <= b || data.shape.size() <= b) {
      return Status::InvalidArgument("GatherND: indices and data need rank above batch_dims");
    }
    const auto tuple = static_cast<size_t>(index_shape.back());
    if (tuple > data.shape.size() - b) return Status::InvalidArgument("GatherND: index tuples are longer than data's rank");
    for (size_t d = 0; d < b; ++d) {
      if (index_shape[d] != data.shape[d]) return Status::InvalidArgument("GatherND: batch dims differ");
    }
    Shape shape(index_shape.begin(), index_shape.end() - 1);
    shape.insert(shape.end(), data.shape.begin() + static_cast<int64_t>(b + tuple), data.shape.end());
    int64_t batches = 1, slice = 1;
    for (size_t d = 0; d < b; ++d) batches *= data.shape[d];
    for (size_t d = b + tuple; d < data.shape.size(); ++d) slice *= data.shape[d];
    const int64_t batch_elements = ElementsOf(data) / std::max<int64_t>(1, batches);
    const int64_t tuples = static_cast<int64_t>(indices.size()) / std::max<int64_t>(1, static_cast<int64_t>(tuple)) / batches;
    const std::vector<int64_t> strides = ContiguousStrides(data.shape);
    return DispatchBySize(data.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], data.dtype, shape));
      const T* src = ValuesOf<T>(data);
      for (int64_t batch = 0; batch < batches; ++batch) {
        for (int64_t t = 0; t < tuples; ++t) {
          int64_t offset = batch * batch_elements;
          for (size_t d = 0; d < tuple; ++d) {
            int64_t index = indices[static_cast<size_t>((batch * tuples + t) * static_cast<int64_t>(tuple)) + d];
            const int64_t size = data.shape[b + d];
            if (index < 0) index += size;
            if (index < 0 || index >= size) return Status::InvalidArgument("GatherND: index out of range");
            offset += index * strides[b + d];
          }
          std::copy(src + offset, src + offset + slice, dst + (batch * tuples + t) * slice);
        }
      }
      return Status::Ok();
    });
  });
}

// NonZero: the indices of non-zero elements, one column per element, in row-major order.
StatusOr<std::unique_ptr<Kernel>> MakeNonZero(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "NonZero"));
    const Tensor& x = *in[0];
    std::vector<int64_t> found;
    RETURN_IF_ERROR(DispatchAny(x.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* src = ValuesOf<T>(x);
      for (int64_t i = 0; i < ElementsOf(x); ++i) {
        if (src[i] != T{}) found.push_back(i);
      }
      return Status::Ok();
    }));
    const auto rank = static_cast<int64_t>(x.shape.size());
    const auto count = static_cast<int64_t>(found.size());
    ASSIGN_OR_RETURN(int64_t * dst, AllocateOutputAs<int64_t>(&out[0], DataType::kInt64, {rank, count}));
    const std::vector<int64_t> strides = ContiguousStrides(x.shape);
    for (int64_t j = 0; j < count; ++j) {
      int64_t rest = found[static_cast<size_t>(j)];
      for (int64_t d = 0; d < rank; ++d) {
        dst[d * count + j] = rest / strides[d];
        rest %= strides[d];
      }
    }
    return Status::Ok();
  });
}

// EyeLike: ones on the k-th diagonal of a 2-D shape like the input's, in `dtype` (default the
// input's type).
StatusOr<std::unique_ptr<Kernel>> MakeEyeLike(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t k, node.Int("k", 0));
  ASSIGN_OR_RETURN(int64_t onnx_type, node.Int("dtype", 0));
  std::optional<DataType> dtype;
  if (node.Has("dtype")) {
    dtype = DataTypeFromOnnx(static_cast<int>(onnx_type));
    if (*dtype == DataType::kInvalid) return Status::Unimplemented(node.Describe() + ": unsupported dtype");
  }
  return MakeKernel([k, dtype](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "EyeLike"));
    const Tensor& x = *in[0];
    if (x.shape.size() != 2) return Status::InvalidArgument("EyeLike needs a 2-D input");
    const DataType type = dtype.value_or(x.dtype);
    return DispatchAny(type, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], type, x.shape));
      std::fill(dst, dst + ElementsOf(out[0]), T{});
      for (int64_t i = 0; i < x.shape[0]; ++i) {
        const int64_t j = i + k;
        if (j >= 0 && j < x.shape[1]) dst[i * x.shape[1] + j] = static_cast<T>(1);
      }
      return Status::Ok();
    });
  });
}

// Compress: the slices along `axis` (the flattened input without one) whose condition is true;
// a condition shorter than the axis leaves the rest out.
StatusOr<std::unique_ptr<Kernel>> MakeCompress(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", 0));
  const bool has_axis = node.Has("axis");
  return MakeKernel([axis_attribute, has_axis](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "Compress"));
    Tensor x = *in[0];
    const Tensor& condition = *in[1];
    if (condition.dtype != DataType::kBool) return Status::InvalidArgument("Compress: condition must be BOOL");
    if (!has_axis) x.shape = {ElementsOf(x)};
    const auto rank = static_cast<int64_t>(x.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "Compress"));
    const int64_t length = x.shape[axis];
    if (ElementsOf(condition) > length) return Status::InvalidArgument("Compress: condition is longer than the axis");
    std::vector<int64_t> kept;
    for (int64_t i = 0; i < ElementsOf(condition); ++i) {
      if (ValuesOf<bool>(condition)[i]) kept.push_back(i);
    }
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[d];
    Shape shape = x.shape;
    shape[axis] = static_cast<int64_t>(kept.size());
    return DispatchBySize(x.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], x.dtype, shape));
      const T* src = ValuesOf<T>(x);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t position : kept) {
          const T* from = src + (o * length + position) * inner;
          dst = std::copy(from, from + inner, dst);
        }
      }
      return Status::Ok();
    });
  });
}

}  // namespace

void RegisterIndexKernels(KernelRegistry* r) {
  r->Register("Trilu", 14, MakeTrilu);
  r->Register("CumSum", 11, MakeCumSum);
  r->Register("OneHot", 9, MakeOneHot);
  r->Register("TopK", 1, MakeTopK);
  r->Register("GatherND", 11, MakeGatherND);
  r->Register("NonZero", 9, MakeNonZero);
  r->Register("EyeLike", 9, MakeEyeLike);
  r->Register("Compress", 9, MakeCompress);
}

}  // namespace inferd::runtime
