// What a load request may carry besides the model's name (Triton's load API): a config to use
// instead of config.pbtxt, and the model's files themselves, so that a model can be loaded (or
// replaced) without writing to the repository.
#pragma once

#include <map>
#include <string>

namespace inferd {

struct LoadOverride {
  // The config as JSON (Triton's "config" parameter); empty: the repository's config.pbtxt.
  std::string config_json;
  // Triton's "file:<path>" parameters: path inside the model folder ("1/model.onnx") -> contents.
  // With files, the model is loaded from them alone, and config_json is required.
  std::map<std::string, std::string> files;
  bool empty() const { return config_json.empty() && files.empty(); }
};

}  // namespace inferd
