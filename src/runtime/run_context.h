// What the session running a kernel lends it besides inputs and outputs: the tuning settings and
// cache (tuning.h), the weights already reordered for oneDNN (shared by every kernel that wants
// the same weights in the same layout) and two scratch buffers. Session::Run opens a RunScope on
// its thread; a kernel reads CurrentRunContext(). Outside a run the context is empty: tuning off,
// no cache, and KernelScratch() and PrimitiveScratchpad() are the thread's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace inferd::runtime {

enum class TuneMode;
class TuningCache;
namespace dnnl_kernels {
class PackedWeightsCache;
}

// Memory a kernel needs only while it runs (a reorder between a tensor's layout and the layout
// its oneDNN primitive wants, say). A session's kernels run one at a time, so they share one
// buffer, as large as the largest single request: kept per kernel and per input shape, these
// buffers made memory grow with every batch size a model saw.
class ScratchBuffer {
 public:
  // At least `bytes` of 64-byte aligned memory, valid until the next call (which may move it).
  uint8_t* Get(size_t bytes);
  size_t capacity() const { return capacity_; }

 private:
  std::shared_ptr<uint8_t[]> memory_;
  size_t capacity_ = 0;
};

// Which of a session's input shape sets a run is for (kernels/shape_plans.h); kNoShapeSet outside
// a session run.
using ShapeSetId = uint64_t;
constexpr ShapeSetId kNoShapeSet = 0;

struct RunContext {
  TuneMode tune{};
  TuningCache* tuning_cache = nullptr;
  dnnl_kernels::PackedWeightsCache* packed_weights = nullptr;
  ScratchBuffer* scratch = nullptr;
  ScratchBuffer* scratchpad = nullptr;  // oneDNN primitives' (dnnl_context.h RunPrimitive)
  ShapeSetId shape_set = kNoShapeSet;
};

const RunContext& CurrentRunContext();

// The running session's scratch buffer, or this thread's outside a run. A kernel asks once per run
// for all it needs at the same time (a later call may move what an earlier one returned), and
// must not hold it across a call into another kernel.
ScratchBuffer& KernelScratch();

// The running session's buffer for oneDNN primitives' own scratchpads (or this thread's outside a
// run), apart from KernelScratch: a primitive's scratchpad is needed while the kernel's temporaries
// are bound. Primitives run one at a time, so they share it.
ScratchBuffer& PrimitiveScratchpad();

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
