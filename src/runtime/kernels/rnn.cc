// Recurrent layers (reference kernels, FP32): RNN, GRU and LSTM as ONNX defines them (opset 7-14),
// forward, reverse or bidirectional, with per-batch sequence_lens, initial states, LSTM peepholes
// and input_forget, GRU's linear_before_reset, clip, custom activations, and both layouts.
//
// Each time step computes every gate for the whole batch at once:
//   gates[b, g*H + j] = X_t[b] . W[g*H + j] + H_prev[b] . R[g*H + j] + Wb + Rb
// with the gate order of the ONNX weights: RNN (i), GRU (z, r, h), LSTM (i, o, f, c).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

enum class Cell { kRnn, kGru, kLstm };

int GateCount(Cell cell) { return cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4; }
// f (and g, h): the activations one direction uses.
int ActivationCount(Cell cell) { return cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 2 : 3; }
const char* CellName(Cell cell) { return cell == Cell::kRnn ? "RNN" : cell == Cell::kGru ? "GRU" : "LSTM"; }

struct Activation {
  enum class Kind { kSigmoid, kTanh, kRelu, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu, kSoftsign, kSoftplus };
  Kind kind = Kind::kTanh;
  float alpha = 0, beta = 0;

  float operator()(float x) const {
    switch (kind) {
      case Kind::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
      case Kind::kTanh: return std::tanh(x);
      case Kind::kRelu: return std::max(0.0f, x);
      case Kind::kAffine: return alpha * x + beta;
      case Kind::kLeakyRelu: return x >= 0 ? x : alpha * x;
      case Kind::kThresholdedRelu: return x > alpha ? x : 0.0f;
      case Kind::kScaledTanh: return alpha * std::tanh(beta * x);
      case Kind::kHardSigmoid: return std::clamp(alpha * x + beta, 0.0f, 1.0f);
      case Kind::kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1.0f);
      case Kind::kSoftsign: return x / (1.0f + std::fabs(x));
      case Kind::kSoftplus: return std::log1p(std::exp(x));
    }
    return x;
  }
};

struct ActivationSpec {
  const char* name;
  Activation::Kind kind;
  int parameters;  // how many of activation_alpha / activation_beta it takes
  float alpha, beta;  // defaults: those of the ONNX operator of the same name
};

constexpr ActivationSpec kActivations[] = {
    {"sigmoid", Activation::Kind::kSigmoid, 0, 0, 0},       {"tanh", Activation::Kind::kTanh, 0, 0, 0},
    {"relu", Activation::Kind::kRelu, 0, 0, 0},             {"affine", Activation::Kind::kAffine, 2, 1, 0},
    {"leakyrelu", Activation::Kind::kLeakyRelu, 1, 0.01f, 0}, {"thresholdedrelu", Activation::Kind::kThresholdedRelu, 1, 1, 0},
    {"scaledtanh", Activation::Kind::kScaledTanh, 2, 1, 1}, {"hardsigmoid", Activation::Kind::kHardSigmoid, 2, 0.2f, 0.5f},
    {"elu", Activation::Kind::kElu, 1, 1, 0},               {"softsign", Activation::Kind::kSoftsign, 0, 0, 0},
    {"softplus", Activation::Kind::kSoftplus, 0, 0, 0},
};

struct RnnAttributes {
  Cell cell = Cell::kRnn;
  int64_t hidden = 0;
  int directions = 1;
  bool reverse = false;  // direction "reverse" (a bidirectional layer runs forward then reverse)
  std::vector<Activation> activations;  // ActivationCount per direction, direction after direction
  std::optional<float> clip;
  bool batch_major = false;  // layout 1: X [N, S, I], Y [N, S, D, H], states [N, D, H]
  bool linear_before_reset = false;
  bool input_forget = false;
};

// Activations by name (any case); alpha and beta values are consumed, in order, by the
// functions that take them, and default to the ONNX operator's.
StatusOr<std::vector<Activation>> ReadActivations(const Node& node, Cell cell, int directions) {
  const Attribute* names = node.Find("activations");
  std::vector<std::string> wanted;
  if (names != nullptr) wanted = names->strings;
  const size_t per_direction = static_cast<size_t>(ActivationCount(cell));
  if (wanted.empty()) {
    static const std::vector<std::string> kDefaults[] = {{"tanh"}, {"sigmoid", "tanh"}, {"sigmoid", "tanh", "tanh"}};
    wanted = kDefaults[static_cast<int>(cell)];
  }
  if (wanted.size() == per_direction && directions == 2) {
    const std::vector<std::string> one_direction = wanted;  // (inserting a vector into itself is undefined)
    wanted.insert(wanted.end(), one_direction.begin(), one_direction.end());
  }
  if (wanted.size() != per_direction * static_cast<size_t>(directions)) {
    return Status::InvalidArgument(node.Describe() + ": expected " + std::to_string(per_direction * directions) +
                                   " activations, got " + std::to_string(wanted.size()));
  }
  ASSIGN_OR_RETURN(std::vector<float> alphas, node.Floats("activation_alpha"));
  ASSIGN_OR_RETURN(std::vector<float> betas, node.Floats("activation_beta"));
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> activations;
  for (std::string name : wanted) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    const ActivationSpec* spec = nullptr;
    for (const ActivationSpec& candidate : kActivations)
      if (name == candidate.name) spec = &candidate;
    if (spec == nullptr) return Status::Unimplemented(node.Describe() + ": activation '" + name + "' is not supported");
    Activation activation{spec->kind, spec->alpha, spec->beta};
    if (spec->parameters >= 1 && next_alpha < alphas.size()) activation.alpha = alphas[next_alpha++];
    if (spec->parameters >= 2 && next_beta < betas.size()) activation.beta = betas[next_beta++];
    activations.push_back(activation);
  }
  return activations;
}

StatusOr<RnnAttributes> ReadRnnAttributes(const Node& node, Cell cell) {
  RnnAttributes a{.cell = cell};
  ASSIGN_OR_RETURN(a.hidden, node.Int("hidden_size", 0));
  ASSIGN_OR_RETURN(std::string direction, node.String("direction", "forward"));
  if (direction == "bidirectional") {
    a.directions = 2;
  } else if (direction == "reverse") {
    a.reverse = true;
  } else if (direction != "forward") {
    return Status::InvalidArgument(node.Describe() + ": unknown direction '" + direction + "'");
  }
  ASSIGN_OR_RETURN(a.activations, ReadActivations(node, cell, a.directions));
  if (node.Has("clip")) {
    ASSIGN_OR_RETURN(float clip, node.Float("clip", 0));
    a.clip = clip;
  }
  ASSIGN_OR_RETURN(int64_t layout, node.Int("layout", 0));
  a.batch_major = layout == 1;
  ASSIGN_OR_RETURN(int64_t linear_before_reset, node.Int("linear_before_reset", 0));
  a.linear_before_reset = linear_before_reset != 0;
  ASSIGN_OR_RETURN(int64_t input_forget, node.Int("input_forget", 0));
  a.input_forget = input_forget != 0;
  return a;
}

// Sizes of one run, read from X and W and checked against every other input.
struct RnnShape {
  int64_t steps = 0, batch = 0, input = 0, hidden = 0;
  int directions = 1, gates = 1;
};

Status CheckInput(const Tensor* tensor, const Shape& expected, const char* what) {
  if (tensor == nullptr) return Status::Ok();
  if (tensor->dtype != DataType::kFp32) return Status::Unimplemented(std::string(what) + " must be FP32");
  if (tensor->shape != expected) {
    return Status::InvalidArgument(std::string(what) + " has shape " + ShapeToString(tensor->shape) + ", expected " +
                                   ShapeToString(expected));
  }
  return Status::Ok();
}

// A [D, N, H] (time-major) or [N, D, H] (batch-major) state tensor, as [D][N][H] values.
std::vector<float> ReadState(const Tensor* tensor, const RnnShape& s, bool batch_major) {
  std::vector<float> state(static_cast<size_t>(s.directions * s.batch * s.hidden), 0.0f);
  if (tensor == nullptr) return state;
  const float* values = ValuesOf<float>(*tensor);
  for (int d = 0; d < s.directions; ++d)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t j = 0; j < s.hidden; ++j) {
        const int64_t from = batch_major ? (b * s.directions + d) * s.hidden + j : (d * s.batch + b) * s.hidden + j;
        state[static_cast<size_t>((d * s.batch + b) * s.hidden + j)] = values[from];
      }
  return state;
}

Status WriteState(const std::vector<float>& state, const RnnShape& s, bool batch_major, Tensor* out) {
  const Shape shape = batch_major ? Shape{s.batch, s.directions, s.hidden} : Shape{s.directions, s.batch, s.hidden};
  ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(out, DataType::kFp32, shape));
  for (int d = 0; d < s.directions; ++d)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t j = 0; j < s.hidden; ++j) {
        const int64_t to = batch_major ? (b * s.directions + d) * s.hidden + j : (d * s.batch + b) * s.hidden + j;
        dst[to] = state[static_cast<size_t>((d * s.batch + b) * s.hidden + j)];
      }
  return Status::Ok();
}

class RecurrentKernel final : public Kernel {
 public:
  explicit RecurrentKernel(RnnAttributes a) : a_(std::move(a)) {}

  Status Run(Inputs in, Outputs out) override {
    RETURN_IF_ERROR(RequireInputs(in, 3, CellName(a_.cell)));
    ASSIGN_OR_RETURN(RnnShape s, ReadShape(in));
    const Tensor* sequence_lens = InputAt(in, 4);
    std::vector<int64_t> lengths(static_cast<size_t>(s.batch), s.steps);
    if (sequence_lens != nullptr) {
      ASSIGN_OR_RETURN(lengths, ReadInts(*sequence_lens, "sequence_lens"));
      if (static_cast<int64_t>(lengths.size()) != s.batch) return Status::InvalidArgument("sequence_lens needs one length per batch entry");
      for (int64_t length : lengths)
        if (length < 0 || length > s.steps) return Status::InvalidArgument("a sequence length is outside [0, seq_length]");
    }
    h_ = ReadState(InputAt(in, 5), s, a_.batch_major);
    c_ = ReadState(a_.cell == Cell::kLstm ? InputAt(in, 6) : nullptr, s, a_.batch_major);
    const Shape y_shape = a_.batch_major ? Shape{s.batch, s.steps, s.directions, s.hidden}
                                         : Shape{s.steps, s.directions, s.batch, s.hidden};
    float* y = nullptr;
    if (!out.empty()) {
      ASSIGN_OR_RETURN(y, AllocateOutputAs<float>(&out[0], DataType::kFp32, y_shape));
      std::fill(y, y + ElementsOf(out[0]), 0.0f);  // steps past a sequence's length stay 0
    }
    for (int d = 0; d < s.directions; ++d) RunDirection(in, s, d, lengths, y);
    if (out.size() > 1) RETURN_IF_ERROR(WriteState(h_, s, a_.batch_major, &out[1]));
    if (out.size() > 2 && a_.cell == Cell::kLstm) RETURN_IF_ERROR(WriteState(c_, s, a_.batch_major, &out[2]));
    return Status::Ok();
  }

 private:
  StatusOr<RnnShape> ReadShape(Inputs in) const {
    const Tensor& x = *in[0];
    if (x.dtype != DataType::kFp32) return Status::Unimplemented(std::string(CellName(a_.cell)) + ": only FP32 is supported");
    if (x.shape.size() != 3) return Status::InvalidArgument("X must be 3-D");
    RnnShape s{.steps = a_.batch_major ? x.shape[1] : x.shape[0],
               .batch = a_.batch_major ? x.shape[0] : x.shape[1],
               .input = x.shape[2],
               .hidden = a_.hidden,
               .directions = a_.directions,
               .gates = GateCount(a_.cell)};
    if (s.hidden <= 0 && in[1]->shape.size() == 3) s.hidden = in[1]->shape[1] / s.gates;
    const int64_t gate_rows = s.gates * s.hidden;
    RETURN_IF_ERROR(CheckInput(in[1], {s.directions, gate_rows, s.input}, "W"));
    RETURN_IF_ERROR(CheckInput(in[2], {s.directions, gate_rows, s.hidden}, "R"));
    RETURN_IF_ERROR(CheckInput(InputAt(in, 3), {s.directions, 2 * gate_rows}, "B"));
    const Shape state = a_.batch_major ? Shape{s.batch, s.directions, s.hidden} : Shape{s.directions, s.batch, s.hidden};
    RETURN_IF_ERROR(CheckInput(InputAt(in, 5), state, "initial_h"));
    if (a_.cell == Cell::kLstm) {
      RETURN_IF_ERROR(CheckInput(InputAt(in, 6), state, "initial_c"));
      RETURN_IF_ERROR(CheckInput(InputAt(in, 7), {s.directions, 3 * s.hidden}, "P"));
    }
    return s;
  }

  float Clip(float v) const { return a_.clip ? std::clamp(v, -*a_.clip, *a_.clip) : v; }

  // out[b, r] = sum_k in[b, k] * weight[r, k] (+= when accumulate), for rows [0, rows).
  static void MultiplyTransposed(const float* in, int64_t batch, int64_t k_size, const float* weight, int64_t rows,
                                 float* result) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t r = 0; r < rows; ++r) {
        float sum = 0;
        const float* w = weight + r * k_size;
        const float* v = in + b * k_size;
        for (int64_t k = 0; k < k_size; ++k) sum += v[k] * w[k];
        result[b * rows + r] += sum;
      }
  }

  void RunDirection(Inputs in, const RnnShape& s, int d, const std::vector<int64_t>& lengths, float* y) {
    const bool backward = a_.reverse || d == 1;
    const int64_t rows = s.gates * s.hidden, H = s.hidden;
    const float* w = ValuesOf<float>(*in[1]) + d * rows * s.input;
    const float* r = ValuesOf<float>(*in[2]) + d * rows * H;
    const Tensor* bias = InputAt(in, 3);
    const float* wb = bias != nullptr ? ValuesOf<float>(*bias) + d * 2 * rows : nullptr;
    const float* rb = wb != nullptr ? wb + rows : nullptr;
    const Tensor* peephole = a_.cell == Cell::kLstm ? InputAt(in, 7) : nullptr;
    const float* p = peephole != nullptr ? ValuesOf<float>(*peephole) + d * 3 * H : nullptr;
    const Activation* act = a_.activations.data() + d * ActivationCount(a_.cell);
    float* h = h_.data() + d * s.batch * H;
    float* c = c_.data() + d * s.batch * H;
    const float* x = ValuesOf<float>(*in[0]);

    if (a_.cell == Cell::kGru) PrepareGru(r + 2 * H * H, H);
    std::vector<float> x_part(static_cast<size_t>(s.batch * rows)), h_part(static_cast<size_t>(s.batch * rows));
    std::vector<float> x_step(static_cast<size_t>(s.batch * s.input));
    for (int64_t step = 0; step < s.steps; ++step) {
      const int64_t t = backward ? s.steps - 1 - step : step;
      // A sequence shorter than the batch's longest is processed over its own steps only; reverse
      // starts from its own last step.
      for (int64_t b = 0; b < s.batch; ++b) {
        const int64_t own_t = backward ? lengths[static_cast<size_t>(b)] - 1 - step : t;
        const int64_t from = a_.batch_major ? (b * s.steps + std::max<int64_t>(own_t, 0)) * s.input
                                            : (std::max<int64_t>(own_t, 0) * s.batch + b) * s.input;
        std::copy(x + from, x + from + s.input, x_step.begin() + b * s.input);
      }
      std::fill(x_part.begin(), x_part.end(), 0.0f);
      std::fill(h_part.begin(), h_part.end(), 0.0f);
      MultiplyTransposed(x_step.data(), s.batch, s.input, w, rows, x_part.data());
      MultiplyTransposed(h, s.batch, H, r, rows, h_part.data());
      for (int64_t b = 0; b < s.batch; ++b) {
        if (step >= lengths[static_cast<size_t>(b)]) continue;  // finished: its state stays
        const int64_t own_t = backward ? lengths[static_cast<size_t>(b)] - 1 - step : t;
        Step(&x_part[b * rows], &h_part[b * rows], wb, rb, p, act, H, h + b * H, c + b * H);
        if (y != nullptr) {
          float* dst = y + (a_.batch_major ? ((b * s.steps + own_t) * s.directions + d) * H
                                           : ((own_t * s.directions + d) * s.batch + b) * H);
          std::copy(h + b * H, h + b * H + H, dst);
        }
      }
    }
  }

  // One batch entry's step: updates its hidden state h (and LSTM cell state c) in place.
  void Step(const float* xw, const float* hr, const float* wb, const float* rb, const float* p, const Activation* act,
            int64_t H, float* h, float* c) {
    auto bias = [&](const float* b, int64_t i) { return b != nullptr ? b[i] : 0.0f; };
    switch (a_.cell) {
      case Cell::kRnn:
        for (int64_t j = 0; j < H; ++j) h[j] = act[0](Clip(xw[j] + hr[j] + bias(wb, j) + bias(rb, j)));
        return;
      case Cell::kGru:
        for (int64_t j = 0; j < H; ++j) {
          const float z = act[0](Clip(xw[j] + hr[j] + bias(wb, j) + bias(rb, j)));
          const float r = act[0](Clip(xw[H + j] + hr[H + j] + bias(wb, H + j) + bias(rb, H + j)));
          gru_z_[j] = z;
          gru_r_[j] = r;
        }
        // h~ needs (r . H_prev) R_h^T when the reset comes first: a second product, over the whole
        // row, before any h[j] changes.
        for (int64_t j = 0; j < H; ++j) {
          float recurrent;
          if (a_.linear_before_reset) {
            recurrent = gru_r_[j] * (hr[2 * H + j] + bias(rb, 2 * H + j));
          } else {
            recurrent = bias(rb, 2 * H + j);
            for (int64_t k = 0; k < H; ++k) recurrent += gru_r_[k] * h[k] * gru_rh_[j * H + k];
          }
          gru_candidate_[j] = act[1](Clip(xw[2 * H + j] + bias(wb, 2 * H + j) + recurrent));
        }
        for (int64_t j = 0; j < H; ++j) h[j] = (1 - gru_z_[j]) * gru_candidate_[j] + gru_z_[j] * h[j];
        return;
      case Cell::kLstm:
        for (int64_t j = 0; j < H; ++j) {
          auto gate = [&](int g) { return xw[g * H + j] + hr[g * H + j] + bias(wb, g * H + j) + bias(rb, g * H + j); };
          const float peep_i = p != nullptr ? p[j] : 0, peep_o = p != nullptr ? p[H + j] : 0, peep_f = p != nullptr ? p[2 * H + j] : 0;
          const float i = act[0](Clip(gate(0) + peep_i * c[j]));
          const float f = a_.input_forget ? 1 - i : act[0](Clip(gate(2) + peep_f * c[j]));
          const float candidate = act[1](Clip(gate(3)));
          c[j] = f * c[j] + i * candidate;
          const float o = act[0](Clip(gate(1) + peep_o * c[j]));
          h[j] = o * act[2](c[j]);
        }
        return;
    }
  }

  // GRU without linear_before_reset multiplies R_h by (r . H_prev), which changes per step: it
  // keeps this direction's R_h rows at hand, with the per-step gate buffers.
  void PrepareGru(const float* r_h, int64_t H) {
    gru_rh_.assign(r_h, r_h + H * H);
    gru_z_.resize(static_cast<size_t>(H));
    gru_r_.resize(static_cast<size_t>(H));
    gru_candidate_.resize(static_cast<size_t>(H));
  }

  const RnnAttributes a_;
  std::vector<float> h_, c_;  // [D][N][H], the running states
  std::vector<float> gru_z_, gru_r_, gru_candidate_, gru_rh_;
};

StatusOr<std::unique_ptr<Kernel>> MakeRecurrent(const Node& node, Cell cell) {
  ASSIGN_OR_RETURN(RnnAttributes a, ReadRnnAttributes(node, cell));
  return std::unique_ptr<Kernel>(std::make_unique<RecurrentKernel>(std::move(a)));
}

}  // namespace

void RegisterRnnKernels(KernelRegistry* r) {
  r->Register("RNN", 7, [](const Node& node, int) { return MakeRecurrent(node, Cell::kRnn); });
  r->Register("GRU", 7, [](const Node& node, int) { return MakeRecurrent(node, Cell::kGru); });
  r->Register("LSTM", 7, [](const Node& node, int) { return MakeRecurrent(node, Cell::kLstm); });
}

}  // namespace inferd::runtime
