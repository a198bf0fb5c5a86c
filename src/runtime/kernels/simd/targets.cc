#include "runtime/kernels/simd/targets.h"

#include <hwy/targets.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace inferd::runtime::simd {

long long TargetsAboveOneDnnIsa(std::string_view isa) {
  std::string upper(isa);
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  constexpr long long kAvx512 = HWY_AVX3 | HWY_AVX3_DL
#ifdef HWY_AVX3_ZEN4
                                | HWY_AVX3_ZEN4
#endif
      ;
  if (upper.empty() || upper == "ALL" || upper.rfind("AVX512", 0) == 0) return 0;
  if (upper.rfind("AVX", 0) == 0) return upper.rfind("AVX2", 0) == 0 ? kAvx512 : kAvx512 | HWY_AVX2;
  if (upper.rfind("SSE", 0) == 0) return kAvx512 | HWY_AVX2;
  return 0;  // a value oneDNN does not know either
}

void CapTargetsLikeOneDnn() {
  static const bool capped = [] {
    const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
    const long long disabled = isa == nullptr ? 0 : TargetsAboveOneDnnIsa(isa);
    if (disabled != 0) hwy::DisableTargets(disabled);
    return true;
  }();
  (void)capped;
}

}  // namespace inferd::runtime::simd
