// What a frontend sees of one loaded model version: its config, version and statistics, read-only.
// A view keeps the version alive while it is held (a frontend holds one for a call), but offers no
// way to queue, drain or cancel: requests go through InferenceServer::InferAsync, and the
// lifecycle stays with the server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/model_config.h"
#include "lifecycle/model_stats.h"

namespace inferd {

class ModelVersion;

class ModelView {
 public:
  explicit ModelView(std::shared_ptr<const ModelVersion> model);

  const ModelConfig& config() const;
  const std::string& name() const;
  int64_t version() const;
  const ModelStats& stats() const;

 private:
  std::shared_ptr<const ModelVersion> model_;
};

}  // namespace inferd
