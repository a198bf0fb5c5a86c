// Container limits read from fake cgroup trees laid out as the kernel shows them: v2, the v1/v2
// hybrid (this project's CI machines), ancestors with tighter limits, and a container that sees
// the host's path of its group.
#include "common/container_resources.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include <unistd.h>

#include "fake_cgroups.h"

namespace inferd {
namespace {
namespace fs = std::filesystem;

const int kOnline = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

TEST(ContainerResourcesTest, CgroupV2QuotaAndLimitTakeTheTightestAncestor) {
  FakeCgroups fake;
  fake.Write("proc/mountinfo", "25 1 0:22 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n");
  fake.Write("proc/cgroup", "0::/kubepods/pod1/inferd\n");
  fake.Write("sys/fs/cgroup/kubepods/pod1/inferd/cpu.max", "max 100000\n");
  fake.Write("sys/fs/cgroup/kubepods/pod1/cpu.max", "150000 100000\n");
  fake.Write("sys/fs/cgroup/kubepods/cpu.max", "400000 100000\n");
  fake.Write("sys/fs/cgroup/kubepods/pod1/inferd/memory.max", "2147483648\n");
  fake.Write("sys/fs/cgroup/kubepods/pod1/memory.max", "max\n");
  fake.Write("sys/fs/cgroup/kubepods/pod1/inferd/memory.current", "1000000\n");
  fake.Write("sys/fs/cgroup/kubepods/pod1/inferd/memory.stat", "anon 600000\ninactive_file 300000\nactive_file 100000\n");

  const ContainerResources r = DetectContainerResources(fake.files());
  ASSERT_TRUE(r.cpu_quota.has_value());
  EXPECT_DOUBLE_EQ(*r.cpu_quota, 1.5);
  EXPECT_EQ(r.cpu_quota_file.filename(), "cpu.max");
  EXPECT_EQ(r.cpu_quota_file.parent_path().filename(), "pod1");
  EXPECT_EQ(r.AvailableCpus(), std::min(kOnline, 2));  // 1.5 CPUs of time: two threads can use it
  EXPECT_EQ(r.memory_limit_bytes, int64_t{2147483648});
  EXPECT_EQ(r.memory_cgroup_version, 2);
  EXPECT_EQ(MemoryWorkingSetBytes(r), int64_t{700000});  // usage minus inactive file cache
}

TEST(ContainerResourcesTest, HybridHierarchyReadsTheV1Controllers) {
  FakeCgroups fake;
  fake.Write("proc/mountinfo",
             "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
             "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:5 - cgroup cgroup rw,cpu,cpuacct\n"
             "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
             "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  fake.Write("proc/cgroup", "4:memory:/job\n2:cpu,cpuacct:/job/worker\n0::/job\n");
  fake.Write("sys/fs/cgroup/cpu,cpuacct/job/worker/cpu.cfs_quota_us", "-1\n");
  fake.Write("sys/fs/cgroup/cpu,cpuacct/job/worker/cpu.cfs_period_us", "100000\n");
  fake.Write("sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "50000\n");
  fake.Write("sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
  fake.Write("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "536870912\n");
  fake.Write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  fake.Write("sys/fs/cgroup/memory/job/memory.usage_in_bytes", "400\n");
  fake.Write("sys/fs/cgroup/memory/job/memory.stat", "cache 200\ninactive_file 50\ntotal_inactive_file 150\n");

  const ContainerResources r = DetectContainerResources(fake.files());
  EXPECT_DOUBLE_EQ(r.cpu_quota.value_or(0), 0.5);
  EXPECT_EQ(r.AvailableCpus(), 1);
  EXPECT_EQ(r.memory_limit_bytes, int64_t{536870912});
  EXPECT_EQ(r.memory_cgroup_version, 1);
  EXPECT_EQ(MemoryWorkingSetBytes(r), int64_t{250});  // v1 counts the hierarchy's total_inactive_file
}

TEST(ContainerResourcesTest, AContainerSeeingTheHostsPathReadsItsMount) {
  FakeCgroups fake;
  fake.Write("proc/mountinfo", "25 1 0:22 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n");
  fake.Write("proc/cgroup", "0::/kubepods.slice/pod-abc.slice/cri-123.scope\n");  // not under the mount
  fake.Write("sys/fs/cgroup/cpu.max", "200000 100000\n");
  fake.Write("sys/fs/cgroup/memory.max", "1073741824\n");

  const ContainerResources r = DetectContainerResources(fake.files());
  EXPECT_DOUBLE_EQ(r.cpu_quota.value_or(0), 2.0);
  EXPECT_EQ(r.memory_limit_bytes, int64_t{1073741824});
  EXPECT_NE(r.Describe().find("cgroup quota 2 CPUs"), std::string::npos) << r.Describe();
}

TEST(ContainerResourcesTest, NoCgroupsMeansNoLimits) {
  FakeCgroups fake;
  fake.Write("proc/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n");
  fake.Write("proc/cgroup", "");
  const ContainerResources r = DetectContainerResources(fake.files());
  EXPECT_FALSE(r.cpu_quota.has_value());
  EXPECT_FALSE(r.memory_limit_bytes.has_value());
  EXPECT_FALSE(MemoryWorkingSetBytes(r).has_value());
  EXPECT_EQ(r.AvailableCpus(), kOnline);
  EXPECT_NE(r.Describe().find("no cgroup CPU quota"), std::string::npos) << r.Describe();
}

TEST(ContainerResourcesTest, ParsersRejectWhatIsNotALimit) {
  EXPECT_FALSE(ParseCpuMax("max 100000").has_value());
  EXPECT_DOUBLE_EQ(ParseCpuMax("250000 100000\n").value_or(0), 2.5);
  EXPECT_FALSE(ParseCpuMax("garbage").has_value());
  EXPECT_FALSE(ParseCfsQuota("-1", "100000").has_value());
  EXPECT_FALSE(ParseCfsQuota("50000", "0").has_value());
  EXPECT_FALSE(ParseMemoryLimit("max\n").has_value());
  EXPECT_FALSE(ParseMemoryLimit("9223372036854771712").has_value());
  EXPECT_EQ(ParseMemoryLimit("4096\n"), int64_t{4096});
  EXPECT_EQ(MemoryStatValue("active_file 7\ninactive_file 9\n", "inactive_file"), int64_t{9});
  EXPECT_EQ(MemoryStatValue("total_inactive_file 9\n", "inactive_file"), std::nullopt);
}

// This machine's own answer is within what the machine has.
TEST(ContainerResourcesTest, ThisProcessGetsBetweenOneAndTheOnlineCpus) {
  const ContainerResources& r = ProcessResources();
  EXPECT_GE(r.AvailableCpus(), 1);
  EXPECT_LE(r.AvailableCpus(), kOnline);
  EXPECT_LE(r.affinity_cpus, kOnline);
  // Where a memory controller is mounted, the process's own group has a working set (this test's).
  std::ifstream mountinfo("/proc/self/mountinfo");
  const std::string mounts((std::istreambuf_iterator<char>(mountinfo)), std::istreambuf_iterator<char>());
  if (mounts.find(" - cgroup2 ") != std::string::npos || mounts.find(",memory") != std::string::npos) {
    EXPECT_GT(MemoryWorkingSetBytes(r).value_or(0), 0) << r.Describe();
  }
}

}  // namespace
}  // namespace inferd
