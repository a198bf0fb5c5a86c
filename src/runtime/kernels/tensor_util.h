// Helpers every kernel uses: output allocation, element-type dispatch, broadcasting, axes.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace inferd::runtime {

// The largest tensor a kernel may create (elements). Shapes can come from data (ConstantOfShape,
// Expand, Tile), so an absurd one must become an error, not an allocation.
inline constexpr int64_t kMaxKernelElements = int64_t{1} << 34;

// Gives `out` a buffer for `shape` and returns where to write: the place the session's memory plan
// reserved for it when there is one (see IsArenaSlot), a fresh buffer otherwise.
StatusOr<uint8_t*> AllocateOutput(Tensor* out, DataType dtype, const Shape& shape);
// A copy in a buffer of its own: for tensors kept beyond the node that made them (sequence items),
// which must not point into an arena slot that later nodes reuse.
Tensor OwnedCopy(const Tensor& t);

// Before a node runs, the session may put in each output the place its memory plan reserved for
// it: a Tensor with data and a capacity (byte_size) but no element type yet.
inline bool IsArenaSlot(const Tensor& t) { return t.data != nullptr && t.dtype == DataType::kInvalid; }
// `bytes` for `out`: its arena slot if it has one that fits, else a fresh buffer. Sets out->data
// only (the caller sets the type, shape and byte size).
uint8_t* TakeOutputBuffer(Tensor* out, size_t bytes);

// Whether two tensors hold the same buffer from the same allocation, for kernels that cache work
// done on an input (reordered weights). The address alone is not enough: an arena slot comes back
// at the same address every run with new contents, under a new owner each run.
inline bool SameBuffer(const std::shared_ptr<const uint8_t>& a, const std::shared_ptr<const uint8_t>& b) {
  return a.get() == b.get() && !a.owner_before(b) && !b.owner_before(a);
}

template <typename T>
StatusOr<T*> AllocateOutputAs(Tensor* out, DataType dtype, const Shape& shape) {
  ASSIGN_OR_RETURN(uint8_t * data, AllocateOutput(out, dtype, shape));
  return reinterpret_cast<T*>(data);
}

// An output that shares its input's buffer with another shape (Reshape, Squeeze, Identity...).
void AliasOutput(Tensor* out, const Tensor& in, Shape shape);

template <typename T>
const T* ValuesOf(const Tensor& t) {
  return reinterpret_cast<const T*>(t.data.get());
}
int64_t ElementsOf(const Tensor& t);

// C++ type for each element type; bool is stored as one byte.
template <DataType D>
struct TypeOf;
template <> struct TypeOf<DataType::kFp32> { using type = float; };
template <> struct TypeOf<DataType::kFp64> { using type = double; };
template <> struct TypeOf<DataType::kInt8> { using type = int8_t; };
template <> struct TypeOf<DataType::kInt16> { using type = int16_t; };
template <> struct TypeOf<DataType::kInt32> { using type = int32_t; };
template <> struct TypeOf<DataType::kInt64> { using type = int64_t; };
template <> struct TypeOf<DataType::kUint8> { using type = uint8_t; };
template <> struct TypeOf<DataType::kUint16> { using type = uint16_t; };
template <> struct TypeOf<DataType::kUint32> { using type = uint32_t; };
template <> struct TypeOf<DataType::kUint64> { using type = uint64_t; };
template <> struct TypeOf<DataType::kBool> { using type = bool; };

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) for the tensor's numeric type; error for others.
template <typename Fn>
Status DispatchNumeric(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFp32: return fn(TypeTag<float>{});
    case DataType::kFp64: return fn(TypeTag<double>{});
    case DataType::kInt8: return fn(TypeTag<int8_t>{});
    case DataType::kInt16: return fn(TypeTag<int16_t>{});
    case DataType::kInt32: return fn(TypeTag<int32_t>{});
    case DataType::kInt64: return fn(TypeTag<int64_t>{});
    case DataType::kUint8: return fn(TypeTag<uint8_t>{});
    case DataType::kUint16: return fn(TypeTag<uint16_t>{});
    case DataType::kUint32: return fn(TypeTag<uint32_t>{});
    case DataType::kUint64: return fn(TypeTag<uint64_t>{});
    default:
      return Status::Unimplemented("element type " + std::string(DataTypeName(dtype)) + " is not supported here");
  }
}

template <typename Fn>
Status DispatchFloat(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFp32: return fn(TypeTag<float>{});
    case DataType::kFp64: return fn(TypeTag<double>{});
    default:
      return Status::Unimplemented("element type " + std::string(DataTypeName(dtype)) +
                                   " is not supported here (float types only)");
  }
}

// By element size only (uint8_t..uint64_t): for ops that copy elements without reading them.
template <typename Fn>
Status DispatchBySize(DataType dtype, Fn&& fn) {
  switch (DataTypeSize(dtype)) {
    case 1: return fn(TypeTag<uint8_t>{});
    case 2: return fn(TypeTag<uint16_t>{});
    case 4: return fn(TypeTag<uint32_t>{});
    case 8: return fn(TypeTag<uint64_t>{});
    default: return Status::Unimplemented("element type " + std::string(DataTypeName(dtype)) + " cannot be moved here");
  }
}

// Numeric plus bool: for ops that only move elements around.
template <typename Fn>
Status DispatchAny(DataType dtype, Fn&& fn) {
  if (dtype == DataType::kBool) return fn(TypeTag<bool>{});
  if (dtype == DataType::kFp16 || dtype == DataType::kBf16) return fn(TypeTag<uint16_t>{});
  return DispatchNumeric(dtype, fn);
}

// Numpy-style multidirectional broadcasting of two shapes.
StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);
// For an input of `shape` read as `out_shape`: the element stride of each output dim (0 where the
// input is broadcast along it).
std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out_shape);
std::vector<int64_t> ContiguousStrides(const Shape& shape);

// Walks every index of `shape` in row-major order, tracking offsets into N strided operands.
// fn(offsets...) is called once per element (once for a rank-0 shape).
template <size_t N, typename Fn>
void ForEachIndex(const Shape& shape, const std::array<std::vector<int64_t>, N>& strides, Fn&& fn) {
  const size_t rank = shape.size();
  for (int64_t d : shape) {
    if (d == 0) return;
  }
  std::vector<int64_t> index(rank, 0);
  std::array<int64_t, N> offsets{};
  while (true) {
    fn(offsets);
    size_t dim = rank;
    while (dim > 0) {
      --dim;
      if (++index[dim] < shape[dim]) {
        for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][dim];
        break;
      }
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][dim] * (shape[dim] - 1);
      index[dim] = 0;
      if (dim == 0) return;
    }
    if (rank == 0) return;
  }
}

// A shape seen as [outer, length, inner] around one axis: element (o, j, i) of it sits at
// (o * length + j) * inner + i.
struct AxisSplit {
  int64_t outer = 1, length = 1, inner = 1;
};
inline AxisSplit SplitAtAxis(const Shape& shape, int64_t axis) {
  AxisSplit split;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    const int64_t size = shape[static_cast<size_t>(d)];
    if (d < axis) split.outer *= size;
    else if (d == axis) split.length = size;
    else split.inner *= size;
  }
  return split;
}

// Kernel inputs: nullptr where an optional input is absent or beyond the node's inputs.
inline const Tensor* InputAt(std::span<const Tensor* const> inputs, size_t i) {
  return i < inputs.size() ? inputs[i] : nullptr;
}
// An error naming `op` unless the first `count` inputs are present.
Status RequireInputs(std::span<const Tensor* const> inputs, size_t count, std::string_view op);

// Reads a 1-D int64 or int32 tensor (shapes, axes, pads...).
StatusOr<std::vector<int64_t>> ReadInts(const Tensor& tensor, std::string_view what);
// A negative axis counts from the end; error when out of [-rank, rank).
StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, std::string_view what);

// Reads element i of any numeric tensor as double (for small scalar inputs like Clip's min).
StatusOr<double> ScalarAsDouble(const Tensor& tensor);

}  // namespace inferd::runtime
