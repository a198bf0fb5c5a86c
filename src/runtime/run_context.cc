#include "runtime/run_context.h"

#include "common/tensor.h"
#include "runtime/tuning.h"

namespace inferd::runtime {
namespace {

thread_local RunContext current_context{TuneMode::kOff, nullptr, nullptr, nullptr, nullptr};

}  // namespace

uint8_t* ScratchBuffer::Get(size_t bytes) {
  if (bytes > capacity_) {
    memory_.reset();  // the old one goes first: never both resident
    memory_ = AllocateBuffer(bytes).memory;  // cache-line aligned
    capacity_ = bytes;
  }
  return memory_.get();
}

const RunContext& CurrentRunContext() { return current_context; }

ScratchBuffer& KernelScratch() {
  if (current_context.scratch != nullptr) return *current_context.scratch;
  thread_local ScratchBuffer own;
  return own;
}

ScratchBuffer& PrimitiveScratchpad() {
  if (current_context.scratchpad != nullptr) return *current_context.scratchpad;
  thread_local ScratchBuffer own;
  return own;
}

RunScope::RunScope(const RunContext& context) : previous_(current_context) { current_context = context; }
RunScope::~RunScope() { current_context = previous_; }

}  // namespace inferd::runtime
