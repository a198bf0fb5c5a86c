// Poll mode (--model-control-mode poll): what changed in the model repositories since each model
// was last loaded, and when a change is complete enough to act on.
//
// A poll reads every model folder's files (relative path, size, mtime) and nothing else. The rule,
// in RepositoryPoller::Poll (a pure function of the snapshots, tested without a clock or a disk):
// a model is (re)loaded when its folder differs from what was last loaded *and* is the same as at
// the previous poll. A folder still being written (a version being copied in) changes between two
// polls and waits; so a half-written version is never loaded. A folder gone at two polls in a row
// is unloaded. The versions whose own files changed are named, so that a replaced model file is
// reloaded even when config.pbtxt is unchanged.
#pragma once

#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace inferd {

struct FileStamp {
  uintmax_t size = 0;
  int64_t mtime_ns = 0;
  auto operator<=>(const FileStamp&) const = default;
};

// One model folder: every regular file below it by relative path ("config.pbtxt", "1/model.onnx").
using FolderSnapshot = std::map<std::string, FileStamp>;
// Model name -> its folder. A name in several repositories merges their files (the load then
// fails with the reason, as in the other modes).
using RepositorySnapshot = std::map<std::string, FolderSnapshot>;

RepositorySnapshot SnapshotRepositories(const std::vector<std::filesystem::path>& repositories);

struct PollActions {
  // Models to load or reload, each with the versions whose own files changed (added, removed or
  // replaced) since its last load.
  std::map<std::string, std::set<int64_t>> load;
  std::vector<std::string> unload;
  bool empty() const { return load.empty() && unload.empty(); }
};

class RepositoryPoller {
 public:
  // `loaded`: the snapshot taken just before the models were loaded at start.
  explicit RepositoryPoller(RepositorySnapshot loaded);

  // This poll's snapshot in; what to do now out. A model is counted as loaded from the moment it
  // is handed out, whether its load then succeeds or not: a broken version is tried again only
  // when its files change again.
  PollActions Poll(const RepositorySnapshot& now);

 private:
  RepositorySnapshot loaded_;
  RepositorySnapshot previous_;
};

// Versions (numbered top-level folders) whose files differ between two snapshots of a folder.
std::set<int64_t> ChangedVersions(const FolderSnapshot& before, const FolderSnapshot& after);

}  // namespace inferd
