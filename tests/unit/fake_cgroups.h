// A fake cgroup tree for tests: the files a test writes under a private temporary root, laid out
// as the kernel shows them (proc/mountinfo, proc/cgroup, sys/fs/cgroup/...), and CgroupFiles that
// point there.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/container_resources.h"

namespace inferd {

class FakeCgroups {
 public:
  FakeCgroups()
      : root_(std::filesystem::temp_directory_path() /
              ("inferd_cgroups_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "proc");
  }
  ~FakeCgroups() { std::filesystem::remove_all(root_); }

  void Write(const std::filesystem::path& relative, const std::string& text) {
    std::filesystem::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << text;
  }
  // The file's contents; empty when it does not exist.
  std::string Read(const std::filesystem::path& relative) const {
    std::ifstream in(root_ / relative);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::filesystem::path path(const std::filesystem::path& relative) const { return root_ / relative; }
  CgroupFiles files() const {
    return {.proc_self_cgroup = root_ / "proc/cgroup", .proc_self_mountinfo = root_ / "proc/mountinfo", .root = root_};
  }

 private:
  std::filesystem::path root_;
};

}  // namespace inferd
