#include "runtime/run_context.h"

#include "runtime/tuning.h"

namespace inferd::runtime {
namespace {

thread_local RunContext current_context{TuneMode::kOff, nullptr, nullptr};

}  // namespace

const RunContext& CurrentRunContext() { return current_context; }

RunScope::RunScope(const RunContext& context) : previous_(current_context) { current_context = context; }
RunScope::~RunScope() { current_context = previous_; }

}  // namespace inferd::runtime
