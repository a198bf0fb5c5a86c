#include "runtime/kernels/tensor_util.h"

#include <algorithm>
#include <cstring>

namespace inferd::runtime {

StatusOr<uint8_t*> AllocateOutput(Tensor* out, DataType dtype, const Shape& shape) {
  ASSIGN_OR_RETURN(int64_t elements, ElementCount(shape, kMaxKernelElements));
  size_t element_size = DataTypeSize(dtype);
  if (element_size == 0) {
    return Status::Unimplemented("cannot allocate a " + std::string(DataTypeName(dtype)) + " tensor");
  }
  size_t bytes = static_cast<size_t>(elements) * element_size;
  uint8_t* data = TakeOutputBuffer(out, bytes);
  out->dtype = dtype;
  out->shape = shape;
  out->byte_size = bytes;
  return data;
}

uint8_t* TakeOutputBuffer(Tensor* out, size_t bytes) {
  if (IsArenaSlot(*out) && out->byte_size >= bytes) {
    // The session's arena is writable memory it lent to this output (session.h).
    return const_cast<uint8_t*>(out->data.get());
  }
  // At least one byte, so an empty tensor still has a valid (never read) pointer.
  MutableBuffer buffer = AllocateBuffer(std::max<size_t>(bytes, 1));
  out->data = AliasData(buffer.memory, buffer.get());
  return buffer.get();
}

void AliasOutput(Tensor* out, const Tensor& in, Shape shape) {
  out->dtype = in.dtype;
  out->shape = std::move(shape);
  out->data = in.data;
  out->byte_size = in.byte_size;
}

int64_t ElementsOf(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return Status::InvalidArgument("shapes " + ShapeToString(a) + " and " + ShapeToString(b) +
                                     " cannot be broadcast together");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out_shape) {
  std::vector<int64_t> own = ContiguousStrides(shape);
  std::vector<int64_t> strides(out_shape.size(), 0);
  const size_t offset = out_shape.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) strides[offset + i] = shape[i] == 1 ? 0 : own[i];
  return strides;
}

Status RequireInputs(std::span<const Tensor* const> inputs, size_t count, std::string_view op) {
  for (size_t i = 0; i < count; ++i) {
    if (InputAt(inputs, i) == nullptr) return Status::InvalidArgument(std::string(op) + " needs input " + std::to_string(i));
  }
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> ReadInts(const Tensor& tensor, std::string_view what) {
  const int64_t n = ElementsOf(tensor);
  std::vector<int64_t> values(static_cast<size_t>(n));
  if (n == 0) return values;  // an empty tensor may have no buffer at all
  if (tensor.dtype == DataType::kInt64) {
    std::memcpy(values.data(), tensor.data.get(), static_cast<size_t>(n) * sizeof(int64_t));
  } else if (tensor.dtype == DataType::kInt32) {
    const int32_t* data = ValuesOf<int32_t>(tensor);
    for (int64_t i = 0; i < n; ++i) values[i] = data[i];
  } else {
    return Status::InvalidArgument(std::string(what) + " must be int64 or int32, got " +
                                   std::string(DataTypeName(tensor.dtype)));
  }
  return values;
}

StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, std::string_view what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    return Status::InvalidArgument(std::string(what) + " axis " + std::to_string(axis) +
                                   " is out of range for rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

StatusOr<double> ScalarAsDouble(const Tensor& tensor) {
  if (ElementsOf(tensor) < 1) return Status::InvalidArgument("expected a scalar, got an empty tensor");
  double value = 0;
  Status status = DispatchNumeric(tensor.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    value = static_cast<double>(ValuesOf<T>(tensor)[0]);
    return Status::Ok();
  });
  RETURN_IF_ERROR(status);
  return value;
}

Tensor OwnedCopy(const Tensor& t) {
  Tensor copy;
  copy.dtype = t.dtype;
  copy.shape = t.shape;
  copy.byte_size = t.byte_size;
  MutableBuffer buffer = AllocateBuffer(std::max<size_t>(t.byte_size, 1));
  if (t.byte_size > 0) std::memcpy(buffer.get(), t.data.get(), t.byte_size);
  copy.data = std::shared_ptr<const uint8_t>(buffer.memory, buffer.get());
  return copy;
}

}  // namespace inferd::runtime
