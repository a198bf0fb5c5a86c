#include "lifecycle/model_repository.h"

#include <algorithm>
#include <charconv>

namespace inferd {

namespace fs = std::filesystem;

int64_t VersionFolderNumber(std::string_view folder_name) {
  int64_t version = 0;
  auto [end, parse_error] = std::from_chars(folder_name.data(), folder_name.data() + folder_name.size(), version);
  return parse_error == std::errc() && end == folder_name.data() + folder_name.size() && version > 0 ? version : 0;
}

std::vector<int64_t> ListVersionFolders(const fs::path& model_dir) {
  std::vector<int64_t> versions;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(model_dir, error)) {
    if (!entry.is_directory()) continue;
    if (int64_t version = VersionFolderNumber(entry.path().filename().string()); version > 0) versions.push_back(version);
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

std::map<std::string, std::vector<fs::path>> ListModelFolders(const std::vector<fs::path>& repositories) {
  std::map<std::string, std::vector<fs::path>> folders;
  for (const fs::path& repository : repositories) {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(repository, error)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_directory() && !name.starts_with(".")) folders[name].push_back(entry.path());
    }
  }
  return folders;
}

ModelSource ReadModelSource(const std::string& name, const std::vector<fs::path>& folders) {
  ModelSource source{.name = name, .dir = folders.front()};
  if (folders.size() > 1) {
    source.status = Status::InvalidArgument("model '" + name + "' appears in more than one repository (" +
                                            folders[0].string() + ", " + folders[1].string() + ")");
    return source;
  }
  source.versions = ListVersionFolders(source.dir);
  if (!fs::exists(source.dir / "config.pbtxt")) {
    // As in Triton, an ONNX model needs no config.pbtxt; the backend completes it from the model.
    for (auto version = source.versions.rbegin(); version != source.versions.rend(); ++version) {
      if (fs::exists(source.dir / std::to_string(*version) / "model.onnx")) {
        ModelConfig config;
        config.set_backend("onnxruntime");
        NormalizeModelConfig(&config, name);
        source.config = std::move(config);
        return source;
      }
    }
  }
  auto config = LoadModelConfig(source.dir);
  if (config.ok()) {
    source.config = std::move(config).value();
  } else {
    source.status = config.status();
  }
  return source;
}

std::map<std::string, ModelSource> ScanRepositories(const std::vector<fs::path>& repositories) {
  std::map<std::string, ModelSource> models;
  for (const auto& [name, folders] : ListModelFolders(repositories)) {
    models.emplace(name, ReadModelSource(name, folders));
  }
  return models;
}

}  // namespace inferd
