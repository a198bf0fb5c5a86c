#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace inferd {
namespace {

struct Outcome {
  std::atomic<int> ok{0};
  std::atomic<int> deadline{0};
};

PendingRequest MakePending(const std::string& id, Outcome* outcome, uint32_t priority = 0,
                           uint64_t timeout_us = 0, int64_t batch = 1, uint64_t key = 7) {
  auto request = std::make_unique<InferRequest>();
  request->model_name = "m";
  request->id = id;
  request->priority = priority;
  request->timeout_us = timeout_us;
  PendingRequest pending;
  pending.request = std::move(request);
  pending.batch_size = batch;
  pending.shape_key = key;
  pending.done = [outcome](StatusOr<InferResponse> result, const RequestTimings&) {
    if (result.ok())
      outcome->ok++;
    else if (result.status().code() == StatusCode::kDeadlineExceeded)
      outcome->deadline++;
  };
  return pending;
}

SchedulerOptions Options(int64_t max_batch, size_t max_queue = 0, uint32_t levels = 1, bool delay = false,
                         int64_t default_timeout_us = 0) {
  SchedulerOptions options;
  options.rules = {.dynamic = true, .max_batch_size = max_batch};
  options.priority_levels = levels;
  options.default_priority = levels;
  for (uint32_t i = 0; i < levels; ++i) {
    options.level_policies.push_back({.delay_on_timeout = delay,
                                      .default_timeout = Micros(default_timeout_us),
                                      .allow_timeout_override = true,
                                      .max_queue_size = max_queue});
  }
  return options;
}

std::vector<std::string> Ids(const std::vector<PendingRequest>& batch) {
  std::vector<std::string> ids;
  for (const auto& item : batch) ids.push_back(item.request->id);
  return ids;
}

TEST(SchedulerTest, MergesQueuedRequestsInArrivalOrder) {
  ManualClock clock;
  Scheduler scheduler(Options(4), &clock);
  Outcome outcome;
  for (const char* id : {"a", "b", "c", "d", "e"}) {
    auto pending = MakePending(id, &outcome);
    ASSERT_TRUE(scheduler.Enqueue(pending).ok());
  }
  EXPECT_EQ(scheduler.QueueDepth(), 5u);
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"e"}));
  EXPECT_EQ(scheduler.QueueDepth(), 0u);
}

TEST(SchedulerTest, FullQueueRejectsAtOnceAndKeepsTheRequest) {
  ManualClock clock;
  Scheduler scheduler(Options(4, /*max_queue=*/2), &clock);
  Outcome outcome;
  auto a = MakePending("a", &outcome), b = MakePending("b", &outcome), c = MakePending("c", &outcome);
  ASSERT_TRUE(scheduler.Enqueue(a).ok());
  ASSERT_TRUE(scheduler.Enqueue(b).ok());
  Status full = scheduler.Enqueue(c);
  EXPECT_EQ(full.code(), StatusCode::kUnavailable);
  EXPECT_NE(c.request, nullptr);  // still the caller's to answer
}

TEST(SchedulerTest, HigherPriorityLevelRunsFirst) {
  ManualClock clock;
  Scheduler scheduler(Options(1, 0, /*levels=*/3), &clock);
  Outcome outcome;
  for (auto [id, priority] :
       std::vector<std::pair<std::string, uint32_t>>{{"low", 3}, {"mid", 2}, {"high", 1}, {"default", 0}}) {
    auto pending = MakePending(id, &outcome, priority);
    ASSERT_TRUE(scheduler.Enqueue(pending).ok());
  }
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"high"}));
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"mid"}));
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"low"}));  // default level is 3
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"default"}));
}

TEST(SchedulerTest, ExpiredRequestsAreRejected) {
  ManualClock clock;
  Scheduler scheduler(Options(4), &clock);
  Outcome outcome;
  auto expiring = MakePending("expiring", &outcome, 0, /*timeout_us=*/100);
  auto patient = MakePending("patient", &outcome);
  ASSERT_TRUE(scheduler.Enqueue(expiring).ok());
  ASSERT_TRUE(scheduler.Enqueue(patient).ok());
  clock.Advance(Micros(150));
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"patient"}));
  EXPECT_EQ(outcome.deadline.load(), 1);
}

TEST(SchedulerTest, RequestTimeoutMayOnlyShortenAnAllowedDefault) {
  ManualClock clock;
  Outcome outcome;
  SchedulerOptions options = Options(1, 0, 1, false, /*default_timeout_us=*/1000);
  {
    Scheduler scheduler(options, &clock);
    auto shorter = MakePending("shorter", &outcome, 0, /*timeout_us=*/100);
    auto longer = MakePending("longer", &outcome, 0, /*timeout_us=*/5000);
    ASSERT_TRUE(scheduler.Enqueue(shorter).ok());
    ASSERT_TRUE(scheduler.Enqueue(longer).ok());
    clock.Advance(Micros(500));
    EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"longer"}));  // "shorter" expired
    EXPECT_EQ(outcome.deadline.load(), 1);
  }
  options.level_policies[0].allow_timeout_override = false;
  {
    Scheduler scheduler(options, &clock);
    auto ignored = MakePending("ignored", &outcome, 0, /*timeout_us=*/100);
    ASSERT_TRUE(scheduler.Enqueue(ignored).ok());
    clock.Advance(Micros(500));
    EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"ignored"}));  // default 1000 us applies
  }
}

TEST(SchedulerTest, DelayActionStillRunsExpiredRequestsLast) {
  ManualClock clock;
  Scheduler scheduler(Options(1, 0, 1, /*delay=*/true, /*default_timeout_us=*/100), &clock);
  Outcome outcome;
  auto old_request = MakePending("old", &outcome);
  ASSERT_TRUE(scheduler.Enqueue(old_request).ok());
  clock.Advance(Micros(150));
  auto fresh = MakePending("fresh", &outcome);
  ASSERT_TRUE(scheduler.Enqueue(fresh).ok());
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"fresh"}));
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"old"}));
  EXPECT_EQ(outcome.deadline.load(), 0);
}

TEST(SchedulerTest, ClientDeadlineRejectsWhateverThePolicySays) {
  ManualClock clock;
  // The policy would delay expired requests and ignores request timeouts; a client deadline
  // still drops the request, because nobody waits for its answer any more.
  SchedulerOptions options = Options(1, 0, 1, /*delay=*/true, /*default_timeout_us=*/1000);
  options.level_policies[0].allow_timeout_override = false;
  Scheduler scheduler(options, &clock);
  Outcome outcome;
  auto gone = MakePending("gone", &outcome);
  gone.request->client_timeout_us = 100;
  auto waiting = MakePending("waiting", &outcome);
  waiting.request->client_timeout_us = 5000;  // later than the policy's: the policy's DELAY applies
  ASSERT_TRUE(scheduler.Enqueue(gone).ok());
  ASSERT_TRUE(scheduler.Enqueue(waiting).ok());
  clock.Advance(Micros(1500));
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"waiting"}));
  EXPECT_EQ(outcome.deadline.load(), 1);
}

TEST(SchedulerTest, WaitsForTheDelayAndWakesWhenTimeMoves) {
  ManualClock clock;
  SchedulerOptions options = Options(8);
  options.rules.max_queue_delay = Micros(1000);
  Scheduler scheduler(options, &clock);
  Outcome outcome;
  std::atomic<size_t> taken{0};
  std::thread instance([&] { taken = scheduler.NextBatch().size(); });
  for (const char* id : {"a", "b"}) {
    auto pending = MakePending(id, &outcome);
    ASSERT_TRUE(scheduler.Enqueue(pending).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(taken.load(), 0u);  // manual time has not moved: still waiting for more requests
  clock.Advance(Micros(1000));
  scheduler.Poke();
  instance.join();
  EXPECT_EQ(taken.load(), 2u);
}

TEST(SchedulerTest, ShutdownDrainsThenEnds) {
  ManualClock clock;
  SchedulerOptions options = Options(8);
  options.rules.max_queue_delay = Micros(1'000'000);
  Scheduler scheduler(options, &clock);
  Outcome outcome;
  auto pending = MakePending("a", &outcome);
  ASSERT_TRUE(scheduler.Enqueue(pending).ok());
  scheduler.Shutdown();
  auto late = MakePending("late", &outcome);
  EXPECT_EQ(scheduler.Enqueue(late).code(), StatusCode::kUnavailable);
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"a"}));  // no waiting at shutdown
  EXPECT_TRUE(scheduler.NextBatch().empty());
}

TEST(SchedulerTest, DifferentShapesGoInSeparateBatches) {
  ManualClock clock;
  Scheduler scheduler(Options(8), &clock);
  Outcome outcome;
  auto a = MakePending("a", &outcome, 0, 0, 1, /*key=*/1);
  auto b = MakePending("b", &outcome, 0, 0, 1, /*key=*/2);
  auto c = MakePending("c", &outcome, 0, 0, 1, /*key=*/2);
  for (auto* p : {&a, &b, &c}) ASSERT_TRUE(scheduler.Enqueue(*p).ok());
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"a"}));
  EXPECT_EQ(Ids(scheduler.NextBatch()), (std::vector<std::string>{"b", "c"}));
}

}  // namespace
}  // namespace inferd

namespace inferd {
namespace {

TEST(SchedulerCancelTest, CancelQueuedAnswersEveryWaitingRequest) {
  ManualClock clock;
  Scheduler scheduler(Options(4), &clock);
  std::atomic<int> cancelled{0};
  for (const char* id : {"a", "b", "c"}) {
    Outcome unused;
    auto pending = MakePending(id, &unused);
    pending.done = [&cancelled](StatusOr<InferResponse> result, const RequestTimings&) {
      if (result.status().code() == StatusCode::kCancelled) cancelled++;
    };
    ASSERT_TRUE(scheduler.Enqueue(pending).ok());
  }
  scheduler.CancelQueued(Status::Cancelled("shutting down"));
  EXPECT_EQ(cancelled.load(), 3);
  EXPECT_EQ(scheduler.QueueDepth(), 0u);
}

}  // namespace
}  // namespace inferd
