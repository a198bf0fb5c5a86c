#include <gtest/gtest.h>

#include "pipeline/circuit_breaker.h"

namespace inferd {
namespace {

const Status kFailed = Status::Internal("boom");
const Status kOk = Status::Ok();

TEST(CircuitBreakerTest, OpensAfterConsecutiveFailuresThenProbesAndCloses) {
  ManualClock clock;
  CircuitBreaker breaker(*ParseBreakerPolicy("consecutive_failures=3,cool_down_seconds=2"), &clock);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(breaker.Allow());
    breaker.Record(kFailed);
  }
  ASSERT_TRUE(breaker.Allow());
  breaker.Record(kOk);  // a success resets the run of failures
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(breaker.Allow());
    breaker.Record(kFailed);
  }
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  EXPECT_FALSE(breaker.Allow());
  clock.Advance(std::chrono::seconds(2));
  EXPECT_EQ(breaker.state(), BreakerState::kHalfOpen);
  EXPECT_TRUE(breaker.Allow());   // the one probe
  EXPECT_FALSE(breaker.Allow());  // the rest wait for its answer
  breaker.Record(kOk);
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  EXPECT_TRUE(breaker.Allow());
}

TEST(CircuitBreakerTest, AFailedProbeOpensItAgain) {
  ManualClock clock;
  CircuitBreaker breaker(*ParseBreakerPolicy("consecutive_failures=1,cool_down_seconds=1"), &clock);
  ASSERT_TRUE(breaker.Allow());
  breaker.Record(kFailed);
  clock.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(breaker.Allow());
  breaker.Record(kFailed);
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  EXPECT_FALSE(breaker.Allow());
}

TEST(CircuitBreakerTest, OpensOnTheErrorRateOverTheWindowOnceEnoughAnswered) {
  ManualClock clock;
  CircuitBreaker breaker(*ParseBreakerPolicy("error_rate=0.5,window_seconds=10,min_requests=4"), &clock);
  // 2 of 3 failed: above half, but too few answers to judge.
  for (const Status& status : {kFailed, kOk, kFailed}) {
    ASSERT_TRUE(breaker.Allow());
    breaker.Record(status);
  }
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  // Old answers leave the window: the failures 11 s ago no longer count.
  clock.Advance(std::chrono::seconds(11));
  for (const Status& status : {kOk, kOk, kFailed, kOk}) breaker.Record(status);
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);  // 1 of 4
  for (const Status& status : {kFailed, kFailed, kFailed}) breaker.Record(status);
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);  // 4 of 7
}

TEST(CircuitBreakerTest, ClientErrorsDoNotCount) {
  ManualClock clock;
  CircuitBreaker breaker(*ParseBreakerPolicy("consecutive_failures=2"), &clock);
  for (int i = 0; i < 5; ++i) breaker.Record(Status::InvalidArgument("bad image"));
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  breaker.Record(Status::DeadlineExceeded("late"));
  breaker.Record(Status::Unavailable("queue full"));
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
}

TEST(CircuitBreakerTest, PoliciesAreCheckedWhenParsed) {
  auto policy = ParseBreakerPolicy("error_rate=0.25,window_seconds=30,min_requests=20,cool_down_seconds=0.5,probes=3,fallback=small");
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  EXPECT_EQ(policy->error_rate, 0.25);
  EXPECT_EQ(policy->window, std::chrono::seconds(30));
  EXPECT_EQ(policy->cool_down, std::chrono::milliseconds(500));
  EXPECT_EQ(policy->probes, 3);
  EXPECT_EQ(policy->fallback, "small");
  EXPECT_NE(ParseBreakerPolicy("cool_down_seconds=5").status().message().find("never opens"), std::string::npos);
  EXPECT_NE(ParseBreakerPolicy("error_rate=2").status().message().find("fraction"), std::string::npos);
  EXPECT_NE(ParseBreakerPolicy("oops=1").status().message().find("unknown key 'oops'"), std::string::npos);
  EXPECT_NE(ParseBreakerPolicy("consecutive_failures").status().message().find("key=value"), std::string::npos);
}

}  // namespace
}  // namespace inferd
