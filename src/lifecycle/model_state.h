// A model version's state, decided in one place (ModelManager::State) from what the server holds
// in memory, and named for the protocols in one place (ModelStateName).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace inferd {

enum class ModelState {
  kReady,        // loaded and serving
  kUnavailable,  // should be serving and is not: its load failed (the reason says why)
  kNotLoaded,    // in the repository, not loaded (explicit control mode) or unloaded
  kUnknown,      // neither loaded nor in the repository as last scanned
};

// Triton's names in the repository index: READY, UNAVAILABLE, "" (not loaded, or unknown).
std::string_view ModelStateName(ModelState state);

struct ModelReadiness {
  ModelState state = ModelState::kUnknown;
  std::string reason;  // why it is not ready; for kUnknown, what was not found
};

// One line of the repository index: a version, or the model as a whole (version 0) when no
// version is loaded or its config is broken.
struct IndexEntry {
  std::string name;
  int64_t version = 0;
  ModelState state = ModelState::kNotLoaded;
  std::string reason;
  // A READY version's load (ModelVersion::Timings): seconds, or -1 when unknown / not yet.
  double load_seconds = -1, warmup_seconds = -1, first_request_seconds = -1;
};

}  // namespace inferd
