// Signal processing (reference kernels, opset 17): DFT, STFT and MelWeightMatrix, the front end of
// speech models. The transforms are plain O(n^2) sums in double precision.
#include <cmath>
#include <numbers>

#include "runtime/ir/onnx_types.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

// The first `bins` coefficients of the length-n DFT of (re, im); the inverse one divides by n.
// Written interleaved (re, im) at `out`, one coefficient every `out_stride` floats.
void Transform(const std::vector<double>& re, const std::vector<double>& im, int64_t bins, bool inverse, float* out,
               int64_t out_stride) {
  const int64_t n = static_cast<int64_t>(re.size());
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < bins; ++k) {
    double sum_re = 0, sum_im = 0;
    for (int64_t j = 0; j < n; ++j) {
      // (j * k) mod n keeps the angle small, so large transforms lose no precision to it.
      const double angle = sign * 2.0 * std::numbers::pi * static_cast<double>((j * k) % n) / static_cast<double>(n);
      const double c = std::cos(angle), s = std::sin(angle);
      sum_re += re[j] * c - im[j] * s;
      sum_im += re[j] * s + im[j] * c;
    }
    if (inverse) {
      sum_re /= static_cast<double>(n);
      sum_im /= static_cast<double>(n);
    }
    out[k * out_stride] = static_cast<float>(sum_re);
    out[k * out_stride + 1] = static_cast<float>(sum_im);
  }
}

StatusOr<int64_t> OptionalLength(Inputs in, size_t index, const char* what) {
  const Tensor* tensor = InputAt(in, index);
  if (tensor == nullptr || tensor->byte_size == 0) return int64_t{-1};
  ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadInts(*tensor, what));
  if (values.size() != 1 || values[0] <= 0) return Status::InvalidArgument(std::string(what) + " must be one positive value");
  return values[0];
}

// DFT(input [.., L, .., 1|2], dft_length?) along `axis`.
StatusOr<std::unique_ptr<Kernel>> MakeDft(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t axis_attribute, node.Int("axis", 1));
  ASSIGN_OR_RETURN(int64_t inverse, node.Int("inverse", 0));
  ASSIGN_OR_RETURN(int64_t onesided, node.Int("onesided", 0));
  return MakeKernel([=](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "DFT"));
    const Tensor& x = *in[0];
    if (x.dtype != DataType::kFp32) return Status::Unimplemented("DFT: only FP32 is supported");
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    if (rank < 2 || (x.shape.back() != 1 && x.shape.back() != 2))
      return Status::InvalidArgument("DFT: the last dim must be 1 (real) or 2 (complex)");
    const int64_t axis = axis_attribute < 0 ? axis_attribute + rank : axis_attribute;
    if (axis < 0 || axis >= rank - 1) return Status::InvalidArgument("DFT: axis is out of range");
    const int64_t length = x.shape[axis];
    ASSIGN_OR_RETURN(int64_t n, OptionalLength(in, 1, "dft_length"));
    if (n < 0) n = length;
    const bool complex_input = x.shape.back() == 2;
    const int64_t bins = onesided != 0 ? n / 2 + 1 : n;
    Shape shape = x.shape;
    shape[axis] = bins;
    shape.back() = 2;
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, shape));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
    for (int64_t d = axis + 1; d < rank - 1; ++d) inner *= x.shape[d];
    const int64_t components = x.shape.back();
    const float* src = ValuesOf<float>(x);
    std::vector<double> re(static_cast<size_t>(n)), im(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        // Truncated or zero-padded to n.
        for (int64_t j = 0; j < n; ++j) {
          const bool inside = j < length;
          const float* at = src + ((o * length + j) * inner + i) * components;
          re[j] = inside ? at[0] : 0.0;
          im[j] = inside && complex_input ? at[1] : 0.0;
        }
        Transform(re, im, bins, inverse != 0, dst + (o * bins * inner + i) * 2, inner * 2);
      }
    }
    return Status::Ok();
  });
}

// STFT(signal [N, L, 1|2], frame_step, window?, frame_length?) -> [N, frames, bins, 2].
StatusOr<std::unique_ptr<Kernel>> MakeStft(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t onesided, node.Int("onesided", 1));
  return MakeKernel([=](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 2, "STFT"));
    const Tensor& signal = *in[0];
    if (signal.dtype != DataType::kFp32) return Status::Unimplemented("STFT: only FP32 is supported");
    if (signal.shape.size() != 3 || (signal.shape[2] != 1 && signal.shape[2] != 2))
      return Status::InvalidArgument("STFT: the signal must be [batch, length, 1 or 2]");
    ASSIGN_OR_RETURN(int64_t step, OptionalLength(in, 1, "frame_step"));
    if (step < 0) return Status::InvalidArgument("STFT: frame_step is required");
    const Tensor* window = InputAt(in, 2);
    if (window != nullptr && (window->dtype != DataType::kFp32 || window->shape.size() != 1))
      return Status::InvalidArgument("STFT: the window must be a 1-D FP32 tensor");
    ASSIGN_OR_RETURN(int64_t frame_length, OptionalLength(in, 3, "frame_length"));
    if (window != nullptr) {
      if (frame_length >= 0 && frame_length != window->shape[0])
        return Status::InvalidArgument("STFT: frame_length and the window's length differ");
      frame_length = window->shape[0];
    }
    if (frame_length < 0) return Status::InvalidArgument("STFT: needs a window or frame_length");
    const int64_t batch = signal.shape[0], length = signal.shape[1], components = signal.shape[2];
    if (frame_length > length) return Status::InvalidArgument("STFT: a frame is longer than the signal");
    const int64_t frames = (length - frame_length) / step + 1;
    const bool real = components == 1;
    const int64_t bins = onesided != 0 && real ? frame_length / 2 + 1 : frame_length;
    ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, {batch, frames, bins, 2}));
    const float* src = ValuesOf<float>(signal);
    const float* weights = window != nullptr ? ValuesOf<float>(*window) : nullptr;
    std::vector<double> re(static_cast<size_t>(frame_length)), im(static_cast<size_t>(frame_length));
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        for (int64_t j = 0; j < frame_length; ++j) {
          const float* at = src + (b * length + f * step + j) * components;
          const double w = weights != nullptr ? weights[j] : 1.0;
          re[j] = at[0] * w;
          im[j] = real ? 0.0 : at[1] * w;
        }
        Transform(re, im, bins, false, dst + (b * frames + f) * bins * 2, 2);
      }
    }
    return Status::Ok();
  });
}

// MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
// [dft_length / 2 + 1, num_mel_bins] triangular filters, as ONNX's reference builds them (band
// edges equally spaced on the mel scale 2595 * log10(1 + f / 700), mapped to FFT bins).
StatusOr<std::unique_ptr<Kernel>> MakeMelWeightMatrix(const Node& node, int) {
  ASSIGN_OR_RETURN(int64_t output_type, node.Int("output_datatype", 1));
  const DataType dtype = DataTypeFromOnnx(static_cast<int>(output_type));
  if (dtype != DataType::kFp32 && dtype != DataType::kFp64)
    return Status::Unimplemented(node.Describe() + ": output_datatype must be float or double");
  return MakeKernel([dtype](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 5, "MelWeightMatrix"));
    ASSIGN_OR_RETURN(double mel_bins_value, ScalarAsDouble(*in[0]));
    ASSIGN_OR_RETURN(double dft_length_value, ScalarAsDouble(*in[1]));
    ASSIGN_OR_RETURN(double sample_rate, ScalarAsDouble(*in[2]));
    ASSIGN_OR_RETURN(double lower_hertz, ScalarAsDouble(*in[3]));
    ASSIGN_OR_RETURN(double upper_hertz, ScalarAsDouble(*in[4]));
    const int64_t mel_bins = static_cast<int64_t>(mel_bins_value), dft_length = static_cast<int64_t>(dft_length_value);
    if (mel_bins <= 0 || dft_length <= 0 || sample_rate <= 0 || lower_hertz < 0 || upper_hertz <= lower_hertz)
      return Status::InvalidArgument("MelWeightMatrix: needs positive sizes and 0 <= lower < upper edge");
    const int64_t spectrogram_bins = dft_length / 2 + 1;
    auto to_mel = [](double hertz) { return 2595.0 * std::log10(1.0 + hertz / 700.0); };
    const double low_mel = to_mel(lower_hertz), high_mel = to_mel(upper_hertz);
    const double mel_step = (high_mel - low_mel) / static_cast<double>(mel_bins + 2);
    std::vector<int64_t> edges(static_cast<size_t>(mel_bins + 2));
    for (int64_t i = 0; i < mel_bins + 2; ++i) {
      const double hertz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * mel_step + low_mel) / 2595.0) - 1.0);
      edges[static_cast<size_t>(i)] = static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hertz / sample_rate));
    }
    std::vector<double> weights(static_cast<size_t>(spectrogram_bins * mel_bins), 0.0);
    auto at = [&](int64_t bin, int64_t mel) -> double* {
      if (bin < 0 || bin >= spectrogram_bins) return nullptr;
      return &weights[static_cast<size_t>(bin * mel_bins + mel)];
    };
    for (int64_t m = 0; m < mel_bins; ++m) {
      const int64_t low = edges[static_cast<size_t>(m)], center = edges[static_cast<size_t>(m + 1)],
                    high = edges[static_cast<size_t>(m + 2)];
      if (center == low) {
        if (double* w = at(center, m)) *w = 1.0;
      } else {
        for (int64_t j = low; j <= center; ++j)
          if (double* w = at(j, m)) *w = static_cast<double>(j - low) / static_cast<double>(center - low);
      }
      for (int64_t j = center; j < high; ++j)
        if (double* w = at(j, m)) *w = static_cast<double>(high - j) / static_cast<double>(high - center);
    }
    const Shape shape{spectrogram_bins, mel_bins};
    if (dtype == DataType::kFp64) {
      ASSIGN_OR_RETURN(double* dst, AllocateOutputAs<double>(&out[0], dtype, shape));
      std::copy(weights.begin(), weights.end(), dst);
    } else {
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], dtype, shape));
      for (size_t i = 0; i < weights.size(); ++i) dst[i] = static_cast<float>(weights[i]);
    }
    return Status::Ok();
  });
}

}  // namespace

void RegisterSignalKernels(KernelRegistry* r) {
  r->Register("DFT", 17, MakeDft);
  r->Register("STFT", 17, MakeStft);
  r->Register("MelWeightMatrix", 17, MakeMelWeightMatrix);
}

}  // namespace inferd::runtime
