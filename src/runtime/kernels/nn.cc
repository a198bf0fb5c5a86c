// Neural-network kernels, reference implementations: MatMul, Gemm, Conv, ConvTranspose, pooling,
// normalizations and the softmax family. The oneDNN fast paths are tested against these.
#include <cmath>
#include <limits>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/linear_ops.h"
#include "runtime/kernels/post_ops.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/kernels/window.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;


Status NeedFloat(const Tensor& t, std::string_view op) {
  if (t.dtype != DataType::kFp32) {
    return Status::Unimplemented(std::string(op) + " supports FP32 only, got " + std::string(DataTypeName(t.dtype)));
  }
  return Status::Ok();
}

// ---- MatMul, Gemm ----

// C[m, n] (+)= sum_k A[m, k] * B[k, n], with explicit strides so transposes need no copy.
template <typename T>
void MatrixMultiply(const T* a, int64_t a_row, int64_t a_col, const T* b, int64_t b_row, int64_t b_col, T* c,
                    int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * n + j] = 0;
    for (int64_t p = 0; p < k; ++p) {
      const T av = a[i * a_row + p * a_col];
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += av * b[p * b_row + j * b_col];
    }
  }
}

StatusOr<std::unique_ptr<Kernel>> MakeMatMul(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "MatMul"));
    return MatMulTensors(*in[0], *in[1], &out[0]);
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeGemm(const Node& node, int) {
  ASSIGN_OR_RETURN(float alpha, node.Float("alpha", 1.0f));
  ASSIGN_OR_RETURN(float beta, node.Float("beta", 1.0f));
  ASSIGN_OR_RETURN(int64_t trans_a, node.Int("transA", 0));
  ASSIGN_OR_RETURN(int64_t trans_b, node.Int("transB", 0));
  return MakeKernel([=](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "Gemm"));
    const Tensor &a = *in[0], &b = *in[1];
    if (a.shape.size() != 2 || b.shape.size() != 2) return Status::InvalidArgument("Gemm needs 2-D A and B");
    const int64_t m = trans_a ? a.shape[1] : a.shape[0], k = trans_a ? a.shape[0] : a.shape[1];
    const int64_t n = trans_b ? b.shape[0] : b.shape[1];
    if ((trans_b ? b.shape[1] : b.shape[0]) != k) return Status::InvalidArgument("Gemm: inner dims differ");
    return DispatchFloat(a.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], a.dtype, {m, n}));
      MatrixMultiply(ValuesOf<T>(a), trans_a ? 1 : k, trans_a ? m : 1, ValuesOf<T>(b), trans_b ? 1 : n,
                     trans_b ? k : 1, dst, m, n, k);
      for (int64_t i = 0; i < m * n; ++i) dst[i] *= static_cast<T>(alpha);
      if (const Tensor* c = InputAt(in, 2); c != nullptr && beta != 0) {
        ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(c->shape, {m, n}));
        if (shape != Shape{m, n}) return Status::InvalidArgument("Gemm: C does not broadcast to (M, N)");
        const T* cv = ValuesOf<T>(*c);
        int64_t i = 0;
        ForEachIndex<1>(shape, std::array<std::vector<int64_t>, 1>{BroadcastStrides(c->shape, shape)},
                        [&](const std::array<int64_t, 1>& at) { dst[i++] += static_cast<T>(beta) * cv[at[0]]; });
      }
      return Status::Ok();
    });
  });
}

// For each spatial dim, the input coordinate of (output position, kernel tap); -1 in the padding.
std::vector<std::vector<int64_t>> TapTable(const WindowAttributes& w, const Shape& in_spatial,
                                           const std::vector<int64_t>& out_spatial) {
  std::vector<std::vector<int64_t>> table(in_spatial.size());
  for (size_t d = 0; d < in_spatial.size(); ++d) {
    for (int64_t o = 0; o < out_spatial[d]; ++o) {
      for (int64_t k = 0; k < w.kernel[d]; ++k) {
        int64_t coordinate = o * w.strides[d] - w.pads[d] + k * w.dilations[d];
        table[d].push_back(coordinate >= 0 && coordinate < in_spatial[d] ? coordinate : -1);
      }
    }
  }
  return table;
}

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Calls fn(input_offset_or_-1) for every kernel tap of output position `out_index` (flat).
template <typename Fn>
void ForEachTap(const WindowAttributes& w, const std::vector<std::vector<int64_t>>& table,
                const std::vector<int64_t>& out_spatial, const std::vector<int64_t>& in_strides, int64_t out_index,
                Fn&& fn) {
  const size_t dims = out_spatial.size();
  std::vector<int64_t> position(dims);
  for (size_t d = dims; d-- > 0;) {
    position[d] = out_index % out_spatial[d];
    out_index /= out_spatial[d];
  }
  const int64_t taps = Product(w.kernel);
  for (int64_t t = 0; t < taps; ++t) {
    int64_t rest = t, offset = 0;
    bool inside = true;
    for (size_t d = dims; d-- > 0;) {
      const int64_t k = rest % w.kernel[d];
      rest /= w.kernel[d];
      const int64_t coordinate = table[d][position[d] * w.kernel[d] + k];
      if (coordinate < 0) inside = false;
      offset += coordinate * in_strides[d];
    }
    fn(inside ? offset : -1, t);
  }
}

// ---- Conv ----

StatusOr<std::unique_ptr<Kernel>> MakeConv(const Node& node, int) {
  ASSIGN_OR_RETURN(WindowAttributes window, ReadWindow(node));
  ASSIGN_OR_RETURN(int64_t group, node.Int("group", 1));
  if (group <= 0) return Status::InvalidArgument(node.Describe() + ": group must be positive");
  return MakeKernel([window, group](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "Conv"));
    RETURN_IF_ERROR(NeedFloat(*in[0], "Conv"));
    return ConvolveTensors(*in[0], *in[1], InputAt(in, 2), window, group, &out[0]);
  });
}

// ---- ConvTranspose: scatter each input position into the output ----

StatusOr<std::unique_ptr<Kernel>> MakeConvTranspose(const Node& node, int) {
  ASSIGN_OR_RETURN(WindowAttributes window, ReadWindow(node));
  ASSIGN_OR_RETURN(int64_t group, node.Int("group", 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> output_padding, node.Ints("output_padding"));
  ASSIGN_OR_RETURN(std::vector<int64_t> output_shape, node.Ints("output_shape"));
  if (group <= 0) return Status::InvalidArgument(node.Describe() + ": group must be positive");
  return MakeKernel([=](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "ConvTranspose"));
    const Tensor &x = *in[0], &weight = *in[1];
    RETURN_IF_ERROR(NeedFloat(x, "ConvTranspose"));
    if (x.shape.size() < 3 || weight.shape.size() != x.shape.size()) return Status::InvalidArgument("ConvTranspose: bad ranks");
    const size_t dims = x.shape.size() - 2;
    const int64_t batch = x.shape[0], channels = x.shape[1];
    const int64_t group_filters = weight.shape[1], filters = group_filters * group;
    if (weight.shape[0] != channels || channels % group) return Status::InvalidArgument("ConvTranspose: channels do not match");
    WindowAttributes w = window;
    if (w.kernel.empty()) w.kernel.assign(weight.shape.begin() + 2, weight.shape.end());
    Shape in_spatial(x.shape.begin() + 2, x.shape.end());
    std::vector<int64_t> out_spatial;
    RETURN_IF_ERROR(ResolveTransposedWindow(&w, in_spatial, output_padding, output_shape, &out_spatial));
    Shape shape{batch, filters};
    shape.insert(shape.end(), out_spatial.begin(), out_spatial.end());
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, shape));
    const int64_t out_size = Product(out_spatial), in_size = Product(in_spatial), taps = Product(w.kernel);
    const float* bias = InputAt(in, 2) ? ValuesOf<float>(*in[2]) : nullptr;
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t f = 0; f < filters; ++f) std::fill_n(dst + (n * filters + f) * out_size, out_size, bias ? bias[f] : 0.0f);
    }
    const float* src = ValuesOf<float>(x);
    const float* weights = ValuesOf<float>(weight);
    const std::vector<int64_t> out_strides = ContiguousStrides(out_spatial);
    const int64_t channels_per_group = channels / group;
    for (int64_t i = 0; i < in_size; ++i) {
      for (int64_t t = 0; t < taps; ++t) {
        int64_t rest_i = i, rest_t = t, offset = 0;
        bool inside = true;
        for (size_t d = dims; d-- > 0;) {
          const int64_t position = rest_i % in_spatial[d], k = rest_t % w.kernel[d];
          rest_i /= in_spatial[d];
          rest_t /= w.kernel[d];
          const int64_t coordinate = position * w.strides[d] + k * w.dilations[d] - w.pads[d];
          if (coordinate < 0 || coordinate >= out_spatial[d]) inside = false;
          offset += coordinate * out_strides[d];
        }
        if (!inside) continue;
        for (int64_t n = 0; n < batch; ++n) {
          for (int64_t c = 0; c < channels; ++c) {
            const int64_t g = c / channels_per_group;
            const float value = src[(n * channels + c) * in_size + i];
            for (int64_t fg = 0; fg < group_filters; ++fg) {
              const int64_t f = g * group_filters + fg;
              dst[(n * filters + f) * out_size + offset] += value * weights[(c * group_filters + fg) * taps + t];
            }
          }
        }
      }
    }
    return Status::Ok();
  });
}

// ---- pooling ----

StatusOr<std::unique_ptr<Kernel>> MakePool(const Node& node, bool is_max) {
  ASSIGN_OR_RETURN(WindowAttributes window, ReadWindow(node));
  ASSIGN_OR_RETURN(int64_t count_include_pad, node.Int("count_include_pad", 0));
  ASSIGN_OR_RETURN(int64_t storage_order, node.Int("storage_order", 0));
  if (window.kernel.empty()) return Status::InvalidArgument(node.Describe() + ": kernel_shape is required");
  return MakeKernel([=](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "pooling"));
    const Tensor& x = *in[0];
    // MaxPool also takes 8-bit integers (it only compares); everything else is FP32.
    const bool integer = x.dtype == DataType::kUint8 || x.dtype == DataType::kInt8;
    if (!(is_max && integer)) RETURN_IF_ERROR(NeedFloat(x, "pooling"));
    if (x.shape.size() < 3) return Status::InvalidArgument("pooling needs N, C and spatial dims");
    Shape in_spatial(x.shape.begin() + 2, x.shape.end());
    WindowAttributes w = window;
    std::vector<int64_t> out_spatial;
    RETURN_IF_ERROR(ResolveWindow(&w, in_spatial, &out_spatial));
    const int64_t planes = x.shape[0] * x.shape[1];
    Shape shape{x.shape[0], x.shape[1]};
    shape.insert(shape.end(), out_spatial.begin(), out_spatial.end());
    return DispatchNumeric(x.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], x.dtype, shape));
    int64_t* indices = nullptr;
    if (is_max && out.size() > 1) {
      ASSIGN_OR_RETURN(indices, AllocateOutputAs<int64_t>(&out[1], DataType::kInt64, shape));
    }
    const auto table = TapTable(w, in_spatial, out_spatial);
    const std::vector<int64_t> in_strides = ContiguousStrides(in_spatial);
    const int64_t in_size = Product(in_spatial), out_size = Product(out_spatial);
    const T* src = ValuesOf<T>(x);
    // Average pooling with count_include_pad counts taps inside input + explicit pads only.
    std::vector<int64_t> padded_extent(in_spatial.size());
    for (size_t d = 0; d < in_spatial.size(); ++d) padded_extent[d] = in_spatial[d] + w.pads[d] + w.pads[d + in_spatial.size()];
    for (int64_t o = 0; o < out_size; ++o) {
      std::vector<int64_t> offsets;
      ForEachTap(w, table, out_spatial, in_strides, o, [&](int64_t offset, int64_t) { offsets.push_back(offset); });
      int64_t include_pad_count = 0;
      if (!is_max && count_include_pad) {
        int64_t rest = o;
        include_pad_count = 1;
        for (size_t d = out_spatial.size(); d-- > 0;) {
          const int64_t position = rest % out_spatial[d];
          rest /= out_spatial[d];
          const int64_t begin = position * w.strides[d];
          const int64_t end = std::min(begin + w.dilations[d] * (w.kernel[d] - 1) + 1, padded_extent[d]);
          include_pad_count *= (end - begin + w.dilations[d] - 1) / w.dilations[d];
        }
      }
      for (int64_t p = 0; p < planes; ++p) {
        const T* plane = src + p * in_size;
        double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t count = 0, best = -1;
        for (int64_t offset : offsets) {
          if (offset < 0) continue;
          const double v = plane[offset];
          if (is_max) {
            if (v > acc || best < 0) {
              acc = v;
              best = offset;
            }
          } else {
            acc += v;
          }
          ++count;
        }
        if (!is_max) acc = acc / static_cast<double>(count_include_pad ? include_pad_count : std::max<int64_t>(count, 1));
        dst[p * out_size + o] = static_cast<T>(acc);
        if (indices) {
          int64_t flat = best;
          if (storage_order == 1 && in_spatial.size() == 2) flat = (best % in_spatial[1]) * in_spatial[0] + best / in_spatial[1];
          indices[p * out_size + o] = p * in_size + flat;
        }
      }
    }
    return Status::Ok();
    });
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeGlobalPool(bool is_max) {
  return MakeKernel([is_max](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "global pooling"));
    const Tensor& x = *in[0];
    RETURN_IF_ERROR(NeedFloat(x, "global pooling"));
    if (x.shape.size() < 3) return Status::InvalidArgument("global pooling needs spatial dims");
    Shape shape(x.shape.size(), 1);
    shape[0] = x.shape[0];
    shape[1] = x.shape[1];
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, shape));
    const int64_t planes = x.shape[0] * x.shape[1], size = ElementsOf(x) / std::max<int64_t>(planes, 1);
    const float* src = ValuesOf<float>(x);
    for (int64_t p = 0; p < planes; ++p) {
      double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t i = 0; i < size; ++i) acc = is_max ? std::max<double>(acc, src[p * size + i]) : acc + src[p * size + i];
      dst[p] = static_cast<float>(is_max ? acc : acc / static_cast<double>(size));
    }
    return Status::Ok();
  });
}

// ---- normalizations ----

// y = scale * (x - mean) / sqrt(var + epsilon) + B per channel (dim 1). With training_mode (opset
// 14) the mean and (population) variance are the batch's, and the outputs 1 and 2 are the running
// statistics updated with `momentum`, as ONNX's reference computes them.
StatusOr<std::unique_ptr<Kernel>> MakeBatchNorm(const Node& node, int) {
  ASSIGN_OR_RETURN(float epsilon, node.Float("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(float momentum, node.Float("momentum", 0.9f));
  ASSIGN_OR_RETURN(int64_t training, node.Int("training_mode", 0));
  ASSIGN_OR_RETURN(int64_t spatial, node.Int("spatial", 1));  // opsets 6-8
  if (!spatial) return Status::Unimplemented(node.Describe() + ": spatial=0 is not supported");
  return MakeKernel([epsilon, momentum, training](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 5, "BatchNormalization"));
    const Tensor& x = *in[0];
    RETURN_IF_ERROR(NeedFloat(x, "BatchNormalization"));
    if (x.shape.size() < 2) return Status::InvalidArgument("BatchNormalization needs N and C dims");
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x.shape));
    const int64_t batch = x.shape[0], channels = x.shape[1];
    const int64_t size = ElementsOf(x) / std::max<int64_t>(batch * channels, 1);
    for (size_t i = 1; i < 5; ++i) {
      RETURN_IF_ERROR(NeedFloat(*in[i], "BatchNormalization"));
      if (ElementsOf(*in[i]) != channels) return Status::InvalidArgument("BatchNormalization: parameters need one value per channel");
    }
    const float *scale = ValuesOf<float>(*in[1]), *bias = ValuesOf<float>(*in[2]);
    const float* src = ValuesOf<float>(x);
    std::vector<float> mean(ValuesOf<float>(*in[3]), ValuesOf<float>(*in[3]) + channels);
    std::vector<float> var(ValuesOf<float>(*in[4]), ValuesOf<float>(*in[4]) + channels);
    if (training != 0) {
      const double count = static_cast<double>(batch * size);
      for (int64_t c = 0; c < channels; ++c) {
        double sum = 0, squares = 0;
        for (int64_t n = 0; n < batch; ++n) {
          const float* plane = src + (n * channels + c) * size;
          for (int64_t i = 0; i < size; ++i) sum += plane[i];
        }
        const double batch_mean = sum / count;
        for (int64_t n = 0; n < batch; ++n) {
          const float* plane = src + (n * channels + c) * size;
          for (int64_t i = 0; i < size; ++i) squares += (plane[i] - batch_mean) * (plane[i] - batch_mean);
        }
        mean[c] = static_cast<float>(batch_mean);
        var[c] = static_cast<float>(squares / count);
      }
      const float* running_mean = ValuesOf<float>(*in[3]);
      const float* running_var = ValuesOf<float>(*in[4]);
      for (size_t o = 1; o < out.size() && o < 3; ++o) {
        ASSIGN_OR_RETURN(float* stat, AllocateOutputAs<float>(&out[o], DataType::kFp32, in[o + 2]->shape));
        const float* running = o == 1 ? running_mean : running_var;
        const std::vector<float>& current = o == 1 ? mean : var;
        for (int64_t c = 0; c < channels; ++c) stat[c] = running[c] * momentum + current[c] * (1 - momentum);
      }
    }
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        const float a = scale[c] / std::sqrt(var[c] + epsilon), b = bias[c] - mean[c] * a;
        const int64_t base = (n * channels + c) * size;
        for (int64_t i = 0; i < size; ++i) dst[base + i] = src[base + i] * a + b;
      }
    }
    return Status::Ok();
  });
}

// MeanVarianceNormalization: (x - mean) / (std + 1e-9) over `axes` (default N, H, W), as ONNX's
// function body defines it (the variance as E[x^2] - E[x]^2).
StatusOr<std::unique_ptr<Kernel>> MakeMeanVarianceNormalization(const Node& node, int) {
  ASSIGN_OR_RETURN(std::vector<int64_t> axes_attribute, node.Ints("axes", {0, 2, 3}));
  return MakeKernel([axes_attribute](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "MeanVarianceNormalization"));
    const Tensor& x = *in[0];
    RETURN_IF_ERROR(NeedFloat(x, "MeanVarianceNormalization"));
    const auto rank = static_cast<int64_t>(x.shape.size());
    std::vector<bool> reduced(x.shape.size(), false);
    for (int64_t axis : axes_attribute) {
      ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axis, rank, "MeanVarianceNormalization"));
      reduced[static_cast<size_t>(a)] = true;
    }
    // Each element's group: its index with the reduced dims dropped.
    Shape kept_shape;
    for (int64_t d = 0; d < rank; ++d) kept_shape.push_back(reduced[d] ? 1 : x.shape[d]);
    const std::vector<int64_t> group_strides = BroadcastStrides(kept_shape, x.shape);
    const int64_t groups = ElementsOf(Tensor{.shape = kept_shape});
    const double count = static_cast<double>(ElementsOf(x)) / static_cast<double>(std::max<int64_t>(1, groups));
    std::vector<double> sum(static_cast<size_t>(groups), 0), squares(static_cast<size_t>(groups), 0);
    const float* src = ValuesOf<float>(x);
    std::vector<int64_t> group_of(static_cast<size_t>(ElementsOf(x)));
    int64_t i = 0;
    ForEachIndex<1>(x.shape, {group_strides}, [&](const std::array<int64_t, 1>& at) { group_of[static_cast<size_t>(i++)] = at[0]; });
    for (int64_t e = 0; e < ElementsOf(x); ++e) {
      const auto g = static_cast<size_t>(group_of[static_cast<size_t>(e)]);
      sum[g] += src[e];
      squares[g] += static_cast<double>(src[e]) * src[e];
    }
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x.shape));
    for (int64_t e = 0; e < ElementsOf(x); ++e) {
      const auto g = static_cast<size_t>(group_of[static_cast<size_t>(e)]);
      const double mean = sum[g] / count;
      const double deviation = std::sqrt(std::max(0.0, squares[g] / count - mean * mean));
      dst[e] = static_cast<float>((src[e] - mean) / (deviation + 1e-9));
    }
    return Status::Ok();
  });
}

// MaxUnpool: zeros of the pooled input's shape, with each value put back where `indices` (flat
// into the whole output, as MaxPool gives them) says.
StatusOr<std::unique_ptr<Kernel>> MakeMaxUnpool(const Node& node, int) {
  ASSIGN_OR_RETURN(WindowAttributes window, ReadWindow(node));
  if (window.kernel.empty()) return Status::InvalidArgument(node.Describe() + ": kernel_shape is required");
  return MakeKernel([window](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "MaxUnpool"));
    const Tensor& x = *in[0];
    RETURN_IF_ERROR(NeedFloat(x, "MaxUnpool"));
    ASSIGN_OR_RETURN(std::vector<int64_t> indices, ReadInts(*in[1], "MaxUnpool indices"));
    if (static_cast<int64_t>(indices.size()) != ElementsOf(x)) return Status::InvalidArgument("MaxUnpool: one index per element");
    const size_t spatial = x.shape.size() - 2;
    if (x.shape.size() < 3 || window.kernel.size() != spatial) return Status::InvalidArgument("MaxUnpool: kernel_shape does not match the input");
    // The indices address the default output (each pooled dim unpooled); an output_shape input
    // places that into a larger output, index by index.
    Shape natural{x.shape[0], x.shape[1]};
    for (size_t d = 0; d < spatial; ++d) {
      const int64_t stride = window.strides.empty() ? 1 : window.strides[d];
      const int64_t pads = window.pads.empty() ? 0 : window.pads[d] + window.pads[d + spatial];
      natural.push_back((x.shape[2 + d] - 1) * stride + window.kernel[d] - pads);
    }
    Shape shape = natural;
    if (const Tensor* given = InputAt(in, 2)) {
      ASSIGN_OR_RETURN(shape, ReadInts(*given, "MaxUnpool output_shape"));
      if (shape.size() != natural.size()) return Status::InvalidArgument("MaxUnpool: output_shape has the wrong rank");
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] < natural[d]) return Status::InvalidArgument("MaxUnpool: output_shape is smaller than the unpooled input");
      }
    }
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, shape));
    std::fill(dst, dst + ElementsOf(out[0]), 0.0f);
    const float* src = ValuesOf<float>(x);
    const std::vector<int64_t> natural_strides = ContiguousStrides(natural), strides = ContiguousStrides(shape);
    const int64_t natural_size = ElementsOf(Tensor{.shape = natural});
    for (size_t i = 0; i < indices.size(); ++i) {
      int64_t rest = indices[i], at = 0;
      if (rest < 0 || rest >= natural_size) return Status::InvalidArgument("MaxUnpool: index out of range");
      for (size_t d = 0; d < natural.size(); ++d) {
        at += rest / natural_strides[d] * strides[d];
        rest %= natural_strides[d];
      }
      dst[at] = src[i];
    }
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeInstanceNorm(const Node& node, int) {
  ASSIGN_OR_RETURN(float epsilon, node.Float("epsilon", 1e-5f));
  return MakeKernel([epsilon](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 3, "InstanceNormalization"));
    const Tensor& x = *in[0];
    RETURN_IF_ERROR(NeedFloat(x, "InstanceNormalization"));
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x.shape));
    const int64_t channels = x.shape[1], planes = x.shape[0] * channels;
    const int64_t size = ElementsOf(x) / std::max<int64_t>(planes, 1);
    const float *scale = ValuesOf<float>(*in[1]), *bias = ValuesOf<float>(*in[2]), *src = ValuesOf<float>(x);
    for (int64_t p = 0; p < planes; ++p) {
      double sum = 0, squares = 0;
      for (int64_t i = 0; i < size; ++i) sum += src[p * size + i];
      const double mean = sum / static_cast<double>(size);
      for (int64_t i = 0; i < size; ++i) squares += (src[p * size + i] - mean) * (src[p * size + i] - mean);
      const double inv = 1.0 / std::sqrt(squares / static_cast<double>(size) + epsilon);
      const int64_t c = p % channels;
      for (int64_t i = 0; i < size; ++i) dst[p * size + i] = static_cast<float>((src[p * size + i] - mean) * inv * scale[c] + bias[c]);
    }
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeLayerNorm(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", -1));
  ASSIGN_OR_RETURN(float epsilon, node.Float("epsilon", 1e-5f));
  return MakeKernel([axis_attribute, epsilon](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "LayerNormalization"));
    const Tensor& x = *in[0];
    RETURN_IF_ERROR(NeedFloat(x, "LayerNormalization"));
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "LayerNormalization"));
    int64_t rows = 1, size = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? rows : size) *= x.shape[d];
    Shape normalized(x.shape.begin() + axis, x.shape.end());
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x.shape));
    Shape stat_shape = x.shape;
    for (int64_t d = axis; d < rank; ++d) stat_shape[d] = 1;
    float *mean_out = nullptr, *inv_out = nullptr;
    if (out.size() > 1) {
      ASSIGN_OR_RETURN(mean_out, AllocateOutputAs<float>(&out[1], DataType::kFp32, stat_shape));
    }
    if (out.size() > 2) {
      ASSIGN_OR_RETURN(inv_out, AllocateOutputAs<float>(&out[2], DataType::kFp32, stat_shape));
    }
    // Scale and bias broadcast onto the normalized dims.
    auto expand = [&](const Tensor* t, std::vector<float>* values) -> Status {
      values->assign(static_cast<size_t>(size), 0.0f);
      if (t == nullptr) return Status::Ok();
      ASSIGN_OR_RETURN(Shape s, BroadcastShapes(t->shape, normalized));
      if (s != normalized) return Status::InvalidArgument("LayerNormalization: scale/bias do not broadcast");
      int64_t i = 0;
      const float* v = ValuesOf<float>(*t);
      ForEachIndex<1>(normalized, std::array<std::vector<int64_t>, 1>{BroadcastStrides(t->shape, normalized)},
                      [&](const std::array<int64_t, 1>& at) { (*values)[i++] = v[at[0]]; });
      return Status::Ok();
    };
    std::vector<float> scale, bias;
    RETURN_IF_ERROR(expand(in[1], &scale));
    RETURN_IF_ERROR(expand(InputAt(in, 2), &bias));
    const float* src = ValuesOf<float>(x);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = src + r * size;
      double sum = 0, squares = 0;
      for (int64_t i = 0; i < size; ++i) sum += row[i];
      const double mean = sum / static_cast<double>(size);
      for (int64_t i = 0; i < size; ++i) squares += (row[i] - mean) * (row[i] - mean);
      const double inv = 1.0 / std::sqrt(squares / static_cast<double>(size) + epsilon);
      for (int64_t i = 0; i < size; ++i) dst[r * size + i] = static_cast<float>((row[i] - mean) * inv * scale[i] + bias[i]);
      if (mean_out) mean_out[r] = static_cast<float>(mean);
      if (inv_out) inv_out[r] = static_cast<float>(inv);
    }
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeLrn(const Node& node, int) {
  ASSIGN_OR_RETURN(float alpha, node.Float("alpha", 1e-4f));
  ASSIGN_OR_RETURN(float beta, node.Float("beta", 0.75f));
  ASSIGN_OR_RETURN(float bias, node.Float("bias", 1.0f));
  ASSIGN_OR_RETURN(int64_t size, node.Int("size", 0));
  if (size <= 0) return Status::InvalidArgument(node.Describe() + ": size must be positive");
  return MakeKernel([=](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "LRN"));
    const Tensor& x = *in[0];
    RETURN_IF_ERROR(NeedFloat(x, "LRN"));
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x.shape));
    const int64_t batch = x.shape[0], channels = x.shape[1];
    const int64_t plane = ElementsOf(x) / std::max<int64_t>(batch * channels, 1);
    const float* src = ValuesOf<float>(x);
    const int64_t before = (size - 1) / 2, after = size - 1 - before;
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t i = 0; i < plane; ++i) {
          double sum = 0;
          for (int64_t k = std::max<int64_t>(0, c - before); k <= std::min(channels - 1, c + after); ++k) {
            const double v = src[(n * channels + k) * plane + i];
            sum += v * v;
          }
          const int64_t at = (n * channels + c) * plane + i;
          dst[at] = static_cast<float>(src[at] / std::pow(bias + alpha / static_cast<double>(size) * sum, beta));
        }
      }
    }
    return Status::Ok();
  });
}

// ---- softmax family ----

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

StatusOr<std::unique_ptr<Kernel>> MakeSoftmax(const Node& node, int opset, SoftmaxKind kind) {
  // Before opset 13 the input is coerced to 2-D at `axis` (default 1); from 13, one axis (default -1).
  const bool coerce = opset < 13;
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", coerce ? 1 : -1));
  return MakeKernel([=](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Softmax"));
    const Tensor& x = *in[0];
    RETURN_IF_ERROR(NeedFloat(x, "Softmax"));
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attribute, rank, "Softmax"));
    int64_t outer = 1, dim = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (d < axis) outer *= x.shape[d];
      else if (d == axis || coerce) dim *= x.shape[d];
      else inner *= x.shape[d];
    }
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, x.shape));
    const float* src = ValuesOf<float>(x);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t k) { return (o * dim + k) * inner + i; };
        float max = -std::numeric_limits<float>::infinity();
        int64_t argmax = 0;
        for (int64_t k = 0; k < dim; ++k) {
          if (src[at(k)] > max) {
            max = src[at(k)];
            argmax = k;
          }
        }
        if (kind == SoftmaxKind::kHardmax) {
          for (int64_t k = 0; k < dim; ++k) dst[at(k)] = k == argmax ? 1.0f : 0.0f;
          continue;
        }
        double sum = 0;
        for (int64_t k = 0; k < dim; ++k) sum += std::exp(static_cast<double>(src[at(k)]) - max);
        for (int64_t k = 0; k < dim; ++k) {
          const double shifted = static_cast<double>(src[at(k)]) - max;
          dst[at(k)] = static_cast<float>(kind == SoftmaxKind::kLogSoftmax ? shifted - std::log(sum) : std::exp(shifted) / sum);
        }
      }
    }
    return Status::Ok();
  });
}

}  // namespace

Status MatMulTensors(const Tensor& left, const Tensor& right, Tensor* out) {
  if (left.dtype != right.dtype) return Status::InvalidArgument("MatMul: input types differ");
  Shape a = left.shape, b = right.shape;
  if (a.empty() || b.empty()) return Status::InvalidArgument("MatMul: scalar inputs");
  const bool a_vector = a.size() == 1, b_vector = b.size() == 1;
  if (a_vector) a.insert(a.begin(), 1);
  if (b_vector) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (b[b.size() - 2] != k) {
    return Status::InvalidArgument("MatMul: " + ShapeToString(left.shape) + " x " + ShapeToString(right.shape));
  }
  Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  ASSIGN_OR_RETURN(Shape batch, BroadcastShapes(a_batch, b_batch));
  Shape shape = batch;
  if (!a_vector) shape.push_back(m);
  if (!b_vector) shape.push_back(n);
  std::vector<int64_t> a_strides = BroadcastStrides(a_batch, batch), b_strides = BroadcastStrides(b_batch, batch);
  return DispatchNumeric(left.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(out, left.dtype, shape));
    const T* x = ValuesOf<T>(left);
    const T* y = ValuesOf<T>(right);
    int64_t i = 0;
    ForEachIndex<2>(batch, std::array<std::vector<int64_t>, 2>{a_strides, b_strides},
                    [&](const std::array<int64_t, 2>& at) {
                      MatrixMultiply(x + at[0] * m * k, k, 1, y + at[1] * k * n, n, 1, dst + i * m * n, m, n, k);
                      ++i;
                    });
    return Status::Ok();
  });
}

namespace {

// The convolution of FP32 (summed in double) or INT32 (summed in int64) tensors.
template <typename T, typename Sum>
Status Convolve(const Tensor& x, const Tensor& weight, const Tensor* bias_tensor, const WindowAttributes& window,
                int64_t group, Tensor* out) {
  if (x.shape.size() < 3 || weight.shape.size() != x.shape.size()) return Status::InvalidArgument("Conv: bad ranks");
  if (weight.dtype != x.dtype) return Status::InvalidArgument("Conv: input and weight types differ");
  const int64_t batch = x.shape[0], channels = x.shape[1], filters = weight.shape[0];
  const int64_t group_channels = weight.shape[1];
  if (channels != group_channels * group || filters % group) return Status::InvalidArgument("Conv: channels do not match groups");
  if (bias_tensor != nullptr && (bias_tensor->dtype != x.dtype || ElementsOf(*bias_tensor) != filters))
    return Status::InvalidArgument("Conv: the bias needs one value per filter, of the input's type");
  Shape in_spatial(x.shape.begin() + 2, x.shape.end());
  WindowAttributes w = window;
  if (w.kernel.empty()) w.kernel.assign(weight.shape.begin() + 2, weight.shape.end());
  std::vector<int64_t> out_spatial;
  RETURN_IF_ERROR(ResolveWindow(&w, in_spatial, &out_spatial));
  Shape shape{batch, filters};
  shape.insert(shape.end(), out_spatial.begin(), out_spatial.end());
  ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(out, x.dtype, shape));
  const T* src = ValuesOf<T>(x);
  const T* weights = ValuesOf<T>(weight);
  const T* bias = bias_tensor ? ValuesOf<T>(*bias_tensor) : nullptr;
  const auto table = TapTable(w, in_spatial, out_spatial);
  const std::vector<int64_t> in_strides = ContiguousStrides(in_spatial);
  const int64_t in_size = Product(in_spatial), out_size = Product(out_spatial), taps = Product(w.kernel);
  const int64_t filters_per_group = filters / group;
  std::vector<int64_t> offsets(static_cast<size_t>(taps));
  for (int64_t o = 0; o < out_size; ++o) {
    ForEachTap(w, table, out_spatial, in_strides, o, [&](int64_t offset, int64_t t) { offsets[t] = offset; });
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t f = 0; f < filters; ++f) {
        const int64_t g = f / filters_per_group;
        Sum sum = bias ? static_cast<Sum>(bias[f]) : Sum{0};
        for (int64_t c = 0; c < group_channels; ++c) {
          const T* plane = src + (n * channels + g * group_channels + c) * in_size;
          const T* kernel = weights + (f * group_channels + c) * taps;
          for (int64_t t = 0; t < taps; ++t) {
            if (offsets[t] >= 0) sum += static_cast<Sum>(plane[offsets[t]]) * static_cast<Sum>(kernel[t]);
          }
        }
        dst[(n * filters + f) * out_size + o] = static_cast<T>(sum);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status ConvolveTensors(const Tensor& x, const Tensor& weight, const Tensor* bias, const WindowAttributes& window,
                       int64_t group, Tensor* out) {
  if (x.dtype == DataType::kInt32) return Convolve<int32_t, int64_t>(x, weight, bias, window, group, out);
  if (x.dtype == DataType::kFp32) return Convolve<float, double>(x, weight, bias, window, group, out);
  return Status::Unimplemented("Conv: element type " + std::string(DataTypeName(x.dtype)) + " is not supported here");
}

void RegisterNnKernels(KernelRegistry* r) {
  // These three may carry post-ops fused by the optimizer (kernels/post_ops.h).
  r->Register("MatMul", 1, WithPostOps(MakeMatMul));
  r->Register("Gemm", 6, WithPostOps(MakeGemm));  // opset 6: C always broadcasts when it can
  r->Register("Conv", 1, WithPostOps(MakeConv));
  r->Register("ConvTranspose", 1, MakeConvTranspose);
  r->Register("MaxPool", 1, [](const Node& n, int) { return MakePool(n, true); });
  r->Register("AveragePool", 1, [](const Node& n, int) { return MakePool(n, false); });
  r->Register("GlobalMaxPool", 1, [](const Node&, int) { return MakeGlobalPool(true); });
  r->Register("GlobalAveragePool", 1, [](const Node&, int) { return MakeGlobalPool(false); });
  r->Register("BatchNormalization", 6, MakeBatchNorm);
  r->Register("InstanceNormalization", 1, MakeInstanceNorm);
  r->Register("MeanVarianceNormalization", 9, MakeMeanVarianceNormalization);
  r->Register("MaxUnpool", 9, MakeMaxUnpool);
  r->Register("LayerNormalization", 17, MakeLayerNorm);
  // What the optimizer fuses a spelled-out LayerNorm into in models older than opset 17.
  r->Register("inferd.LayerNormalization", 1, MakeLayerNorm);
  r->Register("LRN", 1, MakeLrn);
  r->Register("Softmax", 1, [](const Node& n, int o) { return MakeSoftmax(n, o, SoftmaxKind::kSoftmax); });
  r->Register("LogSoftmax", 1, [](const Node& n, int o) { return MakeSoftmax(n, o, SoftmaxKind::kLogSoftmax); });
  r->Register("Hardmax", 1, [](const Node& n, int o) { return MakeSoftmax(n, o, SoftmaxKind::kHardmax); });
}

}  // namespace inferd::runtime
