#include "common/cpu_placement.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

#include "config/model_config.h"

namespace inferd {
namespace {

TEST(CpuPlacementTest, ParsesAndFormatsLinuxCpuLists) {
  EXPECT_EQ(*ParseCpuList("0-3,8,10-11"), (CpuList{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(*ParseCpuList("5,1"), (CpuList{1, 5}));
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({4}), "4");
  for (const char* bad : {"", "a", "1-", "-1", "3-1", "1,,2", "0,0", "99999", "1 2"}) {
    EXPECT_FALSE(ParseCpuList(bad).ok()) << bad;
  }
}

TEST(CpuPlacementTest, InstancesTakeEqualRunsInOrder) {
  using Split = std::vector<CpuList>;
  EXPECT_EQ(SplitAmongInstances({0, 1, 2, 3, 4, 5}, 2), (Split{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(SplitAmongInstances({2, 3, 4}, 2), (Split{{2}, {3}}));  // the odd CPU out stays unused
  EXPECT_EQ(SplitAmongInstances({0, 1}, 3), (Split{{0}, {1}, {0}}));  // more instances than CPUs: in turn
  EXPECT_EQ(SplitAmongInstances({7}, 1), (Split{{7}}));
}

TEST(CpuPlacementTest, APinnedThreadAndTheThreadsItStartsRunOnlyThere) {
  const CpuList all = CurrentThreadCpus();
  ASSERT_FALSE(all.empty());
  const CpuList first{all.front()};
  CpuList pinned, child;
  std::thread([&] {
    ASSERT_TRUE(PinCurrentThread(first).ok());
    pinned = CurrentThreadCpus();
    std::thread([&] { child = CurrentThreadCpus(); }).join();
  }).join();
  EXPECT_EQ(pinned, first);
  EXPECT_EQ(child, first);
  EXPECT_EQ(CurrentThreadCpus(), all);  // the caller is untouched
  std::thread([&] { EXPECT_FALSE(PinCurrentThread({CPU_SETSIZE - 1}).ok()); }).join();  // no such CPU here
}

TEST(CpuPlacementTest, NiceValuesParseAndApplyToOneThreadAndItsChildren) {
  EXPECT_EQ(*ParseNice("10"), 10);
  EXPECT_EQ(*ParseNice("-5"), -5);
  for (const char* bad : {"", "20", "-21", "low", "1.5"}) EXPECT_FALSE(ParseNice(bad).ok()) << bad;
  const int before = getpriority(PRIO_PROCESS, 0);
  int mine = 0, child = 0;
  std::thread([&] {
    ASSERT_TRUE(SetCurrentThreadNice(15).ok());
    mine = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
    std::thread([&] { child = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))); }).join();
  }).join();
  EXPECT_EQ(mine, 15);
  EXPECT_EQ(child, 15);
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))), before);  // the caller is untouched
}

TEST(CpuPlacementTest, ConfigParameterPlacesEachInstance) {
  auto config = ParseModelConfigText(R"(
    backend: "identity"
    instance_group [ { count: 2 } ]
    parameters { key: "cpus" value: { string_value: "0-3" } })", "config.pbtxt");
  ASSERT_TRUE(config.ok());
  NormalizeModelConfig(&*config, "m");
  ASSERT_TRUE(ValidateModelConfig(*config, "config.pbtxt").ok());
  EXPECT_EQ(*InstanceCpus(*config), (std::vector<CpuList>{{0, 1}, {2, 3}}));
  (*config->mutable_parameters())["cpus"].set_string_value("0-");
  Status refused = ValidateModelConfig(*config, "config.pbtxt");
  EXPECT_NE(refused.message().find("parameters[cpus]"), std::string::npos) << refused.message();
  config->mutable_parameters()->erase("cpus");
  EXPECT_TRUE(InstanceCpus(*config)->empty());
  (*config->mutable_parameters())["nice"].set_string_value("7");
  EXPECT_EQ(InstanceCpuPolicyOf(*config)->nice, 7);
  (*config->mutable_parameters())["nice"].set_string_value("99");
  refused = ValidateModelConfig(*config, "config.pbtxt");
  EXPECT_NE(refused.message().find("parameters[nice]"), std::string::npos) << refused.message();
}

}  // namespace
}  // namespace inferd
