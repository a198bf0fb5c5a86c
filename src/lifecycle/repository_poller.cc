#include "lifecycle/repository_poller.h"

#include <chrono>

#include "backends/backend.h"
#include "lifecycle/model_repository.h"

namespace inferd {

namespace fs = std::filesystem;

namespace {

FolderSnapshot SnapshotFolder(const fs::path& folder, FolderSnapshot files) {
  std::error_code error;
  for (fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, error), end;
       !error && it != end; it.increment(error)) {
    std::error_code entry_error;
    if (!it->is_regular_file(entry_error) || IsWrittenByBackend(it->path())) continue;
    const uintmax_t size = it->file_size(entry_error);
    const auto mtime = it->last_write_time(entry_error);
    if (entry_error) continue;  // gone between listing and reading: the next poll sees it
    const auto mtime_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count();
    files[fs::relative(it->path(), folder).generic_string()] = {size, static_cast<int64_t>(mtime_ns)};
  }
  return files;
}

const FolderSnapshot* FindFolder(const RepositorySnapshot& snapshot, const std::string& name) {
  auto it = snapshot.find(name);
  return it == snapshot.end() ? nullptr : &it->second;
}

// Both absent, or both present with the same files.
bool SameFolder(const FolderSnapshot* a, const FolderSnapshot* b) {
  return a == nullptr || b == nullptr ? a == b : *a == *b;
}

// "3/model.onnx" -> 3; 0 for a path outside a version folder ("config.pbtxt", "labels/x").
int64_t VersionOf(const std::string& path) {
  const size_t slash = path.find('/');
  return slash == std::string::npos ? 0 : VersionFolderNumber(std::string_view(path).substr(0, slash));
}

}  // namespace

RepositorySnapshot SnapshotRepositories(const std::vector<fs::path>& repositories) {
  RepositorySnapshot snapshot;
  for (const fs::path& repository : repositories) {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(repository, error)) {
      const std::string name = entry.path().filename().string();
      std::error_code entry_error;
      if (!entry.is_directory(entry_error) || name.starts_with(".")) continue;
      snapshot[name] = SnapshotFolder(entry.path(), std::move(snapshot[name]));
    }
  }
  return snapshot;
}

std::set<int64_t> ChangedVersions(const FolderSnapshot& before, const FolderSnapshot& after) {
  std::set<int64_t> versions;
  auto note = [&](const std::string& path) {
    if (int64_t version = VersionOf(path); version > 0) versions.insert(version);
  };
  for (const auto& [path, stamp] : before) {
    auto it = after.find(path);
    if (it == after.end() || it->second != stamp) note(path);
  }
  for (const auto& [path, stamp] : after) {
    if (!before.contains(path)) note(path);
  }
  return versions;
}

RepositoryPoller::RepositoryPoller(RepositorySnapshot loaded) : loaded_(loaded), previous_(std::move(loaded)) {}

PollActions RepositoryPoller::Poll(const RepositorySnapshot& now) {
  std::set<std::string> names;
  for (const auto& [name, folder] : now) names.insert(name);
  for (const auto& [name, folder] : loaded_) names.insert(name);
  PollActions actions;
  for (const std::string& name : names) {
    const FolderSnapshot* current = FindFolder(now, name);
    const FolderSnapshot* last_loaded = FindFolder(loaded_, name);
    // Unchanged since the last load, or still changing since the previous poll: nothing yet.
    if (SameFolder(current, last_loaded) || !SameFolder(current, FindFolder(previous_, name))) continue;
    if (current == nullptr) {
      actions.unload.push_back(name);
      loaded_.erase(name);
      continue;
    }
    actions.load[name] = ChangedVersions(last_loaded ? *last_loaded : FolderSnapshot{}, *current);
    loaded_[name] = *current;
  }
  previous_ = now;
  return actions;
}

}  // namespace inferd
