// Reads the repository folders: which models exist, their configs, which version folders they
// have. Reading never loads anything; errors are kept per model so one bad model cannot hide the
// others.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "config/model_config.h"

namespace inferd {

struct ModelSource {
  std::string name;
  std::filesystem::path dir;
  Status status;                      // why the model cannot be loaded, if it cannot
  // Set when config.pbtxt parsed and validated, or synthesized for an ONNX model without one (the
  // backend completes it at load).
  std::optional<ModelConfig> config;
  std::vector<int64_t> versions;      // numbered version folders present, ascending
};

// Model folders by name, across repositories (a name in several repositories lists each folder).
// Only lists folders: no config is read.
std::map<std::string, std::vector<std::filesystem::path>> ListModelFolders(
    const std::vector<std::filesystem::path>& repositories);

// Reads one model's config and version folders; a name found in two repositories is an error.
ModelSource ReadModelSource(const std::string& name, const std::vector<std::filesystem::path>& folders);

// ReadModelSource for every model in the repositories.
std::map<std::string, ModelSource> ScanRepositories(const std::vector<std::filesystem::path>& repositories);

// The version a folder name stands for (a positive integer, "3"), or 0 when it is not one.
int64_t VersionFolderNumber(std::string_view folder_name);

// Version folders (positive integers) inside a model folder.
std::vector<int64_t> ListVersionFolders(const std::filesystem::path& model_dir);

}  // namespace inferd
