#include "lifecycle/mirror.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

namespace inferd {
namespace {

template <typename T>
Tensor Make(const std::string& name, DataType type, Shape shape, std::vector<T> values) {
  auto storage = std::make_shared<std::vector<T>>(std::move(values));
  return {name, type, std::move(shape), AliasData(storage, storage->data()), storage->size() * sizeof(T)};
}

Tensor Floats(std::vector<float> values, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  return Make("y", DataType::kFp32, std::move(shape), std::move(values));
}

AgreementGuard Guard(AgreementGuard::Compare compare = AgreementGuard::Compare::kClose, double tolerance = 1e-3) {
  AgreementGuard guard;
  guard.compare = compare;
  guard.tolerance = tolerance;
  guard.mirror_percent = 100;
  return guard;
}

bool Agree(const AgreementGuard& guard, const Tensor& a, const Tensor& b) {
  std::vector<Tensor> x{a}, y{b};
  return OutputsAgree(guard, x, y);
}

TEST(OutputsAgreeTest, FloatsAgreeWithinTheRelativeTolerance) {
  EXPECT_TRUE(Agree(Guard(), Floats({1000, 1}), Floats({1000.9f, 1.0009f})));
  EXPECT_FALSE(Agree(Guard(), Floats({1000, 1}), Floats({1000, 1.003f})));
  EXPECT_FALSE(Agree(Guard(AgreementGuard::Compare::kClose, 0), Floats({1}), Floats({1.0000001f})));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(Agree(Guard(), Floats({nan}), Floats({nan})));
  EXPECT_FALSE(Agree(Guard(), Floats({nan}), Floats({0})));
}

TEST(OutputsAgreeTest, ArgmaxComparesEachRowsLargestElement) {
  const auto argmax = Guard(AgreementGuard::Compare::kArgmax);
  // Two rows of three: the scores differ a lot, the winners do not.
  EXPECT_TRUE(Agree(argmax, Floats({0.1f, 0.7f, 0.2f, 5, 1, 2}, {2, 3}), Floats({0.3f, 0.4f, 0.3f, 9, 0, 8}, {2, 3})));
  EXPECT_FALSE(Agree(argmax, Floats({0.1f, 0.7f, 0.2f, 5, 1, 2}, {2, 3}), Floats({0.3f, 0.4f, 0.3f, 1, 0, 8}, {2, 3})));
  // Half precision too (1.0 = 0x3c00, 2.0 = 0x4000).
  EXPECT_TRUE(Agree(argmax, Make<uint16_t>("y", DataType::kFp16, {2}, {0x3c00, 0x4000}),
                    Make<uint16_t>("y", DataType::kFp16, {2}, {0x3800, 0x4400})));
  EXPECT_FALSE(Agree(argmax, Make<uint16_t>("y", DataType::kFp16, {2}, {0x3c00, 0x4000}),
                     Make<uint16_t>("y", DataType::kFp16, {2}, {0x4400, 0x4000})));
}

TEST(OutputsAgreeTest, TypesShapesNamesAndOtherTypesMustMatchExactly) {
  EXPECT_FALSE(Agree(Guard(), Floats({1, 2}, {1, 2}), Floats({1, 2}, {2, 1})));
  EXPECT_FALSE(Agree(Guard(), Make<int32_t>("y", DataType::kInt32, {1}, {3}), Make<int32_t>("y", DataType::kInt32, {1}, {4})));
  EXPECT_TRUE(Agree(Guard(), Make<int32_t>("y", DataType::kInt32, {1}, {3}), Make<int32_t>("y", DataType::kInt32, {1}, {3})));
  EXPECT_FALSE(Agree(Guard(), Make<int32_t>("y", DataType::kInt32, {1}, {3}), Make<float>("y", DataType::kFp32, {1}, {3})));
  Tensor renamed = Floats({1});
  renamed.name = "z";
  EXPECT_FALSE(Agree(Guard(), Floats({1}), renamed));
  // Outputs are matched by name, not position.
  Tensor a = Floats({1}), b = Make<int32_t>("label", DataType::kInt32, {1}, {7});
  std::vector<Tensor> first{a, b}, second{b, a}, fewer{a};
  EXPECT_TRUE(OutputsAgree(Guard(), first, second));
  EXPECT_FALSE(OutputsAgree(Guard(), first, fewer));
}

TEST(TrafficMirrorTest, PeersAndABoundOnMirrorsInFlight) {
  TrafficMirror mirror(1, 2, Guard(), {});
  EXPECT_EQ(mirror.PeerOf(1), 2);
  EXPECT_EQ(mirror.PeerOf(2), 1);
  EXPECT_EQ(mirror.PeerOf(3), 0);
  for (int i = 0; i < TrafficMirror::kMaxInFlight; ++i) EXPECT_TRUE(mirror.TryBegin());
  EXPECT_FALSE(mirror.TryBegin());  // every slot taken: skipped
  EXPECT_EQ(mirror.Counts().skipped, 1u);
  mirror.Abandon();
  EXPECT_TRUE(mirror.TryBegin());
}

TEST(TrafficMirrorTest, MirrorsAboutItsPercentOfRequests) {
  AgreementGuard guard = Guard();
  guard.mirror_percent = 20;
  TrafficMirror mirror(1, 2, guard, {});
  int taken = 0;
  for (int i = 0; i < 5000; ++i) {
    if (mirror.TryBegin()) {
      ++taken;
      mirror.Abandon();
    }
  }
  EXPECT_NEAR(taken, 1000, 150);
}

TEST(MirrorPairTest, TheSecondAnswerCompletesTheComparisonInEitherOrder) {
  auto mirror = std::make_shared<TrafficMirror>(1, 2, Guard(), TrafficMirror::Counters{});
  auto answer = [](float v) { return StatusOr<std::vector<Tensor>>(std::vector<Tensor>{Floats({v})}); };
  for (int64_t first : {1, 2}) {
    ASSERT_TRUE(mirror->TryBegin());
    MirrorPair pair(mirror);
    pair.Record(first, answer(1));
    EXPECT_EQ(mirror->Counts().compared + mirror->Counts().skipped, first == 1 ? 0u : 1u);
    pair.Record(3 - first, answer(1));
  }
  EXPECT_EQ(mirror->Counts().compared, 2u);
  EXPECT_EQ(mirror->Counts().agreed, 2u);
  {
    ASSERT_TRUE(mirror->TryBegin());
    MirrorPair pair(mirror);
    pair.Record(2, Status::Internal("candidate failed"));
    pair.Record(1, answer(1));
  }
  EXPECT_EQ(mirror->Counts().compared, 3u);  // a failing candidate disagrees
  EXPECT_EQ(mirror->Counts().agreed, 2u);
  {
    ASSERT_TRUE(mirror->TryBegin());
    MirrorPair pair(mirror);
    pair.Record(1, Status::Unavailable("baseline queue full"));
    pair.Record(2, answer(1));
  }
  EXPECT_EQ(mirror->Counts().compared, 3u);  // nothing to compare with
  EXPECT_EQ(mirror->Counts().skipped, 1u);
  // Every slot was given back.
  for (int i = 0; i < TrafficMirror::kMaxInFlight; ++i) EXPECT_TRUE(mirror->TryBegin());
}

TEST(MirrorPairTest, AnswersFromTwoThreadsAtOnce) {
  auto counter = std::make_shared<Counter>();
  auto mirror = std::make_shared<TrafficMirror>(1, 2, Guard(), TrafficMirror::Counters{counter, nullptr, nullptr});
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(mirror->TryBegin());
    auto pair = std::make_shared<MirrorPair>(mirror);
    std::thread a([&] { pair->Record(1, std::vector<Tensor>{Floats({static_cast<float>(i)})}); });
    std::thread b([&] { pair->Record(2, std::vector<Tensor>{Floats({static_cast<float>(i)})}); });
    a.join();
    b.join();
  }
  EXPECT_EQ(mirror->Counts().agreed, 200u);
  EXPECT_EQ(counter->value(), 200u);
}

}  // namespace
}  // namespace inferd
