#include "lifecycle/model_state.h"

namespace inferd {

std::string_view ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kReady:
      return "READY";
    case ModelState::kUnavailable:
      return "UNAVAILABLE";
    case ModelState::kNotLoaded:
    case ModelState::kUnknown:
      break;
  }
  return "";
}

}  // namespace inferd
