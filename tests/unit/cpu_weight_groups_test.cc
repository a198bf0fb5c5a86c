// Model cgroups with cpu weights, made in fake cgroup trees (files the kernel would show): the v2
// threaded layout, the v1 cpu hierarchy, and the cases where nothing can be managed. The real
// kernel's side is in tests/e2e/test_cpu_placement.py, where this machine lets it run.
#include "common/cpu_weight_groups.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "fake_cgroups.h"

namespace inferd {
namespace {

const std::string kPid = std::to_string(::getpid());
const std::string kTid = std::to_string(::gettid());

TEST(CpuWeightTest, ParsesOnlyWholeWeightsInRange) {
  EXPECT_EQ(*ParseCpuWeight("100"), 100);
  EXPECT_EQ(*ParseCpuWeight("1"), 1);
  EXPECT_EQ(*ParseCpuWeight("10000"), 10000);
  for (const char* bad : {"", "0", "10001", "-5", "1.5", "50x", " 50"}) {
    auto weight = ParseCpuWeight(bad);
    ASSERT_FALSE(weight.ok()) << bad;
    EXPECT_NE(weight.status().message().find("from 1 to 10000"), std::string::npos);
  }
}

TEST(CpuWeightTest, NiceFollowsCfsWeightSteps) {
  EXPECT_EQ(NiceForCpuWeight(100), 0);
  EXPECT_EQ(NiceForCpuWeight(125), -1);  // one nice step is a factor of 1.25
  EXPECT_EQ(NiceForCpuWeight(80), 1);
  EXPECT_EQ(NiceForCpuWeight(1000), -10);
  EXPECT_EQ(NiceForCpuWeight(10000), -20);  // clamped at Linux's range
  EXPECT_EQ(NiceForCpuWeight(1), 19);
}

TEST(CpuWeightGroupsTest, CgroupV2MakesAThreadedGroupPerModelUnderTheProcess) {
  FakeCgroups fake;
  fake.Write("proc/mountinfo", "25 1 0:22 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n");
  fake.Write("proc/cgroup", "0::/system.slice/inferd.service\n");
  const std::string service = "sys/fs/cgroup/system.slice/inferd.service/";
  fake.Write(service + "cgroup.controllers", "cpu io memory pids\n");
  fake.Write(service + "cgroup.subtree_control", "");
  fake.Write(service + "inferd-999999999/model-gone/.keep", "");  // a crashed run's leftovers
  std::filesystem::remove(fake.path(service + "inferd-999999999/model-gone/.keep"));

  CpuWeightGroups groups(fake.files());
  ASSERT_TRUE(groups.available()) << groups.Describe();
  EXPECT_NE(groups.Describe().find("cgroup v2 groups under"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(fake.path(service + "inferd-" + kPid)));  // nothing made before a model asks

  ASSERT_TRUE(groups.JoinCurrentThread("resnet/50", 400).ok());
  const std::string own = service + "inferd-" + kPid + "/";
  EXPECT_EQ(fake.Read(own + "cgroup.procs"), kPid);         // the process moved below its group...
  EXPECT_EQ(fake.Read(service + "cgroup.subtree_control"), "+cpu");  // ...which hands cpu down
  const std::string model = own + "model-resnet_50/";
  EXPECT_EQ(fake.Read(model + "cgroup.type"), "threaded");
  EXPECT_EQ(fake.Read(own + "cgroup.subtree_control"), "+cpu");
  EXPECT_EQ(fake.Read(model + "cpu.weight"), "400");
  EXPECT_EQ(fake.Read(model + "cgroup.threads"), kTid);
  EXPECT_FALSE(std::filesystem::exists(fake.path(service + "inferd-999999999")));  // swept

  ASSERT_TRUE(groups.JoinCurrentThread("resnet/50", 50).ok());  // a reload's new weight wins
  EXPECT_EQ(fake.Read(model + "cpu.weight"), "50");
}

TEST(CpuWeightGroupsTest, CgroupV1CpuHierarchyTakesSharesAndTasks) {
  FakeCgroups fake;
  fake.Write("proc/mountinfo",
             "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
             "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
             "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  fake.Write("proc/cgroup", "4:cpu,cpuacct:/jobs\n0::/\n");
  fake.Write("sys/fs/cgroup/cpu,cpuacct/jobs/cpu.shares", "1024\n");

  CpuWeightGroups groups(fake.files());
  ASSERT_TRUE(groups.available()) << groups.Describe();
  ASSERT_TRUE(groups.JoinCurrentThread("light", 200).ok());
  const std::string own = "sys/fs/cgroup/cpu,cpuacct/jobs/inferd-" + kPid + "/";
  EXPECT_EQ(fake.Read(own + "cgroup.procs"), kPid);
  EXPECT_EQ(fake.Read(own + "model-light/cpu.shares"), "2048");  // 100 in weight is 1024 in shares
  EXPECT_EQ(fake.Read(own + "model-light/tasks"), kTid);
  ASSERT_TRUE(groups.JoinCurrentThread("tiny", 1).ok());
  EXPECT_EQ(fake.Read(own + "model-tiny/cpu.shares"), "10");  // 1 x 1024 / 100, rounded down

  // Release removes a group once its threads are gone (a plain folder here holds the files).
  std::filesystem::remove_all(fake.path(own + "model-tiny"));
  std::filesystem::create_directory(fake.path(own + "model-tiny"));
  groups.Release("tiny");
  EXPECT_FALSE(std::filesystem::exists(fake.path(own + "model-tiny")));
  groups.Release("light");  // not empty: it stays
  EXPECT_TRUE(std::filesystem::exists(fake.path(own + "model-light")));
}

TEST(CpuWeightGroupsTest, SaysWhyWhenNothingCanBeManaged) {
  {
    FakeCgroups fake;  // the hybrid layout with cpu on no hierarchy at all
    fake.Write("proc/mountinfo", "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
    fake.Write("proc/cgroup", "0::/\n");
    fake.Write("sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n");
    CpuWeightGroups groups(fake.files());
    EXPECT_FALSE(groups.available());
    EXPECT_NE(groups.Describe().find("is not given the cpu controller (its cgroup.controllers: 'hugetlb')"),
              std::string::npos)
        << groups.Describe();
    EXPECT_NE(groups.Describe().find("nice value instead"), std::string::npos);
    auto joined = groups.JoinCurrentThread("m", 100);
    EXPECT_EQ(joined.code(), StatusCode::kUnavailable);
  }
  {
    FakeCgroups fake;
    fake.Write("proc/mountinfo", "");
    fake.Write("proc/cgroup", "");
    CpuWeightGroups groups(fake.files());
    EXPECT_FALSE(groups.available());
    EXPECT_NE(groups.Describe().find("no cgroup file system is mounted"), std::string::npos);
  }
}

}  // namespace
}  // namespace inferd
