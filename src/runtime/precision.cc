#include "runtime/precision.h"

#include "runtime/kernels/dnnl/dnnl_context.h"

namespace inferd::runtime {

StatusOr<Precision> ParsePrecision(std::string_view text) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "bf16") return Precision::kBf16;
  return Status::InvalidArgument("precision must be fp32 or bf16, got '" + std::string(text) + "'");
}

std::string_view PrecisionName(Precision precision) { return precision == Precision::kBf16 ? "bf16" : "fp32"; }

std::optional<std::string> PrecisionUnavailable(Precision precision) {
  if (precision == Precision::kFp32) return std::nullopt;
  // A typical 3x3 convolution on bf16 inputs: without native bf16 oneDNN offers only its reference
  // implementation (or an emulation on plain AVX-512 that is slower than fp32).
  static const std::string implementation = [] {
    try {
      using dt = dnnl::memory::data_type;
      const dnnl::memory::desc src({1, 64, 28, 28}, dt::bf16, dnnl::memory::format_tag::any);
      const dnnl::memory::desc weights({64, 64, 3, 3}, dt::bf16, dnnl::memory::format_tag::any);
      const dnnl::memory::desc dst({1, 64, 28, 28}, dt::f32, dnnl::memory::format_tag::any);
      dnnl::convolution_forward::primitive_desc pd(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                          src, weights, dst, {1, 1}, {1, 1}, {1, 1}),
          dnnl_kernels::Engine());
      return std::string(pd.impl_info_str());
    } catch (const std::exception& e) {
      return std::string("none (") + e.what() + ")";
    }
  }();
  // "brgconv:avx512_core_bf16" or "...:avx512_core_amx" is native; "jit_bf16:avx512_core" emulates
  // bf16 on plain AVX-512, slower than fp32 (resnet50 ran 100x slower so).
  const std::string isa = implementation.substr(implementation.find(':') + 1);
  if (isa.find("bf16") != std::string::npos || isa.find("amx") != std::string::npos) return std::nullopt;
  return "this CPU has no native bf16 convolutions (AVX512_BF16 or AMX); oneDNN would run '" + implementation + "'";
}

}  // namespace inferd::runtime
