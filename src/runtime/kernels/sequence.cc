// ONNX sequence ops (reference kernels): SequenceEmpty, SequenceConstruct, SequenceInsert,
// SequenceAt, SequenceErase, SequenceLength, ConcatFromSequence, SplitToSequence.
//
// A sequence is a Tensor whose `sequence` holds the items (common/tensor.h). Items are copies in
// buffers of their own: a tensor put into a sequence may live in the memory plan's arena, whose
// slot the next node reuses once the tensor's last reader (the insert) has run.
#include <cstring>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;
using Items = std::vector<Tensor>;

void SetSequence(Tensor* out, Items items) {
  *out = Tensor{};
  out->sequence = std::make_shared<const Items>(std::move(items));
}

StatusOr<const Items*> SequenceInput(Inputs in, size_t i, std::string_view op) {
  const Tensor* t = InputAt(in, i);
  if (t == nullptr || t->sequence == nullptr) return Status::InvalidArgument(std::string(op) + ": input " + std::to_string(i) + " must be a sequence");
  return t->sequence.get();
}

StatusOr<Tensor> TensorInput(Inputs in, size_t i, std::string_view op) {
  const Tensor* t = InputAt(in, i);
  if (t == nullptr || t->sequence != nullptr) return Status::InvalidArgument(std::string(op) + ": input " + std::to_string(i) + " must be a tensor");
  return *t;
}

// A position input (scalar int32/int64), checked against [-size, size - 1] (or size when
// `inserting`), made non-negative; `fallback` when absent.
StatusOr<int64_t> Position(Inputs in, size_t i, size_t size, bool inserting, int64_t fallback, std::string_view op) {
  const Tensor* t = InputAt(in, i);
  if (t == nullptr) return fallback;
  if ((t->dtype != DataType::kInt64 && t->dtype != DataType::kInt32) || ElementsOf(*t) != 1) {
    return Status::InvalidArgument(std::string(op) + ": position must be one int32 or int64");
  }
  ASSIGN_OR_RETURN(double value, ScalarAsDouble(*t));
  auto position = static_cast<int64_t>(value);
  const auto n = static_cast<int64_t>(size);
  const int64_t high = inserting ? n : n - 1;
  if (position < -n || position > high) {
    return Status::InvalidArgument(std::string(op) + ": position " + std::to_string(position) + " is outside a sequence of " +
                                   std::to_string(n));
  }
  return position < 0 ? position + n : position;
}

Status WriteCopy(const Tensor& item, Tensor* out) {
  uint8_t* data = TakeOutputBuffer(out, item.byte_size);
  if (item.byte_size > 0) std::memcpy(data, item.data.get(), item.byte_size);
  out->dtype = item.dtype;
  out->shape = item.shape;
  out->byte_size = item.byte_size;
  return Status::Ok();
}

StatusOr<std::unique_ptr<Kernel>> MakeSequenceEmpty(const Node&, int) {
  return MakeKernel([](Inputs, Outputs out) -> Status {
    SetSequence(&out[0], {});
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeSequenceConstruct(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    Items items;
    for (size_t i = 0; i < in.size(); ++i) {
      ASSIGN_OR_RETURN(Tensor item, TensorInput(in, i, "SequenceConstruct"));
      if (!items.empty() && item.dtype != items[0].dtype) return Status::InvalidArgument("SequenceConstruct: items of different types");
      items.push_back(OwnedCopy(item));
    }
    SetSequence(&out[0], std::move(items));
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeSequenceInsert(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    ASSIGN_OR_RETURN(const Items* sequence, SequenceInput(in, 0, "SequenceInsert"));
    ASSIGN_OR_RETURN(Tensor item, TensorInput(in, 1, "SequenceInsert"));
    if (!sequence->empty() && item.dtype != (*sequence)[0].dtype) {
      return Status::InvalidArgument("SequenceInsert: the tensor's type differs from the sequence's");
    }
    const auto size = static_cast<int64_t>(sequence->size());
    ASSIGN_OR_RETURN(int64_t position, Position(in, 2, sequence->size(), true, size, "SequenceInsert"));
    Items items = *sequence;  // the items' buffers are shared, never written
    items.insert(items.begin() + position, OwnedCopy(item));
    SetSequence(&out[0], std::move(items));
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeSequenceAt(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    ASSIGN_OR_RETURN(const Items* sequence, SequenceInput(in, 0, "SequenceAt"));
    if (InputAt(in, 1) == nullptr) return Status::InvalidArgument("SequenceAt: position is required");
    ASSIGN_OR_RETURN(int64_t position, Position(in, 1, sequence->size(), false, 0, "SequenceAt"));
    return WriteCopy((*sequence)[static_cast<size_t>(position)], &out[0]);
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeSequenceErase(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    ASSIGN_OR_RETURN(const Items* sequence, SequenceInput(in, 0, "SequenceErase"));
    if (sequence->empty()) return Status::InvalidArgument("SequenceErase: the sequence is empty");
    const auto last = static_cast<int64_t>(sequence->size()) - 1;
    ASSIGN_OR_RETURN(int64_t position, Position(in, 1, sequence->size(), false, last, "SequenceErase"));
    Items items = *sequence;
    items.erase(items.begin() + position);
    SetSequence(&out[0], std::move(items));
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeSequenceLength(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    ASSIGN_OR_RETURN(const Items* sequence, SequenceInput(in, 0, "SequenceLength"));
    ASSIGN_OR_RETURN(int64_t * length, AllocateOutputAs<int64_t>(&out[0], DataType::kInt64, {}));
    *length = static_cast<int64_t>(sequence->size());
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeConcatFromSequence(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", 0));
  ASSIGN_OR_RETURN(int64_t new_axis, node.Int("new_axis", 0));
  if (!node.Has("axis")) return Status::InvalidArgument(node.Describe() + ": attribute 'axis' is required");
  return MakeKernel([axis_attribute, new_axis](Inputs in, Outputs out) -> Status {
    ASSIGN_OR_RETURN(const Items* sequence, SequenceInput(in, 0, "ConcatFromSequence"));
    if (sequence->empty()) return Status::InvalidArgument("ConcatFromSequence: the sequence is empty");
    const Tensor& first = (*sequence)[0];
    const size_t element = DataTypeSize(first.dtype);
    if (element == 0) return Status::Unimplemented("ConcatFromSequence: BYTES items");
    const auto rank = static_cast<int64_t>(first.shape.size());
    // Stacking (new_axis) inserts a dim of 1 in every item first; the axis may then be `rank`.
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank + (new_axis != 0 ? 1 : 0), "ConcatFromSequence"));
    Shape out_shape;
    int64_t outer = 1, total = 0;
    std::vector<int64_t> chunk;  // per item: bytes per outer index
    for (const Tensor& item : *sequence) {
      Shape shape = item.shape;
      if (new_axis != 0) shape.insert(shape.begin() + axis, 1);
      if (item.dtype != first.dtype || static_cast<int64_t>(shape.size()) != rank + (new_axis != 0 ? 1 : 0)) {
        return Status::InvalidArgument("ConcatFromSequence: items differ in type or rank");
      }
      if (out_shape.empty()) out_shape = shape;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (static_cast<int64_t>(d) != axis && shape[d] != out_shape[d]) {
          return Status::InvalidArgument("ConcatFromSequence: items differ outside the axis");
        }
      }
      total += shape[static_cast<size_t>(axis)];
      int64_t inner = 1;
      for (size_t d = static_cast<size_t>(axis); d < shape.size(); ++d) inner *= shape[d];
      chunk.push_back(inner * static_cast<int64_t>(element));
    }
    for (int64_t d = 0; d < axis; ++d) outer *= out_shape[static_cast<size_t>(d)];
    out_shape[static_cast<size_t>(axis)] = total;
    ASSIGN_OR_RETURN(uint8_t * dst, AllocateOutput(&out[0], first.dtype, out_shape));
    for (int64_t o = 0; o < outer; ++o) {
      for (size_t i = 0; i < sequence->size(); ++i) {
        std::memcpy(dst, (*sequence)[i].data.get() + o * chunk[i], static_cast<size_t>(chunk[i]));
        dst += chunk[i];
      }
    }
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeSplitToSequence(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", 0));
  ASSIGN_OR_RETURN(int64_t keepdims, node.Int("keepdims", 1));
  return MakeKernel([axis_attribute, keepdims](Inputs in, Outputs out) -> Status {
    ASSIGN_OR_RETURN(Tensor input, TensorInput(in, 0, "SplitToSequence"));
    const size_t element = DataTypeSize(input.dtype);
    if (element == 0) return Status::Unimplemented("SplitToSequence: BYTES input");
    const auto rank = static_cast<int64_t>(input.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "SplitToSequence"));
    const int64_t length = input.shape[static_cast<size_t>(axis)];
    std::vector<int64_t> sizes;
    const Tensor* split = InputAt(in, 1);
    const bool squeeze = split == nullptr && keepdims == 0;
    if (split == nullptr) {
      sizes.assign(static_cast<size_t>(length), 1);
    } else if (split->shape.empty()) {
      ASSIGN_OR_RETURN(double each, ScalarAsDouble(*split));
      if (each <= 0) return Status::InvalidArgument("SplitToSequence: split must be positive");
      for (int64_t at = 0; at < length; at += static_cast<int64_t>(each)) sizes.push_back(std::min<int64_t>(static_cast<int64_t>(each), length - at));
    } else {
      ASSIGN_OR_RETURN(sizes, ReadInts(*split, "SplitToSequence split"));
      int64_t sum = 0;
      for (int64_t s : sizes) {
        if (s < 0) return Status::InvalidArgument("SplitToSequence: negative split");
        sum += s;
      }
      if (sum != length) return Status::InvalidArgument("SplitToSequence: split does not add up to the axis");
    }
    const AxisSplit around = SplitAtAxis(input.shape, axis);
    const int64_t outer = around.outer, inner = around.inner * static_cast<int64_t>(element);
    Items items;
    int64_t offset = 0;
    for (int64_t size : sizes) {
      Tensor item;
      item.dtype = input.dtype;
      item.shape = input.shape;
      item.shape[static_cast<size_t>(axis)] = size;
      if (squeeze) item.shape.erase(item.shape.begin() + axis);
      item.byte_size = static_cast<size_t>(outer * size * inner);
      MutableBuffer buffer = AllocateBuffer(std::max<size_t>(item.byte_size, 1));
      for (int64_t o = 0; o < outer; ++o) {
        std::memcpy(buffer.get() + o * size * inner, input.data.get() + (o * length + offset) * inner,
                    static_cast<size_t>(size * inner));
      }
      item.data = std::shared_ptr<const uint8_t>(buffer.memory, buffer.get());
      items.push_back(std::move(item));
      offset += size;
    }
    SetSequence(&out[0], std::move(items));
    return Status::Ok();
  });
}

}  // namespace

// ---- Optional: an optional holding a value is that value; an empty one is marked ----

// Optional(value?): the value, or an empty optional when the input is absent.
StatusOr<std::unique_ptr<Kernel>> MakeOptional(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    const Tensor* value = InputAt(in, 0);
    if (value == nullptr) {
      out[0] = Tensor{};
      out[0].empty_optional = true;
    } else {
      out[0] = *value;
    }
    return Status::Ok();
  });
}

// OptionalHasElement(x?): false for an empty optional or an absent input, true otherwise.
StatusOr<std::unique_ptr<Kernel>> MakeOptionalHasElement(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    const Tensor* value = InputAt(in, 0);
    ASSIGN_OR_RETURN(uint8_t * dst, AllocateOutputAs<uint8_t>(&out[0], DataType::kBool, {}));
    *dst = value != nullptr && !value->empty_optional ? 1 : 0;
    return Status::Ok();
  });
}

// OptionalGetElement(x): the value; an error for an empty optional.
StatusOr<std::unique_ptr<Kernel>> MakeOptionalGetElement(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "OptionalGetElement"));
    if (in[0]->empty_optional) return Status::InvalidArgument("OptionalGetElement: the optional is empty");
    out[0] = *in[0];
    return Status::Ok();
  });
}

void RegisterSequenceKernels(KernelRegistry* r) {
  r->Register("Optional", 15, MakeOptional);
  r->Register("OptionalHasElement", 15, MakeOptionalHasElement);
  r->Register("OptionalGetElement", 15, MakeOptionalGetElement);
  r->Register("SequenceEmpty", 11, MakeSequenceEmpty);
  r->Register("SequenceConstruct", 11, MakeSequenceConstruct);
  r->Register("SequenceInsert", 11, MakeSequenceInsert);
  r->Register("SequenceAt", 11, MakeSequenceAt);
  r->Register("SequenceErase", 11, MakeSequenceErase);
  r->Register("SequenceLength", 11, MakeSequenceLength);
  r->Register("ConcatFromSequence", 11, MakeConcatFromSequence);
  r->Register("SplitToSequence", 11, MakeSplitToSequence);
}

}  // namespace inferd::runtime
