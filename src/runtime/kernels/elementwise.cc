// Element-wise kernels: unary math and activations, broadcasting binary arithmetic, comparisons,
// logic, Where, Clip and Cast. Reference implementations in plain C++; fused fast paths come from
// the optimizer (oneDNN post-ops), and these are what those are tested against.
#include <bit>
#include <cmath>
#include <functional>
#include <optional>
#include <limits>
#include <type_traits>

#include "runtime/ir/onnx_types.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

Status NeedInputs(Inputs inputs, size_t count, std::string_view op) { return RequireInputs(inputs, count, op); }

// ---- unary ----

template <typename T, typename Op>
Status MapUnary(const Tensor& in, Tensor* out, Op op) {
  ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(out, in.dtype, in.shape));
  const T* src = ValuesOf<T>(in);
  const int64_t n = ElementsOf(in);
  for (int64_t i = 0; i < n; ++i) dst[i] = op(src[i]);
  return Status::Ok();
}

// A float op with attributes read at load: make(node) returns the scalar function or an error.
template <typename Make>
KernelFactory FloatUnaryWithAttributes(Make make) {
  return [make](const Node& node, int) -> StatusOr<std::unique_ptr<Kernel>> {
    auto op = make(node);
    if (!op.ok()) return op.status();
    std::string name = node.op_type;
    return MakeKernel([op = *op, name](Inputs in, Outputs out) -> Status {
      RETURN_IF_ERROR(NeedInputs(in, 1, name));
      return DispatchFloat(in[0]->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return MapUnary<T>(*in[0], &out[0], [&](T x) { return static_cast<T>(op(static_cast<double>(x))); });
      });
    });
  };
}

// A float-only op without attributes, f(x) for float and double.
template <typename Op>
KernelFactory FloatUnary(Op op) {
  return FloatUnaryWithAttributes([op](const Node&) { return StatusOr<Op>(op); });
}

// Abs, Neg, Sign, Relu also take integers.
template <typename Op>
KernelFactory NumericUnary(Op op) {
  return [op](const Node& node, int) -> StatusOr<std::unique_ptr<Kernel>> {
    std::string name = node.op_type;
    return MakeKernel([op, name](Inputs in, Outputs out) -> Status {
      RETURN_IF_ERROR(NeedInputs(in, 1, name));
      return DispatchNumeric(in[0]->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return MapUnary<T>(*in[0], &out[0], [&](T x) { return static_cast<T>(op(x)); });
      });
    });
  };
}

using DoubleFn = std::function<double(double)>;

StatusOr<DoubleFn> MakeElu(const Node& node) {
  ASSIGN_OR_RETURN(float alpha, node.Float("alpha", 1.0f));
  return DoubleFn([alpha](double x) { return x >= 0 ? x : alpha * (std::exp(x) - 1); });
}
StatusOr<DoubleFn> MakeCelu(const Node& node) {
  ASSIGN_OR_RETURN(float alpha, node.Float("alpha", 1.0f));
  return DoubleFn([alpha](double x) { return std::max(0.0, x) + std::min(0.0, alpha * (std::exp(x / alpha) - 1)); });
}
StatusOr<DoubleFn> MakeSelu(const Node& node) {
  ASSIGN_OR_RETURN(float alpha, node.Float("alpha", 1.67326319217681884765625f));
  ASSIGN_OR_RETURN(float gamma, node.Float("gamma", 1.05070102214813232421875f));
  return DoubleFn([alpha, gamma](double x) { return gamma * (x > 0 ? x : alpha * (std::exp(x) - 1)); });
}
StatusOr<DoubleFn> MakeLeakyRelu(const Node& node) {
  ASSIGN_OR_RETURN(float alpha, node.Float("alpha", 0.01f));
  return DoubleFn([alpha](double x) { return x >= 0 ? x : alpha * x; });
}
StatusOr<DoubleFn> MakeHardSigmoid(const Node& node) {
  ASSIGN_OR_RETURN(float alpha, node.Float("alpha", 0.2f));
  ASSIGN_OR_RETURN(float beta, node.Float("beta", 0.5f));
  return DoubleFn([alpha, beta](double x) { return std::clamp(alpha * x + beta, 0.0, 1.0); });
}
StatusOr<DoubleFn> MakeThresholdedRelu(const Node& node) {
  ASSIGN_OR_RETURN(float alpha, node.Float("alpha", 1.0f));
  return DoubleFn([alpha](double x) { return x > alpha ? x : 0.0; });
}
StatusOr<DoubleFn> MakeShrink(const Node& node) {
  ASSIGN_OR_RETURN(float bias, node.Float("bias", 0.0f));
  ASSIGN_OR_RETURN(float lambd, node.Float("lambd", 0.5f));
  return DoubleFn([bias, lambd](double x) { return x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0); });
}

double Sigmoid(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }

void RegisterUnary(KernelRegistry* r) {
  r->Register("Exp", 1, FloatUnary([](double x) { return std::exp(x); }));
  r->Register("Log", 1, FloatUnary([](double x) { return std::log(x); }));
  r->Register("Sqrt", 1, FloatUnary([](double x) { return std::sqrt(x); }));
  r->Register("Reciprocal", 1, FloatUnary([](double x) { return 1 / x; }));
  r->Register("Sigmoid", 1, FloatUnary(Sigmoid));
  // x * sigmoid(x) (SiLU), what the optimizer makes of Mul(x, Sigmoid(x)).
  r->Register("inferd.Swish", 1, FloatUnary([](double x) { return x * Sigmoid(x); }));
  // Exact GELU, what the optimizer makes of x * 0.5 * (1 + Erf(x / sqrt(2))).
  r->Register("inferd.Gelu", 1, FloatUnary([](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }));
  r->Register("Tanh", 1, FloatUnary([](double x) { return std::tanh(x); }));
  r->Register("Erf", 1, FloatUnary([](double x) { return std::erf(x); }));
  r->Register("Floor", 1, FloatUnary([](double x) { return std::floor(x); }));
  r->Register("Ceil", 1, FloatUnary([](double x) { return std::ceil(x); }));
  r->Register("Round", 11, FloatUnary([](double x) { return std::nearbyint(x); }));  // half to even
  r->Register("Sin", 7, FloatUnary([](double x) { return std::sin(x); }));
  r->Register("Cos", 7, FloatUnary([](double x) { return std::cos(x); }));
  r->Register("Tan", 7, FloatUnary([](double x) { return std::tan(x); }));
  r->Register("Asin", 7, FloatUnary([](double x) { return std::asin(x); }));
  r->Register("Acos", 7, FloatUnary([](double x) { return std::acos(x); }));
  r->Register("Atan", 7, FloatUnary([](double x) { return std::atan(x); }));
  r->Register("Sinh", 9, FloatUnary([](double x) { return std::sinh(x); }));
  r->Register("Cosh", 9, FloatUnary([](double x) { return std::cosh(x); }));
  r->Register("Asinh", 9, FloatUnary([](double x) { return std::asinh(x); }));
  r->Register("Acosh", 9, FloatUnary([](double x) { return std::acosh(x); }));
  r->Register("Atanh", 9, FloatUnary([](double x) { return std::atanh(x); }));
  r->Register("Softplus", 1, FloatUnary([](double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }));
  r->Register("Softsign", 1, FloatUnary([](double x) { return x / (1 + std::abs(x)); }));
  r->Register("HardSwish", 14, FloatUnary([](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }));
  r->Register("Elu", 1, FloatUnaryWithAttributes(MakeElu));
  r->Register("Celu", 12, FloatUnaryWithAttributes(MakeCelu));
  r->Register("Selu", 1, FloatUnaryWithAttributes(MakeSelu));
  r->Register("LeakyRelu", 1, FloatUnaryWithAttributes(MakeLeakyRelu));
  r->Register("HardSigmoid", 1, FloatUnaryWithAttributes(MakeHardSigmoid));
  r->Register("ThresholdedRelu", 10, FloatUnaryWithAttributes(MakeThresholdedRelu));
  r->Register("Shrink", 9, FloatUnaryWithAttributes(MakeShrink));
  r->Register("Abs", 1, NumericUnary([](auto x) {
                if constexpr (std::is_unsigned_v<decltype(x)>) return x;
                else return x < 0 ? -x : x;
              }));
  r->Register("Neg", 1, NumericUnary([](auto x) { return -x; }));
  r->Register("Sign", 9, NumericUnary([](auto x) { return x > 0 ? 1 : (x < 0 ? -1 : 0); }));
  r->Register("Relu", 1, NumericUnary([](auto x) { return x > 0 ? x : decltype(x){0}; }));
}

// ---- Not, IsNaN, IsInf ----

void RegisterPredicates(KernelRegistry* r) {
  r->Register("Not", 1, [](const Node&, int) {
    return MakeKernel([](Inputs in, Outputs out) -> Status {
      RETURN_IF_ERROR(NeedInputs(in, 1, "Not"));
      if (in[0]->dtype != DataType::kBool) return Status::InvalidArgument("Not needs a bool tensor");
      return MapUnary<bool>(*in[0], &out[0], [](bool x) { return !x; });
    });
  });
  auto classify = [](auto predicate) {
    return [predicate](Inputs in, Outputs out) -> Status {
      RETURN_IF_ERROR(NeedInputs(in, 1, "IsNaN/IsInf"));
      return DispatchFloat(in[0]->dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        ASSIGN_OR_RETURN(bool* dst, AllocateOutputAs<bool>(&out[0], DataType::kBool, in[0]->shape));
        const T* src = ValuesOf<T>(*in[0]);
        for (int64_t i = 0; i < ElementsOf(*in[0]); ++i) dst[i] = predicate(static_cast<double>(src[i]));
        return Status::Ok();
      });
    };
  };
  r->Register("IsNaN", 9, [classify](const Node&, int) {
    return MakeKernel(classify([](double x) { return std::isnan(x); }));
  });
  r->Register("IsInf", 10, [classify](const Node& node, int) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(int64_t negative, node.Int("detect_negative", 1));
    ASSIGN_OR_RETURN(int64_t positive, node.Int("detect_positive", 1));
    return MakeKernel(classify([negative, positive](double x) {
      return std::isinf(x) && ((x < 0 && negative) || (x > 0 && positive));
    }));
  });
}

// ---- binary with broadcasting ----

template <typename In, typename Out, typename Op>
Status BroadcastBinary(const Tensor& a, const Tensor& b, Tensor* out, DataType out_type, Op op) {
  ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(a.shape, b.shape));
  ASSIGN_OR_RETURN(Out * dst, AllocateOutputAs<Out>(out, out_type, shape));
  const In* x = ValuesOf<In>(a);
  const In* y = ValuesOf<In>(b);
  std::vector<int64_t> sa = BroadcastStrides(a.shape, shape), sb = BroadcastStrides(b.shape, shape);
  // Collapse the trailing dims along which each operand is either contiguous or constant into one
  // inner loop (a per-channel scale over [N, C, H, W] runs H*W elements at a time).
  bool a_contiguous = true, a_constant = true, b_contiguous = true, b_constant = true;
  int64_t inner = 1;
  size_t outer_rank = shape.size();
  while (outer_rank > 0) {
    const size_t d = outer_rank - 1;
    const bool unit = shape[d] == 1;
    const bool ac = a_contiguous && (unit || sa[d] == inner), az = a_constant && (unit || sa[d] == 0);
    const bool bc = b_contiguous && (unit || sb[d] == inner), bz = b_constant && (unit || sb[d] == 0);
    if (!(ac || az) || !(bc || bz)) break;
    a_contiguous = ac, a_constant = az, b_contiguous = bc, b_constant = bz;
    inner *= shape[d];
    --outer_rank;
  }
  const int64_t step_a = a_contiguous ? 1 : 0, step_b = b_contiguous ? 1 : 0;
  Shape outer(shape.begin(), shape.begin() + static_cast<int64_t>(outer_rank));
  sa.resize(outer_rank);
  sb.resize(outer_rank);
  Out* next = dst;
  ForEachIndex<2>(outer, std::array<std::vector<int64_t>, 2>{sa, sb}, [&](const std::array<int64_t, 2>& at) {
    const In* xa = x + at[0];
    const In* yb = y + at[1];
    if (step_a && step_b) {
      for (int64_t i = 0; i < inner; ++i) next[i] = op(xa[i], yb[i]);
    } else if (step_a) {
      const In scalar = *yb;
      for (int64_t i = 0; i < inner; ++i) next[i] = op(xa[i], scalar);
    } else if (step_b) {
      const In scalar = *xa;
      for (int64_t i = 0; i < inner; ++i) next[i] = op(scalar, yb[i]);
    } else {
      const Out value = op(*xa, *yb);
      for (int64_t i = 0; i < inner; ++i) next[i] = value;
    }
    next += inner;
  });
  return Status::Ok();
}

Status SameType(const Tensor& a, const Tensor& b, std::string_view op) {
  if (a.dtype != b.dtype) {
    return Status::InvalidArgument(std::string(op) + ": input types differ (" + std::string(DataTypeName(a.dtype)) +
                                   " and " + std::string(DataTypeName(b.dtype)) + ")");
  }
  return Status::Ok();
}

// Before opset 7, B is broadcast onto A only with `broadcast: 1`, aligned at `axis` (at the end
// when absent, which numpy rules already do).
StatusOr<std::optional<int64_t>> LegacyBroadcastAxis(const Node& node, int opset) {
  if (opset >= 7) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t broadcast, node.Int("broadcast", 0));
  if (!broadcast || !node.Has("axis")) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t axis, node.Int("axis", 0));
  return std::optional<int64_t>(axis);
}

// B viewed with A's rank: its dims placed from `axis`, ones elsewhere.
StatusOr<Tensor> AlignAtAxis(const Tensor& a, const Tensor& b, std::optional<int64_t> axis) {
  if (!axis) return b;
  const int64_t rank = static_cast<int64_t>(a.shape.size());
  const int64_t at = *axis < 0 ? *axis + rank : *axis;
  if (at < 0 || at + static_cast<int64_t>(b.shape.size()) > rank) {
    return Status::InvalidArgument("legacy broadcast axis " + std::to_string(*axis) + " does not fit");
  }
  Tensor view = b;
  view.shape.assign(static_cast<size_t>(at), 1);
  view.shape.insert(view.shape.end(), b.shape.begin(), b.shape.end());
  view.shape.resize(static_cast<size_t>(rank), 1);
  return view;
}

// Arithmetic on every numeric type: Add, Sub, Mul, Div.
template <typename Op>
KernelFactory Arithmetic(Op op) {
  return [op](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    std::string name = node.op_type;
    ASSIGN_OR_RETURN(std::optional<int64_t> legacy_axis, LegacyBroadcastAxis(node, opset));
    return MakeKernel([op, name, legacy_axis](Inputs in, Outputs out) -> Status {
      RETURN_IF_ERROR(NeedInputs(in, 2, name));
      RETURN_IF_ERROR(SameType(*in[0], *in[1], name));
      ASSIGN_OR_RETURN(Tensor b, AlignAtAxis(*in[0], *in[1], legacy_axis));
      return DispatchNumeric(in[0]->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return BroadcastBinary<T, T>(*in[0], b, &out[0], in[0]->dtype,
                                     [&](T x, T y) { return static_cast<T>(op(x, y)); });
      });
    });
  };
}

template <typename T>
T IntegerDivide(T x, T y) {
  if (y == 0) return 0;  // defined instead of a crash on model data; ORT leaves it undefined
  return x / y;
}

template <typename Op>
KernelFactory Comparison(Op op) {
  return [op](const Node& node, int) -> StatusOr<std::unique_ptr<Kernel>> {
    std::string name = node.op_type;
    return MakeKernel([op, name](Inputs in, Outputs out) -> Status {
      RETURN_IF_ERROR(NeedInputs(in, 2, name));
      RETURN_IF_ERROR(SameType(*in[0], *in[1], name));
      if (in[0]->dtype == DataType::kBool) {
        return BroadcastBinary<bool, bool>(*in[0], *in[1], &out[0], DataType::kBool, op);
      }
      return DispatchNumeric(in[0]->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return BroadcastBinary<T, bool>(*in[0], *in[1], &out[0], DataType::kBool, op);
      });
    });
  };
}

template <typename Op>
KernelFactory Logical(Op op) {
  return [op](const Node& node, int) -> StatusOr<std::unique_ptr<Kernel>> {
    std::string name = node.op_type;
    return MakeKernel([op, name](Inputs in, Outputs out) -> Status {
      RETURN_IF_ERROR(NeedInputs(in, 2, name));
      if (in[0]->dtype != DataType::kBool || in[1]->dtype != DataType::kBool) {
        return Status::InvalidArgument(name + " needs bool inputs");
      }
      return BroadcastBinary<bool, bool>(*in[0], *in[1], &out[0], DataType::kBool, op);
    });
  };
}

StatusOr<std::unique_ptr<Kernel>> MakePow(const Node& node, int opset) {
  ASSIGN_OR_RETURN(std::optional<int64_t> legacy_axis, LegacyBroadcastAxis(node, opset));
  return MakeKernel([legacy_axis](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(NeedInputs(in, 2, "Pow"));
    const Tensor& base = *in[0];
    ASSIGN_OR_RETURN(const Tensor exponent, AlignAtAxis(base, *in[1], legacy_axis));
    // The exponent may have another type than the base (opset 12); read it as double.
    Tensor exponent_as_double;
    if (exponent.dtype != DataType::kFp64) {
      ASSIGN_OR_RETURN(double* values, AllocateOutputAs<double>(&exponent_as_double, DataType::kFp64, exponent.shape));
      RETURN_IF_ERROR(DispatchNumeric(exponent.dtype, [&](auto tag) {
        using E = typename decltype(tag)::type;
        for (int64_t i = 0; i < ElementsOf(exponent); ++i) values[i] = static_cast<double>(ValuesOf<E>(exponent)[i]);
        return Status::Ok();
      }));
    }
    const Tensor& e = exponent.dtype == DataType::kFp64 ? exponent : exponent_as_double;
    return DispatchNumeric(base.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(base.shape, e.shape));
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], base.dtype, shape));
      std::array<std::vector<int64_t>, 2> strides{BroadcastStrides(base.shape, shape), BroadcastStrides(e.shape, shape)};
      const T* x = ValuesOf<T>(base);
      const double* y = ValuesOf<double>(e);
      int64_t i = 0;
      ForEachIndex<2>(shape, strides, [&](const std::array<int64_t, 2>& at) {
        dst[i++] = static_cast<T>(std::pow(static_cast<double>(x[at[0]]), y[at[1]]));
      });
      return Status::Ok();
    });
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeMod(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t fmod, node.Int("fmod", 0));
  return MakeKernel([fmod](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(NeedInputs(in, 2, "Mod"));
    RETURN_IF_ERROR(SameType(*in[0], *in[1], "Mod"));
    return DispatchNumeric(in[0]->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return BroadcastBinary<T, T>(*in[0], *in[1], &out[0], in[0]->dtype, [fmod](T x, T y) -> T {
        if constexpr (std::is_floating_point_v<T>) {
          T r = std::fmod(x, y);
          if (!fmod && r != 0 && ((r < 0) != (y < 0))) r += y;  // Python's sign convention
          return r;
        } else {
          if (y == 0) return 0;
          T r = static_cast<T>(x % y);
          if constexpr (std::is_signed_v<T>) {
            if (!fmod && r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
          } else {
            (void)fmod;  // unsigned: both conventions agree
          }
          return r;
        }
      });
    });
  });
}

// BitShift on unsigned integers; shifts of the type's width or more give 0.
StatusOr<std::unique_ptr<Kernel>> MakeBitShift(const Node& node, int) {
  ASSIGN_OR_RETURN(std::string direction, node.String("direction", ""));
  if (direction != "LEFT" && direction != "RIGHT") {
    return Status::InvalidArgument(node.Describe() + ": direction must be LEFT or RIGHT");
  }
  const bool left = direction == "LEFT";
  return MakeKernel([left](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(NeedInputs(in, 2, "BitShift"));
    RETURN_IF_ERROR(SameType(*in[0], *in[1], "BitShift"));
    return DispatchNumeric(in[0]->dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_unsigned_v<T>) {
        return BroadcastBinary<T, T>(*in[0], *in[1], &out[0], in[0]->dtype, [left](T x, T y) -> T {
          if (y >= sizeof(T) * 8) return 0;
          return static_cast<T>(left ? x << y : x >> y);
        });
      } else {
        return Status::InvalidArgument("BitShift takes unsigned integers");
      }
    });
  });
}

// PRelu broadcasts the slope onto X (unidirectional).
// Before opset 7 a 1-D slope with one value per channel applies along dim 1.
StatusOr<std::unique_ptr<Kernel>> MakePRelu(const Node&, int opset) {
  return MakeKernel([opset](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(NeedInputs(in, 2, "PRelu"));
    RETURN_IF_ERROR(SameType(*in[0], *in[1], "PRelu"));
    Tensor slope = *in[1];
    const Shape& x_shape = in[0]->shape;
    if (opset < 7 && slope.shape.size() == 1 && x_shape.size() > 2 && slope.shape[0] == x_shape[1] && slope.shape[0] > 1) {
      ASSIGN_OR_RETURN(slope, AlignAtAxis(*in[0], *in[1], 1));
    }
    return DispatchNumeric(in[0]->dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return BroadcastBinary<T, T>(*in[0], slope, &out[0], in[0]->dtype,
                                   [](T x, T slope) { return x < 0 ? static_cast<T>(x * slope) : x; });
    });
  });
}

// Sum, Mean, Max, Min over any number of inputs, folded pairwise.
template <typename Op>
KernelFactory Variadic(Op op, bool mean) {
  return [op, mean](const Node& node, int) -> StatusOr<std::unique_ptr<Kernel>> {
    std::string name = node.op_type;
    return MakeKernel([op, mean, name](Inputs in, Outputs out) -> Status {
      RETURN_IF_ERROR(NeedInputs(in, 1, name));
      for (const Tensor* t : in) RETURN_IF_ERROR(SameType(*in[0], *t, name));
      return DispatchNumeric(in[0]->dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        Tensor accumulator = *in[0];
        if (in.size() == 1) {
          ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&accumulator, in[0]->dtype, in[0]->shape));
          std::copy_n(ValuesOf<T>(*in[0]), ElementsOf(*in[0]), dst);
        }
        for (size_t k = 1; k < in.size(); ++k) {
          Tensor next;
          auto combine = [&](T x, T y) { return static_cast<T>(op(x, y)); };
          RETURN_IF_ERROR((BroadcastBinary<T, T>(accumulator, *in[k], &next, in[0]->dtype, combine)));
          accumulator = std::move(next);
        }
        if (mean) {
          T* values = const_cast<T*>(ValuesOf<T>(accumulator));  // our own fresh buffer
          for (int64_t i = 0; i < ElementsOf(accumulator); ++i) values[i] = static_cast<T>(values[i] / static_cast<T>(in.size()));
        }
        out[0] = std::move(accumulator);
        return Status::Ok();
      });
    });
  };
}

template <typename T>
T MaxOf(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  }
  return x > y ? x : y;
}
template <typename T>
T MinOf(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  }
  return x < y ? x : y;
}

void RegisterBinary(KernelRegistry* r) {
  r->Register("Add", 1, Arithmetic([](auto x, auto y) { return x + y; }));
  r->Register("Sub", 1, Arithmetic([](auto x, auto y) { return x - y; }));
  r->Register("Mul", 1, Arithmetic([](auto x, auto y) { return x * y; }));
  r->Register("Div", 1, Arithmetic([](auto x, auto y) {
                if constexpr (std::is_floating_point_v<decltype(x)>) return x / y;
                else return IntegerDivide(x, y);
              }));
  r->Register("Pow", 1, MakePow);
  r->Register("Mod", 10, MakeMod);
  r->Register("BitShift", 11, MakeBitShift);
  r->Register("PRelu", 6, MakePRelu);
  r->Register("Sum", 6, Variadic([](auto x, auto y) { return x + y; }, false));
  r->Register("Mean", 6, Variadic([](auto x, auto y) { return x + y; }, true));
  r->Register("Max", 6, Variadic([](auto x, auto y) { return MaxOf(x, y); }, false));
  r->Register("Min", 6, Variadic([](auto x, auto y) { return MinOf(x, y); }, false));
  r->Register("Equal", 7, Comparison([](auto x, auto y) { return x == y; }));
  r->Register("Less", 7, Comparison([](auto x, auto y) { return x < y; }));
  r->Register("Greater", 7, Comparison([](auto x, auto y) { return x > y; }));
  r->Register("LessOrEqual", 12, Comparison([](auto x, auto y) { return x <= y; }));
  r->Register("GreaterOrEqual", 12, Comparison([](auto x, auto y) { return x >= y; }));
  r->Register("And", 7, Logical([](bool x, bool y) { return x && y; }));
  r->Register("Or", 7, Logical([](bool x, bool y) { return x || y; }));
  r->Register("Xor", 7, Logical([](bool x, bool y) { return x != y; }));
}

// ---- Where, Clip, Cast ----

StatusOr<std::unique_ptr<Kernel>> MakeWhere(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(NeedInputs(in, 3, "Where"));
    const Tensor& condition = *in[0];
    if (condition.dtype != DataType::kBool) return Status::InvalidArgument("Where: condition must be bool");
    RETURN_IF_ERROR(SameType(*in[1], *in[2], "Where"));
    ASSIGN_OR_RETURN(Shape partial, BroadcastShapes(condition.shape, in[1]->shape));
    ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(partial, in[2]->shape));
    return DispatchAny(in[1]->dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], in[1]->dtype, shape));
      std::array<std::vector<int64_t>, 3> strides{BroadcastStrides(condition.shape, shape),
                                                  BroadcastStrides(in[1]->shape, shape),
                                                  BroadcastStrides(in[2]->shape, shape)};
      const bool* c = ValuesOf<bool>(condition);
      const T* x = ValuesOf<T>(*in[1]);
      const T* y = ValuesOf<T>(*in[2]);
      int64_t i = 0;
      ForEachIndex<3>(shape, strides, [&](const std::array<int64_t, 3>& at) { dst[i++] = c[at[0]] ? x[at[1]] : y[at[2]]; });
      return Status::Ok();
    });
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeClip(const Node& node, int opset) {
  // Before opset 11 the bounds are attributes; from 11 they are optional inputs.
  std::optional<float> attribute_min, attribute_max;
  if (opset < 11) {
    ASSIGN_OR_RETURN(float lo, node.Float("min", std::numeric_limits<float>::lowest()));
    ASSIGN_OR_RETURN(float hi, node.Float("max", std::numeric_limits<float>::max()));
    attribute_min = lo;
    attribute_max = hi;
  }
  return MakeKernel([attribute_min, attribute_max](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(NeedInputs(in, 1, "Clip"));
    return DispatchNumeric(in[0]->dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T lo = std::numeric_limits<T>::lowest();
      T hi = std::numeric_limits<T>::max();
      if (attribute_min) lo = static_cast<T>(*attribute_min);
      if (attribute_max) hi = static_cast<T>(*attribute_max);
      if (in.size() > 1 && in[1] != nullptr) lo = ValuesOf<T>(*in[1])[0];
      if (in.size() > 2 && in[2] != nullptr) hi = ValuesOf<T>(*in[2])[0];
      return MapUnary<T>(*in[0], &out[0], [lo, hi](T x) { return x < lo ? lo : (x > hi ? hi : x); });
    });
  });
}

// Converts one element between any two of our numeric types (fp16/bf16 through float).
template <typename Dst>
Status CastTo(const Tensor& in, Dst* dst) {
  const int64_t n = ElementsOf(in);
  if (in.dtype == DataType::kFp16 || in.dtype == DataType::kBf16) {
    const uint16_t* src = ValuesOf<uint16_t>(in);
    for (int64_t i = 0; i < n; ++i) {
      float value = in.dtype == DataType::kFp16 ? HalfToFloat(src[i]) : std::bit_cast<float>(uint32_t{src[i]} << 16);
      dst[i] = static_cast<Dst>(value);
    }
    return Status::Ok();
  }
  if (in.dtype == DataType::kBool) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(ValuesOf<bool>(in)[i]);
    return Status::Ok();
  }
  return DispatchNumeric(in.dtype, [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* src = ValuesOf<S>(in);
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<S> && std::is_integral_v<Dst> && !std::is_same_v<Dst, bool>) {
        // Out-of-range float->int is undefined in C++; saturate instead (NaN becomes 0).
        double v = static_cast<double>(src[i]);
        if (std::isnan(v)) v = 0;
        v = std::clamp(v, static_cast<double>(std::numeric_limits<Dst>::lowest()),
                       static_cast<double>(std::numeric_limits<Dst>::max()));
        dst[i] = static_cast<Dst>(v);
      } else {
        dst[i] = static_cast<Dst>(src[i]);
      }
    }
    return Status::Ok();
  });
}

Status CastTensor(const Tensor& in, DataType to, Tensor* out) {
  if (in.dtype == DataType::kBytes) return Status::Unimplemented("Cast from strings is not supported");
  if (to == DataType::kInvalid || to == DataType::kBytes) {
    return Status::Unimplemented("Cast to " + std::string(DataTypeName(to)) + " is not supported");
  }
  if (to == DataType::kFp16 || to == DataType::kBf16) {
    Tensor as_float;
    ASSIGN_OR_RETURN(float* values, AllocateOutputAs<float>(&as_float, DataType::kFp32, in.shape));
    RETURN_IF_ERROR(CastTo(in, values));
    ASSIGN_OR_RETURN(uint16_t * dst, AllocateOutputAs<uint16_t>(out, to, in.shape));
    for (int64_t i = 0; i < ElementsOf(as_float); ++i) {
      dst[i] = to == DataType::kFp16 ? FloatToHalf(values[i])
                                     : static_cast<uint16_t>((std::bit_cast<uint32_t>(values[i]) + 0x7FFF +
                                                              ((std::bit_cast<uint32_t>(values[i]) >> 16) & 1)) >> 16);
    }
    return Status::Ok();
  }
  if (to == DataType::kBool) {
    ASSIGN_OR_RETURN(bool* dst, AllocateOutputAs<bool>(out, to, in.shape));
    return CastTo(in, dst);
  }
  ASSIGN_OR_RETURN(uint8_t * raw, AllocateOutput(out, to, in.shape));
  return DispatchNumeric(to, [&](auto tag) {
    using D = typename decltype(tag)::type;
    return CastTo(in, reinterpret_cast<D*>(raw));
  });
}

StatusOr<std::unique_ptr<Kernel>> MakeCast(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t to_onnx, node.Int("to", 0));
  DataType to = DataTypeFromOnnx(static_cast<int32_t>(to_onnx));
  if (to == DataType::kInvalid || to == DataType::kBytes) {
    return Status::Unimplemented(node.Describe() + ": Cast to ONNX type " + std::to_string(to_onnx) +
                                 " is not supported");
  }
  return MakeKernel([to](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(NeedInputs(in, 1, "Cast"));
    return CastTensor(*in[0], to, &out[0]);
  });
}

// CastLike: Cast to the type of the second input.
StatusOr<std::unique_ptr<Kernel>> MakeCastLike(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(NeedInputs(in, 2, "CastLike"));
    return CastTensor(*in[0], in[1]->dtype, &out[0]);
  });
}

}  // namespace

void RegisterElementwiseKernels(KernelRegistry* registry) {
  RegisterUnary(registry);
  RegisterPredicates(registry);
  RegisterBinary(registry);
  registry->Register("Where", 9, MakeWhere);
  registry->Register("Clip", 6, MakeClip);
  registry->Register("Cast", 6, MakeCast);
  registry->Register("CastLike", 15, MakeCastLike);
}

}  // namespace inferd::runtime
