// Poll mode's rule (lifecycle/repository_poller.h): a model is loaded once its folder differs from
// what was last loaded and is the same at two polls in a row; one gone at two polls is unloaded;
// the versions whose own files changed are named.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "lifecycle/repository_poller.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

FolderSnapshot Folder(std::initializer_list<std::pair<const std::string, FileStamp>> files) { return files; }

const FolderSnapshot kOneVersion = Folder({{"config.pbtxt", {10, 1}}, {"1/model.onnx", {100, 1}}});

TEST(RepositoryPollerTest, NothingChangedNothingToDo) {
  RepositoryPoller poller({{"a", kOneVersion}});
  EXPECT_TRUE(poller.Poll({{"a", kOneVersion}}).empty());
  EXPECT_TRUE(poller.Poll({{"a", kOneVersion}}).empty());
}

TEST(RepositoryPollerTest, AVersionBeingCopiedInIsLoadedOnlyOnceItsFilesStopChanging) {
  RepositoryPoller poller({{"a", kOneVersion}});
  FolderSnapshot copying = kOneVersion;
  copying["2/model.onnx"] = {40, 5};  // half written
  EXPECT_TRUE(poller.Poll({{"a", copying}}).empty());
  copying["2/model.onnx"] = {100, 6};  // still growing at this poll
  EXPECT_TRUE(poller.Poll({{"a", copying}}).empty());
  const PollActions actions = poller.Poll({{"a", copying}});  // the same as last time: complete
  ASSERT_EQ(actions.load.size(), 1u);
  EXPECT_EQ(actions.load.at("a"), std::set<int64_t>{2});
  EXPECT_TRUE(poller.Poll({{"a", copying}}).empty());  // loaded: not again
}

TEST(RepositoryPollerTest, AReplacedModelFileNamesItsVersionAndAnEditedConfigNamesNone) {
  RepositoryPoller poller({{"a", kOneVersion}});
  FolderSnapshot replaced = kOneVersion;
  replaced["1/model.onnx"] = {100, 2};  // same size, new mtime
  poller.Poll({{"a", replaced}});
  EXPECT_EQ(poller.Poll({{"a", replaced}}).load.at("a"), std::set<int64_t>{1});
  FolderSnapshot edited = replaced;
  edited["config.pbtxt"] = {12, 3};
  poller.Poll({{"a", edited}});
  EXPECT_EQ(poller.Poll({{"a", edited}}).load.at("a"), std::set<int64_t>{});
}

TEST(RepositoryPollerTest, NewAndRemovedModelsAndVersions) {
  RepositoryPoller poller({{"a", kOneVersion}, {"b", kOneVersion}});
  FolderSnapshot without_version = Folder({{"config.pbtxt", {10, 1}}});
  const RepositorySnapshot now{{"a", without_version}, {"c", kOneVersion}};  // b gone, c new
  EXPECT_TRUE(poller.Poll(now).empty());
  const PollActions actions = poller.Poll(now);
  EXPECT_EQ(actions.unload, std::vector<std::string>{"b"});
  ASSERT_EQ(actions.load.size(), 2u);
  EXPECT_EQ(actions.load.at("a"), std::set<int64_t>{1});  // version 1 was removed
  EXPECT_EQ(actions.load.at("c"), std::set<int64_t>{1});
  EXPECT_TRUE(poller.Poll(now).empty());
}

TEST(RepositoryPollerTest, AModelGoneForOnePollOnlyStays) {
  RepositoryPoller poller({{"a", kOneVersion}});
  EXPECT_TRUE(poller.Poll({}).empty());  // being replaced (rm -r, then cp -r)
  EXPECT_TRUE(poller.Poll({{"a", kOneVersion}}).empty());
  EXPECT_TRUE(poller.Poll({{"a", kOneVersion}}).empty());
}

TEST(RepositoryPollerTest, ABrokenVersionIsTriedAgainOnlyWhenItsFilesChange) {
  RepositoryPoller poller({{"a", kOneVersion}});
  FolderSnapshot broken = kOneVersion;
  broken["2/model.onnx"] = {3, 9};
  poller.Poll({{"a", broken}});
  EXPECT_EQ(poller.Poll({{"a", broken}}).load.size(), 1u);  // tried (and, say, failed)
  EXPECT_TRUE(poller.Poll({{"a", broken}}).empty());
  broken["2/model.onnx"] = {100, 10};  // fixed
  poller.Poll({{"a", broken}});
  EXPECT_EQ(poller.Poll({{"a", broken}}).load.at("a"), std::set<int64_t>{2});
}

TEST(SnapshotRepositoriesTest, ReadsEveryFileWithSizeAndMtimeButNotTheBackendsOwn) {
  const fs::path root = fs::temp_directory_path() / ("poller-test-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "m" / "1");
  fs::create_directories(root / ".hidden");
  std::ofstream(root / "m" / "config.pbtxt") << "max_batch_size: 0\n";
  std::ofstream(root / "m" / "1" / "model.onnx") << "0123456789";
  std::ofstream(root / "m" / "1" / "model.onnx.tuning") << "written by the ONNX backend";
  const RepositorySnapshot first = SnapshotRepositories({root});
  ASSERT_EQ(first.size(), 1u);
  const FolderSnapshot& m = first.at("m");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at("1/model.onnx").size, 10u);
  // Rewritten with the same size: the mtime tells.
  fs::last_write_time(root / "m" / "1" / "model.onnx", fs::last_write_time(root / "m" / "1" / "model.onnx") - std::chrono::hours(1));
  EXPECT_NE(SnapshotRepositories({root}).at("m"), m);
  EXPECT_EQ(ChangedVersions(m, SnapshotRepositories({root}).at("m")), std::set<int64_t>{1});
  fs::remove_all(root);
}

}  // namespace
}  // namespace inferd
