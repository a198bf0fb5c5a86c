// Helpers shared by the runtime unit tests: seeded random tensors and attribute builders.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "runtime/ir/graph.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime::testing_util {

inline Tensor Random(const Shape& shape, uint32_t seed, float low = -1, float high = 1) {
  Tensor t;
  float* data = AllocateOutputAs<float>(&t, DataType::kFp32, shape).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  for (int64_t i = 0; i < ElementsOf(t); ++i) data[i] = dist(rng);
  return t;
}

inline Attribute Ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
inline Attribute Int(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}
inline Attribute Float(float v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = v;
  return a;
}
inline Attribute String(std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = std::move(v);
  return a;
}

}  // namespace inferd::runtime::testing_util
