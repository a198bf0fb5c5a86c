// What the session running a kernel lends it besides inputs and outputs: the tuning settings and
// cache (tuning.h) and the weights already reordered for oneDNN (shared by every kernel that
// wants the same weights in the same layout). Session::Run opens a RunScope on its thread; a
// kernel reads CurrentRunContext(). Outside a run the context is empty: tuning off, no cache.
#pragma once

namespace inferd::runtime {

enum class TuneMode;
class TuningCache;
namespace dnnl_kernels {
class PackedWeightsCache;
}

struct RunContext {
  TuneMode tune{};
  TuningCache* tuning_cache = nullptr;
  dnnl_kernels::PackedWeightsCache* packed_weights = nullptr;
};

const RunContext& CurrentRunContext();

class RunScope {
 public:
  explicit RunScope(const RunContext& context);
  ~RunScope();
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;

 private:
  RunContext previous_;
};

}  // namespace inferd::runtime
