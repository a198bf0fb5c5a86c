#include "common/cpu_weight_groups.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace inferd {
namespace fs = std::filesystem;
namespace {

// Whether a space-separated cgroup list ("cpu io memory") holds `word`.
bool ListsWord(const std::string& list, std::string_view word) {
  std::istringstream words(list);
  for (std::string each; words >> each;) {
    if (each == word) return true;
  }
  return false;
}

// One write(2), as `echo VALUE > FILE` does: a cgroup file takes one value per write, and the
// kernel's answer (EBUSY, EINVAL, EPERM) comes back from it. O_CREAT lets tests use a plain tree.
Status WriteValue(const fs::path& file, const std::string& value) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Unavailable("opening " + file.string() + ": " + std::strerror(errno));
  const ssize_t written = ::write(fd, value.data(), value.size());
  const int error = errno;
  ::close(fd);
  if (written != static_cast<ssize_t>(value.size())) {
    return Status::Unavailable("writing '" + value + "' to " + file.string() + ": " + std::strerror(error));
  }
  return Status::Ok();
}

Status MakeDirectory(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::Unavailable("making " + dir.string() + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

// A folder name for the model: the characters a repository's folder names use, the rest as '_'.
std::string GroupName(const std::string& model) {
  std::string name = "model-" + model.substr(0, 200);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return name;
}

}  // namespace

CpuWeightGroups::CpuWeightGroups(const CgroupFiles& files) {
  const std::optional<CgroupDir> group = FindCgroupDir(files, "cpu");
  if (!group) {
    unavailable_reason_ = "no cgroup file system is mounted";
    return;
  }
  if (group->version == 2) {
    const std::string controllers = ReadSmallFile(group->dir / "cgroup.controllers");
    if (!ListsWord(controllers, "cpu")) {
      unavailable_reason_ = "the cgroup v2 group " + group->dir.string() + " is not given the cpu controller " +
                            "(its cgroup.controllers: '" + std::string(controllers.substr(0, controllers.find('\n'))) +
                            "'), and no cgroup v1 hierarchy has it";
      return;
    }
  }
  if (::access(group->dir.c_str(), W_OK) != 0) {
    unavailable_reason_ = "the process's cgroup " + group->dir.string() + " is not writable: " + std::strerror(errno);
    return;
  }
  version_ = group->version;
  parent_ = group->dir;
  own_ = parent_ / ("inferd-" + std::to_string(::getpid()));
}

CpuWeightGroups::~CpuWeightGroups() {
  MutexLock lock(&mu_);
  if (!set_up_ || !setup_error_.empty()) return;
  // Back to where the process started, so that the folders can go. v2 refuses it once the parent
  // distributes cpu (no process may sit beside its child groups): the empty folders then stay
  // for the next start, or the service manager, to remove.
  if (!WriteValue(parent_ / "cgroup.procs", std::to_string(::getpid())).ok()) return;
  for (const std::string& model : models_) ::rmdir(ModelGroup(model).c_str());
  ::rmdir(own_.c_str());
}

bool CpuWeightGroups::available() const {
  MutexLock lock(&mu_);
  return version_ != 0 && setup_error_.empty();
}

std::string CpuWeightGroups::Describe() const {
  MutexLock lock(&mu_);
  if (version_ == 0 || !setup_error_.empty()) {
    return "cpu_weight: no cgroup to manage (" + (version_ == 0 ? unavailable_reason_ : setup_error_) +
           "); a model's cpu_weight sets its instance threads' nice value instead";
  }
  return "cpu_weight: cgroup v" + std::to_string(version_) + " groups under " + own_.string() +
         ", made when a model sets parameters[cpu_weight]";
}

fs::path CpuWeightGroups::ModelGroup(const std::string& model) const { return own_ / GroupName(model); }

// Groups of processes that are gone (a crash, a kill) whose folders stayed behind.
void CpuWeightGroups::RemoveStaleProcessGroups() const {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(parent_, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("inferd-") || !entry.is_directory(error) || entry.path() == own_) continue;
    if (fs::exists("/proc/" + name.substr(7), error)) continue;
    for (const auto& child : fs::directory_iterator(entry.path(), error)) {
      if (child.is_directory(error)) ::rmdir(child.path().c_str());
    }
    ::rmdir(entry.path().c_str());
  }
}

Status CpuWeightGroups::SetUpProcessGroup() {
  RemoveStaleProcessGroups();
  RETURN_IF_ERROR(MakeDirectory(own_));
  const std::string pid = std::to_string(::getpid());
  RETURN_IF_ERROR(WriteValue(own_ / "cgroup.procs", pid));
  if (version_ == 2 && !ListsWord(ReadSmallFile(parent_ / "cgroup.subtree_control"), "cpu")) {
    if (Status enabled = WriteValue(parent_ / "cgroup.subtree_control", "+cpu"); !enabled.ok()) {
      (void)WriteValue(parent_ / "cgroup.procs", pid);
      ::rmdir(own_.c_str());
      return Status::Unavailable(enabled.message() +
                                 " (v2 lets a group hand cpu to its children only when no other process sits in it)");
    }
  }
  return Status::Ok();
}

Status CpuWeightGroups::JoinCurrentThread(const std::string& model, int weight) {
  MutexLock lock(&mu_);
  if (version_ == 0) return Status::Unavailable(unavailable_reason_);
  if (!setup_error_.empty()) return Status::Unavailable(setup_error_);
  if (!set_up_) {
    set_up_ = true;
    if (Status made = SetUpProcessGroup(); !made.ok()) {
      setup_error_ = made.message();
      return made;
    }
  }
  const fs::path group = ModelGroup(model);
  RETURN_IF_ERROR(MakeDirectory(group));
  models_.insert(model);
  const std::string tid = std::to_string(::gettid());
  if (version_ == 1) {
    RETURN_IF_ERROR(WriteValue(group / "cpu.shares", std::to_string(weight * 1024 / 100)));
    return WriteValue(group / "tasks", tid);
  }
  // A threaded child makes own_ a threaded domain, where cpu may be enabled beside the process.
  if (ReadSmallFile(group / "cgroup.type").find("threaded") == std::string::npos) {
    RETURN_IF_ERROR(WriteValue(group / "cgroup.type", "threaded"));
  }
  if (!ListsWord(ReadSmallFile(own_ / "cgroup.subtree_control"), "cpu")) {
    RETURN_IF_ERROR(WriteValue(own_ / "cgroup.subtree_control", "+cpu"));
  }
  RETURN_IF_ERROR(WriteValue(group / "cpu.weight", std::to_string(weight)));
  return WriteValue(group / "cgroup.threads", tid);
}

void CpuWeightGroups::Release(const std::string& model) {
  MutexLock lock(&mu_);
  if (models_.count(model) == 0) return;
  if (::rmdir(ModelGroup(model).c_str()) == 0) models_.erase(model);
}

CpuWeightGroups& ProcessCpuWeightGroups() {
  static CpuWeightGroups groups;
  return groups;
}

}  // namespace inferd
