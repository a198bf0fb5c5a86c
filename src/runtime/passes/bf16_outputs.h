// bf16 between convolutions. In a bf16 session (precision.h) every convolution reads bf16; a dense
// one whose output only other dense bf16 convolutions read, as their data input, writes bf16 for
// them (marked kBf16OutputAttribute, the value typed bf16), instead of fp32 that each reader
// converts again. On resnet50 those conversions were a fifth of the bf16 run (docs/BENCHMARKS.md).
//
// Kept fp32: a depthwise layer's input or output (bf16_outputs.cc says why), an output with a
// residual Add fused (the residual stream, which the next block reads as both data and residual,
// keeps fp32's precision), with a Swish fused (our pass reads fp32), a graph output, and any
// output read by something else than a dense bf16 convolution's input 0.
#pragma once

#include "common/status.h"
#include "runtime/ir/graph.h"

namespace inferd::runtime {

// Runs after the optimizer and after the precision marks; returns how many outputs became bf16.
StatusOr<int> KeepBf16BetweenConvolutions(Graph* graph);

}  // namespace inferd::runtime
