// Index and selection ops (reference kernels): Trilu, CumSum, OneHot, TopK, GatherND, NonZero,
// EyeLike, Compress, Unique, ReverseSequence, NonMaxSuppression, and the signal windows (Hann, Hamming,
// Blackman). What exporters put around the heavy ops: causal masks (Trilu), position ids
// (CumSum), detection heads (TopK, NonZero, GatherND, NonMaxSuppression).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
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
    const AxisSplit split = SplitAtAxis(x.shape, axis);
    const int64_t outer = split.outer, length = split.length, inner = split.inner;
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
    const AxisSplit split = SplitAtAxis(shape, axis);
    const int64_t outer = split.outer, inner = split.inner;
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
    const AxisSplit split = SplitAtAxis(x.shape, axis);
    const int64_t outer = split.outer, inner = split.inner;
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
    const AxisSplit split = SplitAtAxis(x.shape, axis);
    const int64_t outer = split.outer, inner = split.inner;
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

// ReverseSequence: along time_axis, the first sequence_lens[b] entries of each batch entry b
// reversed; the rest copied.
StatusOr<std::unique_ptr<Kernel>> MakeReverseSequence(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t batch_axis, node.Int("batch_axis", 1));
  ASSIGN_OR_RETURN(int64_t time_axis, node.Int("time_axis", 0));
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0))) {
    return Status::InvalidArgument(node.Describe() + ": batch_axis and time_axis must be 0 and 1");
  }
  return MakeKernel([batch_axis, time_axis](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "ReverseSequence"));
    const Tensor& x = *in[0];
    if (x.shape.size() < 2) return Status::InvalidArgument("ReverseSequence needs rank 2 or more");
    ASSIGN_OR_RETURN(std::vector<int64_t> lengths, ReadInts(*in[1], "ReverseSequence sequence_lens"));
    const int64_t batch = x.shape[batch_axis], time = x.shape[time_axis];
    if (static_cast<int64_t>(lengths.size()) != batch) return Status::InvalidArgument("ReverseSequence: one length per batch entry");
    const int64_t inner = ElementsOf(x) / std::max<int64_t>(1, batch * time);
    const std::vector<int64_t> strides = ContiguousStrides(x.shape);
    return DispatchBySize(x.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], x.dtype, x.shape));
      const T* src = ValuesOf<T>(x);
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t length = lengths[static_cast<size_t>(b)];
        if (length < 0 || length > time) return Status::InvalidArgument("ReverseSequence: length out of range");
        for (int64_t t = 0; t < time; ++t) {
          const int64_t from = t < length ? length - 1 - t : t;
          const T* source = src + b * strides[batch_axis] + from * strides[time_axis];
          std::copy(source, source + inner, dst + b * strides[batch_axis] + t * strides[time_axis]);
        }
      }
      return Status::Ok();
    });
  });
}

// NonMaxSuppression: per batch entry and class, boxes by falling score (ties to the lower index)
// above score_threshold, each kept unless it overlaps a kept one by IoU above iou_threshold, at
// most max_output_boxes_per_class; rows of (batch, class, box).
StatusOr<std::unique_ptr<Kernel>> MakeNonMaxSuppression(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t center_point_box, node.Int("center_point_box", 0));
  return MakeKernel([center_point_box](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "NonMaxSuppression"));
    const Tensor& boxes = *in[0];
    const Tensor& scores = *in[1];
    if (boxes.dtype != DataType::kFp32 || scores.dtype != DataType::kFp32) {
      return Status::InvalidArgument("NonMaxSuppression: boxes and scores must be FP32");
    }
    if (boxes.shape.size() != 3 || boxes.shape[2] != 4 || scores.shape.size() != 3 || scores.shape[0] != boxes.shape[0] ||
        scores.shape[2] != boxes.shape[1]) {
      return Status::InvalidArgument("NonMaxSuppression: boxes must be [B, S, 4] and scores [B, C, S]");
    }
    int64_t max_per_class = 0;
    double iou_threshold = 0, score_threshold = -std::numeric_limits<double>::infinity();
    if (const Tensor* t = InputAt(in, 2); t != nullptr && ElementsOf(*t) > 0) {
      ASSIGN_OR_RETURN(max_per_class, ScalarInt(*t, "NonMaxSuppression max_output_boxes_per_class"));
    }
    if (const Tensor* t = InputAt(in, 3); t != nullptr && ElementsOf(*t) > 0) {
      ASSIGN_OR_RETURN(iou_threshold, ScalarAsDouble(*t));
    }
    if (const Tensor* t = InputAt(in, 4); t != nullptr && ElementsOf(*t) > 0) {
      ASSIGN_OR_RETURN(score_threshold, ScalarAsDouble(*t));
    }
    const int64_t batches = boxes.shape[0], count = boxes.shape[1], classes = scores.shape[1];
    // As (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2.
    auto corners = [&](int64_t b, int64_t i) {
      const float* v = ValuesOf<float>(boxes) + (b * count + i) * 4;
      std::array<float, 4> c;
      if (center_point_box != 0) {
        c = {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
      } else {
        c = {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3])};
      }
      return c;
    };
    auto iou = [](const std::array<float, 4>& a, const std::array<float, 4>& b) {
      const float height = std::min(a[2], b[2]) - std::max(a[0], b[0]);
      const float width = std::min(a[3], b[3]) - std::max(a[1], b[1]);
      if (height <= 0 || width <= 0) return 0.0f;
      const float overlap = height * width;
      const float total = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - overlap;
      return total <= 0 ? 0.0f : overlap / total;
    };
    std::vector<std::array<int64_t, 3>> selected;
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t c = 0; c < classes; ++c) {
        const float* s = ValuesOf<float>(scores) + (b * classes + c) * count;
        std::vector<int64_t> order;
        for (int64_t i = 0; i < count; ++i) {
          if (s[i] > score_threshold) order.push_back(i);
        }
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
        std::vector<std::array<float, 4>> kept;
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
          const auto box = corners(b, i);
          if (std::any_of(kept.begin(), kept.end(), [&](const auto& k) { return iou(k, box) > iou_threshold; })) continue;
          kept.push_back(box);
          selected.push_back({b, c, i});
        }
      }
    }
    ASSIGN_OR_RETURN(int64_t * dst, AllocateOutputAs<int64_t>(&out[0], DataType::kInt64,
                                                              {static_cast<int64_t>(selected.size()), 3}));
    for (const auto& row : selected) dst = std::copy(row.begin(), row.end(), dst);
    return Status::Ok();
  });
}

// Hann, Hamming and Blackman windows: sum_k (-1)^k a_k cos(2 pi k n / N), N = size (periodic) or
// size - 1 (symmetric).
KernelFactory WindowFunction(std::vector<double> coefficients) {
  return [coefficients](const Node& node, int) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(int64_t periodic, node.Int("periodic", 1));
    ASSIGN_OR_RETURN(int64_t onnx_type, node.Int("output_datatype", 1));
    const DataType type = DataTypeFromOnnx(static_cast<int32_t>(onnx_type));
    if (type == DataType::kInvalid || type == DataType::kBytes || type == DataType::kBool) {
      return Status::Unimplemented(node.Describe() + ": unsupported output_datatype");
    }
    return MakeKernel([coefficients, periodic, type](Inputs in, Outputs out) -> Status {
      RETURN_IF_ERROR(RequireInputs(in, 1, "window"));
      ASSIGN_OR_RETURN(int64_t size, ScalarInt(*in[0], "window size"));
      if (size < 0) return Status::InvalidArgument("window: negative size");
      const double span = static_cast<double>(periodic != 0 ? size : size - 1);
      return DispatchNumeric(type, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], type, {size}));
        for (int64_t n = 0; n < size; ++n) {
          double value = 0;
          for (size_t k = 0; k < coefficients.size(); ++k) {
            const double term = span > 0 ? std::cos(2 * M_PI * static_cast<double>(k) * static_cast<double>(n) / span) : 1;
            value += (k % 2 == 0 ? 1 : -1) * coefficients[k] * term;
          }
          dst[n] = static_cast<T>(value);
        }
        return Status::Ok();
      });
    });
  };
}

// Element by element: std::vector's own operator< ends in a memcmp for bytes that GCC 12 warns
// about (a false stringop-overread).
template <typename T>
struct SliceLess {
  bool operator()(const std::vector<T>& a, const std::vector<T>& b) const {
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (a[i] < b[i]) return true;
      if (b[i] < a[i]) return false;
    }
    return a.size() < b.size();
  }
};

// Unique: the distinct elements (or slices along `axis`), sorted or in order of first
// appearance, with each one's first index, each input entry's index into them, and the counts.
StatusOr<std::unique_ptr<Kernel>> MakeUnique(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t sorted, node.Int("sorted", 1));
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", 0));
  const bool has_axis = node.Has("axis");
  return MakeKernel([sorted, axis_attribute, has_axis](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Unique"));
    Tensor x = *in[0];
    if (!has_axis) x.shape = {ElementsOf(x)};
    const auto rank = static_cast<int64_t>(x.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "Unique"));
    const AxisSplit split = SplitAtAxis(x.shape, axis);
    const int64_t outer = split.outer, length = split.length, inner = split.inner;
    return DispatchNumeric(x.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* src = ValuesOf<T>(x);
      auto slice = [&](int64_t j) {
        std::vector<T> values;
        for (int64_t o = 0; o < outer; ++o) values.insert(values.end(), src + (o * length + j) * inner, src + (o * length + j + 1) * inner);
        return values;
      };
      std::map<std::vector<T>, int64_t, SliceLess<T>> ids;  // slice -> id in order of first appearance
      std::vector<int64_t> first, counts, inverse;
      for (int64_t j = 0; j < length; ++j) {
        auto [it, added] = ids.emplace(slice(j), static_cast<int64_t>(first.size()));
        if (added) {
          first.push_back(j);
          counts.push_back(0);
        }
        ++counts[static_cast<size_t>(it->second)];
        inverse.push_back(it->second);
      }
      // Output position of each id: the map's (sorted) order, or appearance.
      std::vector<int64_t> position(first.size());
      std::iota(position.begin(), position.end(), 0);
      if (sorted != 0) {
        int64_t next = 0;
        for (const auto& [values, id] : ids) position[static_cast<size_t>(id)] = next++;
      }
      const auto unique = static_cast<int64_t>(first.size());
      std::vector<int64_t> order(first.size());  // position -> id
      for (size_t id = 0; id < first.size(); ++id) order[static_cast<size_t>(position[id])] = static_cast<int64_t>(id);
      Shape shape = x.shape;
      shape[axis] = unique;
      ASSIGN_OR_RETURN(T * y, AllocateOutputAs<T>(&out[0], x.dtype, shape));
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t p = 0; p < unique; ++p) {
          const T* from = src + (o * length + first[static_cast<size_t>(order[static_cast<size_t>(p)])]) * inner;
          std::copy(from, from + inner, y + (o * unique + p) * inner);
        }
      }
      auto write = [&](size_t o, int64_t count, auto value_of) -> Status {
        if (o >= out.size()) return Status::Ok();
        ASSIGN_OR_RETURN(int64_t * dst, AllocateOutputAs<int64_t>(&out[o], DataType::kInt64, {count}));
        for (int64_t i = 0; i < count; ++i) dst[i] = value_of(i);
        return Status::Ok();
      };
      RETURN_IF_ERROR(write(1, unique, [&](int64_t p) { return first[static_cast<size_t>(order[static_cast<size_t>(p)])]; }));
      RETURN_IF_ERROR(write(2, length, [&](int64_t j) { return position[static_cast<size_t>(inverse[static_cast<size_t>(j)])]; }));
      return write(3, unique, [&](int64_t p) { return counts[static_cast<size_t>(order[static_cast<size_t>(p)])]; });
    });
  });
}

}  // namespace

void RegisterIndexKernels(KernelRegistry* r) {
  r->Register("Unique", 11, MakeUnique);
  r->Register("ReverseSequence", 10, MakeReverseSequence);
  r->Register("NonMaxSuppression", 10, MakeNonMaxSuppression);
  r->Register("HannWindow", 17, WindowFunction({0.5, 0.5}));
  r->Register("HammingWindow", 17, WindowFunction({25.0 / 46, 21.0 / 46}));
  r->Register("BlackmanWindow", 17, WindowFunction({0.42, 0.5, 0.08}));
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
