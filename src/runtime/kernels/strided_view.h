// Ops that only pick elements of their input (Transpose, Slice) as a strided view of it:
//   out[i...] = in[offset + sum(i_k * strides_k)]   (strides in elements)
// The reference kernels copy the view element by element; the oneDNN ones hand it to a reorder.
#pragma once

#include <span>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/ir/graph.h"

namespace inferd::runtime {

struct StridedView {
  int64_t offset = 0;
  std::vector<int64_t> strides;
  Shape shape;
};

// An empty perm reverses the dims (ONNX's default).
StatusOr<StridedView> TransposeView(const Shape& shape, std::vector<int64_t> perm);

// Slice's parameters: attributes before opset 10, inputs (starts, ends, axes, steps) from 10.
struct SliceAttributes {
  std::vector<int64_t> starts, ends, axes;
};
StatusOr<SliceAttributes> ReadSliceAttributes(const Node& node);
StatusOr<StridedView> SliceView(std::span<const Tensor* const> inputs, int opset, const SliceAttributes& attributes);

}  // namespace inferd::runtime
