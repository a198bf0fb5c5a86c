// Which SIMD targets our Highway kernels may dispatch to. oneDNN's ONEDNN_MAX_CPU_ISA caps its own
// kernels (ONEDNN_MAX_CPU_ISA=AVX2 makes an AVX-512 machine run oneDNN as an AVX2 one would);
// CapTargetsLikeOneDnn applies the same cap to ours, so one variable emulates a smaller machine for
// the whole runtime (how the AVX2 numbers in docs/BENCHMARKS.md are measured on an AVX-512 CPU).
#pragma once

#include <string_view>

namespace inferd::runtime::simd {

// Reads ONEDNN_MAX_CPU_ISA once and disables the Highway targets above it (AVX-512 below an
// AVX512_* value; AVX2 too below AVX). Called before any kernel runs: Highway picks a function's
// target on its first call.
void CapTargetsLikeOneDnn();

// The Highway targets to disable for a ONEDNN_MAX_CPU_ISA value (case-insensitive; 0: none).
long long TargetsAboveOneDnnIsa(std::string_view isa);

}  // namespace inferd::runtime::simd
