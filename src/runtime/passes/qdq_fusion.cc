// QDQ models (onnx/qdq_writer.h, or ONNX Runtime's quantiser) spell an int8 convolution as
//   x -> QuantizeLinear(s, z) -> DequantizeLinear(s, z) -> Conv <- DequantizeLinear(int8 W, w_scale)
//                                                            ^-- DequantizeLinear(int32 B) or fp32 B
// FuseQdqConv makes that one Conv that reads x, the int8 W and a bias in the int32 sums' units, and
// runs in int8 (kernels/int8_attributes.h). Its result is the QDQ graph's up to the order of the
// fp32 additions: x is rounded and saturated as QuantizeLinear would.
//
// FuseInt8Requantize, after the post-op fusions: an int8 Conv whose every reader is an int8 Conv
// quantising its output at one scale writes that output quantised (uint8/int8) instead of fp32,
// and the readers take it as it is: half the bytes written and read, and no quantising reorder.
// The QDQ graph rounds the fp32 result (after its activation) to that scale; so does the kernel.
// A Mul does the same (squeeze-excitation's scale, whose reader is the block's int8 projection;
// kernels/dnnl/dnnl_binary.cc).
//
// Fused only where the kernel is exact: activations per tensor with any zero point (ours write 0;
// ONNX Runtime's quantiser writes asymmetric uint8), symmetric weights (zero points 0) per tensor
// or per output channel. Other QDQ graphs run as written, on the reference
// QuantizeLinear/DequantizeLinear and an fp32 Conv.
#include <algorithm>
#include <cmath>

#include "runtime/kernels/int8_attributes.h"
#include "runtime/kernels/post_ops.h"
#include "runtime/kernels/tensor_util.h"
#include "runtime/passes/graph_edit.h"
#include "runtime/passes/optimizer.h"

namespace inferd::runtime {
namespace {

bool IsOp(const Node& node, std::string_view op) { return node.op_type == op && IsDefaultDomain(node); }

template <typename T>
bool AllZero(const Tensor& t) {
  const auto values = t.values<T>();
  return std::all_of(values.begin(), values.end(), [](T v) { return v == 0; });
}

// A zero point input (kNoValue when absent: ONNX's default, uint8 0) that is a constant of all
// zeros; its type says whether the quantised values are signed.
bool ZeroPointIsZero(const Graph& graph, ValueId id, bool* is_signed) {
  *is_signed = false;
  if (id == kNoValue) return true;
  const Tensor* zp = ConstantOf(graph, id);
  if (zp == nullptr) return false;
  switch (zp->dtype) {
    case DataType::kInt8:
      *is_signed = true;
      return AllZero<int8_t>(*zp);
    case DataType::kUint8:
      return AllZero<uint8_t>(*zp);
    case DataType::kInt32:
      return AllZero<int32_t>(*zp);
    default:
      return false;
  }
}

// Input i of `node`, or kNoValue when it has none.
ValueId OptionalInput(const Node& node, size_t i) { return node.HasInput(i) ? node.inputs[i] : kNoValue; }

std::optional<std::vector<float>> ScalesOf(const Graph& graph, ValueId id) {
  const Tensor* t = ConstantOf(graph, id);
  if (t == nullptr || t->dtype != DataType::kFp32 || t->shape.size() > 1) return std::nullopt;
  std::vector<float> scales(t->values<float>().begin(), t->values<float>().end());
  for (float s : scales) {
    if (!(s > 0) || !std::isfinite(s)) return std::nullopt;
  }
  return scales;
}

// A per-tensor constant zero point (kNoValue when absent: ONNX's default, uint8 0), or nullopt;
// its type says whether the quantised values are signed.
std::optional<int32_t> ScalarZeroPoint(const Graph& graph, ValueId id, bool* is_signed) {
  *is_signed = false;
  if (id == kNoValue) return 0;
  const Tensor* zp = ConstantOf(graph, id);
  if (zp == nullptr || ElementsOf(*zp) != 1) return std::nullopt;
  switch (zp->dtype) {
    case DataType::kInt8:
      *is_signed = true;
      return zp->values<int8_t>()[0];
    case DataType::kUint8:
      return zp->values<uint8_t>()[0];
    default:
      return std::nullopt;
  }
}

// The activation side: Conv input <- DequantizeLinear <- QuantizeLinear(x) with the same scale and
// zero point. Returns x and the quantisation, or nullopt.
struct QuantizedInput {
  ValueId x = kNoValue;
  float scale = 1;
  bool is_signed = false;
  int32_t zero_point = 0;
};
std::optional<QuantizedInput> MatchInput(const Graph& graph, const std::vector<int>& producers, ValueId value) {
  if (value == kNoValue || producers[value] < 0) return std::nullopt;
  const Node& dq = graph.nodes[producers[value]];
  if (!IsOp(dq, "DequantizeLinear") || !dq.HasInput(0) || !dq.HasInput(1) || producers[dq.inputs[0]] < 0) return std::nullopt;
  const Node& q = graph.nodes[producers[dq.inputs[0]]];
  if (!IsOp(q, "QuantizeLinear") || !q.HasInput(0) || !q.HasInput(1)) return std::nullopt;
  const auto dq_scale = ScalesOf(graph, dq.inputs[1]), q_scale = ScalesOf(graph, q.inputs[1]);
  bool dq_signed = false, q_signed = false;
  const auto dq_zero = ScalarZeroPoint(graph, OptionalInput(dq, 2), &dq_signed);
  const auto q_zero = ScalarZeroPoint(graph, OptionalInput(q, 2), &q_signed);
  if (!dq_scale || !q_scale || dq_scale->size() != 1 || *dq_scale != *q_scale || !dq_zero || !q_zero ||
      *dq_zero != *q_zero || dq_signed != q_signed) {
    return std::nullopt;
  }
  // Intermediate types may be known only after shape inference; the kernel checks FP32 at run time.
  const DataType x_type = graph.value(q.inputs[0]).dtype;
  if (x_type != DataType::kFp32 && x_type != DataType::kInvalid) return std::nullopt;
  return QuantizedInput{.x = q.inputs[0], .scale = (*q_scale)[0], .is_signed = q_signed, .zero_point = *q_zero};
}

// The weights side: DequantizeLinear(constant int8 W, scales per tensor or along `channel_axis`).
struct QuantizedWeights {
  ValueId w = kNoValue;
  std::vector<float> scales;
};
std::optional<QuantizedWeights> MatchWeights(const Graph& graph, const std::vector<int>& producers, ValueId value,
                                             int channel_axis) {
  if (value == kNoValue || producers[value] < 0) return std::nullopt;
  const Node& dq = graph.nodes[producers[value]];
  if (!IsOp(dq, "DequantizeLinear") || !dq.HasInput(0) || !dq.HasInput(1)) return std::nullopt;
  const Tensor* w = ConstantOf(graph, dq.inputs[0]);
  const auto scales = ScalesOf(graph, dq.inputs[1]);
  bool is_signed = false;
  if (w == nullptr || w->dtype != DataType::kInt8 || !scales || !ZeroPointIsZero(graph, OptionalInput(dq, 2), &is_signed)) return std::nullopt;
  if (scales->size() > 1) {
    const auto rank = static_cast<int64_t>(w->shape.size());
    int64_t axis = dq.Int("axis", 1).value_or(1);
    if (axis < 0) axis += rank;
    if (axis != channel_axis || w->shape[static_cast<size_t>(axis)] != static_cast<int64_t>(scales->size())) {
      return std::nullopt;
    }
  }
  return QuantizedWeights{.w = dq.inputs[0], .scales = *scales};
}

// The bias in the int32 sums' units: bias[c] / (x_scale * w_scale[c]), from an fp32 constant or a
// DequantizeLinear of a constant int32.
std::optional<Tensor> BiasInSumUnits(const Graph& graph, const std::vector<int>& producers, ValueId value,
                                     int64_t channels, const Int8Params& params) {
  std::vector<double> real(static_cast<size_t>(channels));
  if (const Tensor* b = ConstantOf(graph, value); b != nullptr) {
    if (b->dtype != DataType::kFp32 || ElementsOf(*b) != channels) return std::nullopt;
    for (int64_t c = 0; c < channels; ++c) real[c] = b->values<float>()[c];
  } else {
    if (producers[value] < 0) return std::nullopt;
    const Node& dq = graph.nodes[producers[value]];
    if (!IsOp(dq, "DequantizeLinear") || !dq.HasInput(1)) return std::nullopt;
    const Tensor* q = ConstantOf(graph, dq.inputs[0]);
    const auto scales = ScalesOf(graph, dq.inputs[1]);
    bool is_signed = false;
    if (q == nullptr || q->dtype != DataType::kInt32 || ElementsOf(*q) != channels || !scales ||
        (scales->size() != 1 && static_cast<int64_t>(scales->size()) != channels) ||
        !ZeroPointIsZero(graph, OptionalInput(dq, 2), &is_signed)) {
      return std::nullopt;
    }
    for (int64_t c = 0; c < channels; ++c) real[c] = static_cast<double>(q->values<int32_t>()[c]) * (*scales)[scales->size() == 1 ? 0 : c];
  }
  Tensor bias;
  float* out = AllocateOutputAs<float>(&bias, DataType::kFp32, {channels}).value();
  for (int64_t c = 0; c < channels; ++c) {
    const double w_scale = params.w_scales[params.w_scales.size() == 1 ? 0 : c];
    out[c] = static_cast<float>(real[c] / (static_cast<double>(params.x_scale) * w_scale));
  }
  return bias;
}

void SetInt8Attributes(const Int8Params& params, Node* node) {
  node->attributes[kInt8InputScale] = Attribute{.kind = Attribute::Kind::kFloat, .f = params.x_scale};
  node->attributes[kInt8InputSigned] = Attribute{.kind = Attribute::Kind::kInt, .i = params.x_signed ? 1 : 0};
  if (params.x_zero_point != 0) node->attributes[kInt8InputZeroPoint] = Attribute{.kind = Attribute::Kind::kInt, .i = params.x_zero_point};
  node->attributes[kInt8WeightScales] = Attribute{.kind = Attribute::Kind::kFloats, .floats = params.w_scales};
  if (params.y_scale) {
    node->attributes[kInt8OutputScale] = Attribute{.kind = Attribute::Kind::kFloat, .f = *params.y_scale};
    node->attributes[kInt8OutputSigned] = Attribute{.kind = Attribute::Kind::kInt, .i = params.y_signed ? 1 : 0};
    if (params.y_zero_point != 0) node->attributes[kInt8OutputZeroPoint] = Attribute{.kind = Attribute::Kind::kInt, .i = params.y_zero_point};
  }
}

// QLinearConv's quantisation, when every scale and zero point is a constant the int8 kernel takes:
// x and y per tensor, int8 weights per tensor or per output channel with zero points 0.
std::optional<Int8Params> QLinearConvParams(const Graph& graph, const Node& node) {
  const auto x_scale = ScalesOf(graph, node.inputs[1]);
  const auto w_scales = ScalesOf(graph, node.inputs[4]);
  const auto y_scale = ScalesOf(graph, node.inputs[6]);
  const Tensor* w = ConstantOf(graph, node.inputs[3]);
  bool x_signed = false, w_signed = false, y_signed = false;
  const auto x_zero = ScalarZeroPoint(graph, node.inputs[2], &x_signed);
  const auto y_zero = ScalarZeroPoint(graph, node.inputs[7], &y_signed);
  if (!x_scale || x_scale->size() != 1 || !y_scale || y_scale->size() != 1 || !w_scales || !x_zero || !y_zero ||
      w == nullptr || w->dtype != DataType::kInt8 || w->shape.size() < 3 || w->shape.size() > 5 ||
      (w_scales->size() != 1 && static_cast<int64_t>(w_scales->size()) != w->shape[0]) ||
      !ZeroPointIsZero(graph, node.inputs[5], &w_signed)) {
    return std::nullopt;
  }
  return Int8Params{.x_scale = (*x_scale)[0], .x_signed = x_signed, .x_zero_point = *x_zero, .w_scales = *w_scales,
                    .y_scale = (*y_scale)[0], .y_signed = y_signed, .y_zero_point = *y_zero};
}

// Whether QLinearMatMul `node` has what the int8 MatMul takes: constant per-tensor scales and zero
// points for a and y, a constant 2-D int8 B with zero points 0 and scales per tensor or per column.
bool QLinearMatMulFuses(const Graph& graph, const Node& node) {
  if (node.inputs.size() != 8 || node.outputs.size() != 1) return false;
  const Tensor* b = ConstantOf(graph, node.inputs[3]);
  const auto a_scale = ScalesOf(graph, node.inputs[1]), b_scales = ScalesOf(graph, node.inputs[4]),
             y_scale = ScalesOf(graph, node.inputs[6]);
  bool a_signed = false, b_signed = false, y_signed = false;
  return b != nullptr && b->dtype == DataType::kInt8 && b->shape.size() == 2 && a_scale && a_scale->size() == 1 &&
         y_scale && y_scale->size() == 1 && b_scales &&
         (b_scales->size() == 1 || static_cast<int64_t>(b_scales->size()) == b->shape[1]) &&
         ScalarZeroPoint(graph, node.inputs[2], &a_signed) && ScalarZeroPoint(graph, node.inputs[7], &y_signed) &&
         ZeroPointIsZero(graph, node.inputs[5], &b_signed);
}

}  // namespace

StatusOr<int> FuseQdqConv(Graph* graph) {
  const auto producers = ProducersOf(*graph);
  int rewrites = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& conv = graph->nodes[n];
    if (!IsOp(conv, "Conv") || conv.inputs.size() < 2 || conv.Has(kInt8InputScale)) continue;
    const auto input = MatchInput(*graph, producers, conv.inputs[0]);
    const auto weights = input ? MatchWeights(*graph, producers, conv.inputs[1], 0) : std::nullopt;
    if (!weights) continue;
    const Tensor& w = graph->initializers.at(weights->w);
    if (w.shape.size() < 3 || w.shape.size() > 5) continue;
    const Int8Params params{.x_scale = input->scale, .x_signed = input->is_signed, .x_zero_point = input->zero_point,
                            .w_scales = weights->scales};
    std::optional<Tensor> bias;
    if (conv.HasInput(2)) {
      bias = BiasInSumUnits(*graph, producers, conv.inputs[2], w.shape[0], params);
      if (!bias) continue;
    }
    Node fused = conv;
    fused.inputs = {input->x, weights->w};
    if (bias) fused.inputs.push_back(AddInitializer(graph, conv.name + "/int8_bias_" + std::to_string(n), std::move(*bias)));
    SetInt8Attributes(params, &fused);
    graph->nodes[n] = std::move(fused);
    ++rewrites;
  }
  if (rewrites > 0) EraseDeadNodes(graph);
  return rewrites;
}

// QLinearConv (ONNX's quantised convolution: ONNX Runtime's QOperator format, TFLite converters)
// is the fused int8 Conv reading an input already quantised and writing its output requantised:
// the same node, once its scales and zero points are constants. Its int32 bias is already in the
// sums' units.
StatusOr<int> FuseQLinearConv(Graph* graph) {
  int rewrites = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    Node& node = graph->nodes[n];
    if (!IsOp(node, "QLinearConv") || node.inputs.size() < 8 || node.outputs.size() != 1) continue;
    const std::optional<Int8Params> params = QLinearConvParams(*graph, node);
    if (!params) continue;
    const int64_t channels = graph->initializers.at(node.inputs[3]).shape[0];
    std::optional<Tensor> bias;
    if (node.HasInput(8)) {
      const Tensor* b = ConstantOf(*graph, node.inputs[8]);
      if (b == nullptr || b->dtype != DataType::kInt32 || ElementsOf(*b) != channels) continue;
      bias.emplace();
      float* out = AllocateOutputAs<float>(&*bias, DataType::kFp32, {channels}).value();
      for (int64_t c = 0; c < channels; ++c) out[c] = static_cast<float>(b->values<int32_t>()[c]);
    }
    Node fused = node;
    fused.op_type = "Conv";
    fused.inputs = {node.inputs[0], node.inputs[3]};
    if (bias) fused.inputs.push_back(AddInitializer(graph, node.name + "/int8_bias_" + std::to_string(n), std::move(*bias)));
    SetInt8Attributes(*params, &fused);
    graph->values[static_cast<size_t>(node.outputs[0])].dtype = params->y_signed ? DataType::kInt8 : DataType::kUint8;
    node = std::move(fused);
    ++rewrites;
  }
  if (rewrites > 0) EraseDeadNodes(graph);
  return rewrites;
}

// QLinearMatMul (QOperator form) with what the int8 MatMul takes becomes its QDQ spelling,
//   DequantizeLinear(a) -> MatMul <- DequantizeLinear(int8 B); MatMul -> QuantizeLinear -> y,
// which FuseQdqMatMul then runs in int8 wherever `a` was quantised from fp32 (the previous layer's
// QuantizeLinear, as in a QOperator chain): the layers between pass fp32 instead of uint8, which
// costs a product nothing measurable. Other QLinearMatMuls keep the exact reference kernel.
StatusOr<int> ExpandQLinearMatMul(Graph* graph) {
  std::vector<Node> nodes;
  nodes.reserve(graph->nodes.size());
  int rewrites = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    Node& node = graph->nodes[n];
    if (!IsOp(node, "QLinearMatMul") || !QLinearMatMulFuses(*graph, node)) {
      nodes.push_back(std::move(node));
      continue;
    }
    const std::string prefix = node.name + "/qdq_" + std::to_string(n);
    auto fp32_value = [&](const std::string& name) { return graph->AddValue({.name = prefix + name, .dtype = DataType::kFp32}); };
    const ValueId a = fp32_value("/a"), b = fp32_value("/b"), product = fp32_value("/product");
    Node dequantize_a{.name = prefix + "/dequantize_a", .op_type = "DequantizeLinear",
                      .inputs = {node.inputs[0], node.inputs[1], node.inputs[2]}, .outputs = {a}};
    Node dequantize_b{.name = prefix + "/dequantize_b", .op_type = "DequantizeLinear",
                      .inputs = {node.inputs[3], node.inputs[4], node.inputs[5]}, .outputs = {b}};
    dequantize_b.attributes["axis"] = Attribute{.kind = Attribute::Kind::kInt, .i = 1};  // per column of B
    Node matmul{.name = prefix + "/matmul", .op_type = "MatMul", .inputs = {a, b}, .outputs = {product}};
    Node quantize{.name = prefix + "/quantize", .op_type = "QuantizeLinear",
                  .inputs = {product, node.inputs[6], node.inputs[7]}, .outputs = node.outputs};
    for (Node* added : {&dequantize_a, &dequantize_b, &matmul, &quantize}) nodes.push_back(std::move(*added));
    ++rewrites;
  }
  graph->nodes = std::move(nodes);
  return rewrites;
}

// ONNX Runtime's dynamic quantisation (quantize_dynamic) spells an int8 MatMul as
//   x -> DynamicQuantizeLinear -> (x_q, x_scale, x_zero_point)
//   MatMulInteger(x_q, int8 W, x_zero_point[, W zero point 0]) -> Cast(FLOAT) -> Mul(., s) -> y
//   where s = Mul(x_scale, W_scale) (either operand order, both Muls).
// FuseDynamicQuantizedMatMul makes that one MatMul reading x and W (`_int8_dynamic`): each run
// quantises x as DynamicQuantizeLinear does, multiplies in int8 and scales the sums by
// x_scale * W_scale. A DynamicQuantizeLinear shared by several products (Q, K and V read one x)
// goes once all of them are fused.
StatusOr<int> FuseDynamicQuantizedMatMul(Graph* graph) {
  const auto producers = ProducersOf(*graph);
  const auto consumers = ConsumersOf(*graph);
  auto only_reader = [&](ValueId value, std::string_view op) -> const Node* {
    if (value == kNoValue || consumers[value].size() != 1 || IsGraphOutput(*graph, value)) return nullptr;
    const Node& reader = graph->nodes[consumers[value].front()];
    return IsOp(reader, op) ? &reader : nullptr;
  };
  auto other_input = [](const Node& mul, ValueId known) { return mul.inputs[0] == known ? mul.inputs[1] : mul.inputs[0]; };
  int rewrites = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& product = graph->nodes[n];
    if (!IsOp(product, "MatMulInteger") || product.inputs.size() < 3 || product.outputs.size() != 1 ||
        producers[product.inputs[0]] < 0) {
      continue;
    }
    const Node& quantize = graph->nodes[producers[product.inputs[0]]];
    const Tensor* w = ConstantOf(*graph, product.inputs[1]);
    bool w_signed = false;
    if (!IsOp(quantize, "DynamicQuantizeLinear") || quantize.outputs.size() != 3 || product.inputs[2] != quantize.outputs[2] ||
        w == nullptr || w->dtype != DataType::kInt8 || w->shape.size() != 2 ||
        !ZeroPointIsZero(*graph, OptionalInput(product, 3), &w_signed)) {
      continue;
    }
    const Node* cast = only_reader(product.outputs[0], "Cast");
    if (cast == nullptr || cast->Int("to", 0).value_or(0) != 1 /* FLOAT */) continue;
    const Node* scale_sums = only_reader(cast->outputs[0], "Mul");
    if (scale_sums == nullptr || scale_sums->inputs.size() != 2 || producers[other_input(*scale_sums, cast->outputs[0])] < 0) continue;
    const Node& combined_scale = graph->nodes[producers[other_input(*scale_sums, cast->outputs[0])]];
    if (!IsOp(combined_scale, "Mul") || combined_scale.inputs.size() != 2 ||
        std::count(combined_scale.inputs.begin(), combined_scale.inputs.end(), quantize.outputs[1]) != 1) {
      continue;
    }
    const auto w_scales = ScalesOf(*graph, other_input(combined_scale, quantize.outputs[1]));
    if (!w_scales || (w_scales->size() != 1 && static_cast<int64_t>(w_scales->size()) != w->shape[1])) continue;
    Node fused{.name = product.name, .op_type = "MatMul", .inputs = {quantize.inputs[0], product.inputs[1]},
               .outputs = scale_sums->outputs};
    fused.attributes[kInt8Dynamic] = Attribute{.kind = Attribute::Kind::kInt, .i = 1};
    fused.attributes[kInt8WeightScales] = Attribute{.kind = Attribute::Kind::kFloats, .floats = *w_scales};
    // In the final Mul's place: x and W exist by then, and every reader of y comes after.
    graph->nodes[static_cast<size_t>(&*scale_sums - graph->nodes.data())] = std::move(fused);
    ++rewrites;
  }
  if (rewrites > 0) EraseDeadNodes(graph);
  return rewrites;
}

// MatMul(DQ(Q(x)), DQ(int8 B)) and Gemm(DQ(Q(x)), DQ(int8 B)[, C]) with a constant 2-D B become the
// same product reading x and the int8 B (kernels/dnnl/dnnl_matmul.cc quantises x into scratch).
// Gemm: alpha 1, and C (beta 1) an fp32 constant or a DequantizeLinear of int32, in the sums' units.
StatusOr<int> FuseQdqMatMul(Graph* graph) {
  const auto producers = ProducersOf(*graph);
  int rewrites = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& node = graph->nodes[n];
    const bool is_gemm = IsOp(node, "Gemm");
    if ((!is_gemm && !IsOp(node, "MatMul")) || node.inputs.size() < 2 || node.Has(kInt8InputScale)) continue;
    if (is_gemm && (node.Float("alpha", 1).value_or(0) != 1 || (node.HasInput(2) && node.Float("beta", 1).value_or(0) != 1))) {
      continue;
    }
    const int channel_axis = is_gemm && node.Int("transB", 0).value_or(0) != 0 ? 0 : 1;
    const auto input = MatchInput(*graph, producers, node.inputs[0]);
    const auto weights = input ? MatchWeights(*graph, producers, node.inputs[1], channel_axis) : std::nullopt;
    if (!weights || graph->initializers.at(weights->w).shape.size() != 2) continue;
    const int64_t channels = graph->initializers.at(weights->w).shape[static_cast<size_t>(channel_axis)];
    const Int8Params params{.x_scale = input->scale, .x_signed = input->is_signed, .x_zero_point = input->zero_point,
                            .w_scales = weights->scales};
    std::optional<Tensor> bias;
    if (is_gemm && node.HasInput(2)) {
      bias = BiasInSumUnits(*graph, producers, node.inputs[2], channels, params);  // as for Conv: oneDNN 2.6 adds it before the scale
      if (!bias) continue;
    }
    Node fused = node;
    fused.inputs = {input->x, weights->w};
    if (bias) fused.inputs.push_back(AddInitializer(graph, node.name + "/int8_bias_" + std::to_string(n), std::move(*bias)));
    SetInt8Attributes(params, &fused);
    graph->nodes[n] = std::move(fused);
    ++rewrites;
  }
  if (rewrites > 0) EraseDeadNodes(graph);
  return rewrites;
}

StatusOr<int> FuseInt8Requantize(Graph* graph) {
  const auto consumers = ConsumersOf(*graph);
  int rewrites = 0;
  for (Node& producer : graph->nodes) {
    const bool int8_conv = IsOp(producer, "Conv") && producer.Has(kInt8InputScale);
    const bool mul = IsOp(producer, "Mul") && producer.inputs.size() == 2;
    if ((!int8_conv && !mul) || producer.Has(kInt8OutputScale) || producer.outputs.size() != 1) continue;
    ASSIGN_OR_RETURN(std::vector<PostOp> post_ops, ReadPostOps(producer));
    const ValueId y = producer.outputs[0];
    // A residual Add would need the residual quantised too: such a Conv keeps writing fp32.
    if (HasAdd(post_ops) || IsGraphOutput(*graph, y) || consumers[y].empty()) continue;
    std::optional<Int8Params> readers;
    bool all_int8_readers = true;
    for (size_t c : consumers[y]) {
      const Node& reader = graph->nodes[c];
      auto params = ReadInt8Params(reader);
      const bool reads_as_x = IsOp(reader, "Conv") && params.ok() && params->has_value() &&
                              std::count(reader.inputs.begin(), reader.inputs.end(), y) == 1 && reader.inputs[0] == y;
      if (!reads_as_x || (readers && ((*params)->x_scale != readers->x_scale || (*params)->x_signed != readers->x_signed ||
                                      (*params)->x_zero_point != readers->x_zero_point))) {
        all_int8_readers = false;
        break;
      }
      readers = **params;
    }
    if (!all_int8_readers || !readers) continue;
    producer.attributes[kInt8OutputScale] = Attribute{.kind = Attribute::Kind::kFloat, .f = readers->x_scale};
    producer.attributes[kInt8OutputSigned] = Attribute{.kind = Attribute::Kind::kInt, .i = readers->x_signed ? 1 : 0};
    if (readers->x_zero_point != 0) {
      producer.attributes[kInt8OutputZeroPoint] = Attribute{.kind = Attribute::Kind::kInt, .i = readers->x_zero_point};
    }
    graph->values[static_cast<size_t>(y)].dtype = readers->x_signed ? DataType::kInt8 : DataType::kUint8;
    ++rewrites;
  }
  return rewrites;
}

}  // namespace inferd::runtime
