// StringPool: large strings come back for reuse within its limits; small ones never enter it.
#include "common/string_pool.h"

#include <gtest/gtest.h>

#include <string>

namespace inferd {
namespace {

constexpr size_t kKiB = 1024;

StringPool SmallPool() { return StringPool({.min_bytes = 64 * kKiB, .max_bytes = 1024 * kKiB, .max_strings = 3}); }

TEST(StringPoolTest, AGivenStringIsTakenAgainWithItsAllocation) {
  StringPool pool = SmallPool();
  std::string body = pool.Take(100 * kKiB);
  EXPECT_TRUE(body.empty());
  EXPECT_GE(body.capacity(), 100 * kKiB);
  body.assign(100 * kKiB, 'x');
  const char* allocation = body.data();
  pool.Give(std::move(body));
  EXPECT_EQ(pool.kept_strings(), 1u);
  std::string again = pool.Take(90 * kKiB);
  EXPECT_EQ(again.data(), allocation);
  EXPECT_TRUE(again.empty());  // nothing of the last body shows
  EXPECT_EQ(pool.kept_strings(), 0u);
  EXPECT_EQ(pool.kept_bytes(), 0u);
}

TEST(StringPoolTest, SmallStringsStayOutOfThePool) {
  StringPool pool = SmallPool();
  pool.Give(std::string(1000, 'x'));
  EXPECT_EQ(pool.kept_strings(), 0u);
  std::string kept(100 * kKiB, 'x');
  pool.Give(std::move(kept));
  EXPECT_GE(pool.Take(10 * kKiB).capacity(), 10 * kKiB);  // a small need gets its own string
  EXPECT_EQ(pool.kept_strings(), 1u);
}

TEST(StringPoolTest, TakesTheSmallestThatFitsAndNeverOneTwiceTheSize) {
  StringPool pool = SmallPool();
  std::string big(400 * kKiB, 'b'), medium(150 * kKiB, 'm');
  const char* medium_allocation = medium.data();
  pool.Give(std::move(big));
  pool.Give(std::move(medium));
  EXPECT_EQ(pool.Take(120 * kKiB).data(), medium_allocation);
  std::string fresh = pool.Take(100 * kKiB);  // the 400 KiB one is more than twice that
  EXPECT_EQ(pool.kept_strings(), 1u);
  EXPECT_GE(pool.Take(300 * kKiB).capacity(), 400 * kKiB);
  EXPECT_EQ(pool.kept_strings(), 0u);
}

TEST(StringPoolTest, KeepsNoMoreThanItsLimits) {
  StringPool pool = SmallPool();
  for (int i = 0; i < 5; ++i) pool.Give(std::string(100 * kKiB, 'x'));
  EXPECT_EQ(pool.kept_strings(), 3u);  // max_strings
  StringPool by_bytes = SmallPool();
  by_bytes.Give(std::string(600 * kKiB, 'x'));
  by_bytes.Give(std::string(600 * kKiB, 'y'));  // over max_bytes with the first: freed
  EXPECT_EQ(by_bytes.kept_strings(), 1u);
  EXPECT_LE(by_bytes.kept_bytes(), 1024 * kKiB);
}

TEST(StringPoolTest, ASharedStringComesBackWhenItsLastHolderLetsGo) {
  StringPool pool = SmallPool();
  auto shared = pool.Share(std::string(100 * kKiB, 's'));
  auto second_holder = shared;
  shared.reset();
  EXPECT_EQ(pool.kept_strings(), 0u);
  EXPECT_EQ((*second_holder)[0], 's');
  second_holder.reset();
  EXPECT_EQ(pool.kept_strings(), 1u);
  auto small = pool.Share(std::string(10, 's'));
  small.reset();
  EXPECT_EQ(pool.kept_strings(), 1u);
}

}  // namespace
}  // namespace inferd
