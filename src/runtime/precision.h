// The arithmetic a session's convolutions and Linear-layer products (MatMul/Gemm with constant
// weights) run in. fp32 is exact to the model; bf16 (a model parameter, `precision: bf16`) runs
// them on bfloat16 inputs and weights with fp32 accumulation and output, where the CPU has native
// bf16 dot products (AVX512_BF16): about twice the multiply-add rate, with results within bf16's
// rounding (8 bits of mantissa) of fp32's.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace inferd::runtime {

enum class Precision { kFp32, kBf16 };

// Node attributes: a convolution's or product's precision ("fp32" or "bf16", string), and a bf16
// convolution that writes its output in bf16 for the bf16 convolutions reading it (int 1,
// passes/bf16_outputs.h).
inline constexpr char kPrecisionAttribute[] = "_precision";
inline constexpr char kBf16OutputAttribute[] = "_bf16_output";

StatusOr<Precision> ParsePrecision(std::string_view text);
std::string_view PrecisionName(Precision precision);

// Why this machine cannot run `precision` natively, or nullopt when it can (fp32 always can). Asks
// oneDNN which implementation it would use, so it follows the CPU and ONEDNN_MAX_CPU_ISA.
std::optional<std::string> PrecisionUnavailable(Precision precision);

}  // namespace inferd::runtime
