// QualityTracker: predictions joined with feedback give TP/FP/FN, accuracy, macro precision and
// recall (argmax, binary score, class-index outputs) or MAE; unknown, expired, duplicate and
// invalid feedback is counted apart; the window is bounded; the config parameter is checked.
#include "metrics/quality_tracker.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

template <typename T>
std::vector<Tensor> Output(DataType type, Shape shape, std::vector<T> values, const std::string& name = "OUT") {
  auto storage = std::make_shared<std::vector<T>>(std::move(values));
  return {Tensor{name, type, std::move(shape), AliasData(storage, storage->data()), storage->size() * sizeof(T)}};
}

class QualityTrackerTest : public ::testing::Test {
 protected:
  QualityTrackerTest() { QualityTracker::RegisterMetricFamilies(&registry_); }

  std::unique_ptr<QualityTracker> Make(const std::string& spec_text, std::vector<std::string> labels = {}) {
    auto spec = ParseQualitySpec(spec_text);
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    return std::make_unique<QualityTracker>(*spec, std::move(labels), &registry_, ModelLabels("m", 1), &clock_);
  }

  bool Exported(const std::string& line) { return registry_.RenderText().find(line + "\n") != std::string::npos; }

  MetricsRegistry registry_;
  ManualClock clock_;
};

TEST_F(QualityTrackerTest, ArgmaxPredictionsJoinedWithLabelsGiveTheConfusionCounts) {
  auto tracker = Make("output=OUT,task=classification", {"cat", "dog", "bird"});
  // Three requests of 3 scores: predicted 0, 1, 1.
  tracker->RecordPrediction("a", Output<float>(DataType::kFp32, {1, 3}, {0.9f, 0.05f, 0.05f}), 1);
  tracker->RecordPrediction("b", Output<float>(DataType::kFp32, {1, 3}, {0.1f, 0.8f, 0.1f}), 1);
  tracker->RecordPrediction("c", Output<float>(DataType::kFp32, {1, 3}, {0.2f, 0.5f, 0.3f}), 1);
  EXPECT_EQ(tracker->AddFeedback("a", {0.0}), FeedbackOutcome::kJoined);                 // TP cat
  EXPECT_EQ(tracker->AddFeedback("b", {std::string("dog")}), FeedbackOutcome::kJoined);  // TP dog
  EXPECT_EQ(tracker->AddFeedback("c", {std::string("bird")}), FeedbackOutcome::kJoined); // FP dog, FN bird
  const QualityReport report = tracker->Report();
  EXPECT_EQ(report.pairs, 3u);
  EXPECT_DOUBLE_EQ(report.accuracy, 2.0 / 3);
  // Precision over predicted classes: cat 1/1, dog 1/2; recall over true classes: cat 1, dog 1, bird 0.
  EXPECT_DOUBLE_EQ(report.precision, (1.0 + 0.5) / 2);
  EXPECT_DOUBLE_EQ(report.recall, (1.0 + 1.0 + 0.0) / 3);
  ASSERT_EQ(report.classes.size(), 3u);
  EXPECT_EQ(report.classes[1].label, "dog");
  EXPECT_EQ(report.classes[1].true_positives, 1u);
  EXPECT_EQ(report.classes[1].false_positives, 1u);
  EXPECT_EQ(report.classes[2].false_negatives, 1u);
  EXPECT_TRUE(Exported("inferd_quality_false_positives_total{model=\"m\",version=\"1\",class=\"dog\"} 1"));
  EXPECT_TRUE(Exported("inferd_quality_false_negatives_total{model=\"m\",version=\"1\",class=\"bird\"} 1"));
  EXPECT_TRUE(Exported("inferd_feedback_total{model=\"m\",version=\"1\",outcome=\"joined\"} 3"));
  EXPECT_TRUE(Exported("inferd_quality_accuracy_ratio{model=\"m\",version=\"1\"} 0.66666666666666663"));
}

TEST_F(QualityTrackerTest, ABatchedRequestJoinsOneLabelPerRow) {
  auto tracker = Make("output=OUT,task=classification");
  tracker->RecordPrediction("batch", Output<float>(DataType::kFp32, {2, 2}, {0.9f, 0.1f, 0.3f, 0.7f}), 2);
  EXPECT_EQ(tracker->AddFeedback("batch", {1.0}), FeedbackOutcome::kInvalid);  // 2 rows, 1 label
  EXPECT_EQ(tracker->AddFeedback("batch", {0.0, 0.0}), FeedbackOutcome::kJoined);
  EXPECT_EQ(tracker->Report().pairs, 2u);
  EXPECT_DOUBLE_EQ(tracker->Report().accuracy, 0.5);
}

TEST_F(QualityTrackerTest, OneScoreIsBinaryAtTheThresholdAndOneIntegerIsTheClass) {
  auto binary = Make("output=OUT,task=classification,threshold=0.7");
  binary->RecordPrediction("x", Output<float>(DataType::kFp32, {1, 1}, {0.65f}), 1);  // class 0
  EXPECT_EQ(binary->AddFeedback("x", {0.0}), FeedbackOutcome::kJoined);
  EXPECT_DOUBLE_EQ(binary->Report().accuracy, 1.0);

  auto indices = Make("output=OUT,task=classification");
  indices->RecordPrediction("y", Output<int64_t>(DataType::kInt64, {1, 1}, {7}), 1);
  EXPECT_EQ(indices->AddFeedback("y", {7.0}), FeedbackOutcome::kJoined);
  EXPECT_EQ(indices->Report().classes.at(0).index, 7);
  EXPECT_EQ(indices->Report().classes.at(0).true_positives, 1u);
  indices->RecordPrediction("negative", Output<int64_t>(DataType::kInt64, {1, 1}, {-3}), 1);
  EXPECT_FALSE(indices->Knows("negative"));  // not a class: not remembered
}

TEST_F(QualityTrackerTest, RegressionGivesTheMeanAbsoluteError) {
  auto tracker = Make("output=OUT,task=regression");
  tracker->RecordPrediction("r1", Output<double>(DataType::kFp64, {1, 1}, {10.0}), 1);
  tracker->RecordPrediction("r2", Output<double>(DataType::kFp64, {1, 1}, {4.0}), 1);
  EXPECT_EQ(tracker->AddFeedback("r1", {12.0}), FeedbackOutcome::kJoined);
  EXPECT_EQ(tracker->AddFeedback("r2", {std::string("4")}), FeedbackOutcome::kInvalid);
  EXPECT_EQ(tracker->AddFeedback("r2", {3.0}), FeedbackOutcome::kJoined);
  EXPECT_DOUBLE_EQ(tracker->Report().mean_absolute_error, 1.5);
  EXPECT_TRUE(Exported("inferd_quality_mean_absolute_error{model=\"m\",version=\"1\"} 1.5"));
}

TEST_F(QualityTrackerTest, UnknownExpiredDuplicateAndInvalidFeedbackIsCountedApart) {
  auto tracker = Make("output=OUT,task=classification,max_age_s=60", {"no", "yes"});
  auto two_scores = [] { return Output<float>(DataType::kFp32, {1, 2}, {0.2f, 0.8f}); };
  tracker->RecordPrediction("fresh", two_scores(), 1);
  tracker->RecordPrediction("stale", two_scores(), 1);
  tracker->RecordPrediction("", two_scores(), 1);                                             // no id: nothing
  tracker->RecordPrediction("other", Output<float>(DataType::kFp32, {1, 2}, {1, 0}, "X"), 1);  // not the output
  EXPECT_FALSE(tracker->Knows("other"));
  clock_.Advance(std::chrono::seconds(30));
  tracker->RecordPrediction("fresh", two_scores(), 1);  // the id again: the newer prediction counts
  clock_.Advance(std::chrono::seconds(40));
  EXPECT_EQ(tracker->AddFeedback("nope", {1.0}), FeedbackOutcome::kUnknown);
  EXPECT_EQ(tracker->AddFeedback("stale", {1.0}), FeedbackOutcome::kExpired);
  EXPECT_EQ(tracker->AddFeedback("fresh", {std::string("maybe")}), FeedbackOutcome::kInvalid);
  EXPECT_EQ(tracker->AddFeedback("fresh", {2.0}), FeedbackOutcome::kInvalid);  // no class 2
  EXPECT_EQ(tracker->AddFeedback("fresh", {0.5}), FeedbackOutcome::kInvalid);
  EXPECT_EQ(tracker->AddFeedback("fresh", {std::string("yes")}), FeedbackOutcome::kJoined);
  EXPECT_EQ(tracker->AddFeedback("fresh", {std::string("yes")}), FeedbackOutcome::kDuplicate);
  tracker->Count(FeedbackOutcome::kUnknown);
  const QualityReport report = tracker->Report();
  EXPECT_EQ(report.feedback[static_cast<size_t>(FeedbackOutcome::kJoined)], 1u);
  EXPECT_EQ(report.feedback[static_cast<size_t>(FeedbackOutcome::kUnknown)], 2u);
  EXPECT_EQ(report.feedback[static_cast<size_t>(FeedbackOutcome::kExpired)], 1u);
  EXPECT_EQ(report.feedback[static_cast<size_t>(FeedbackOutcome::kDuplicate)], 1u);
  EXPECT_EQ(report.feedback[static_cast<size_t>(FeedbackOutcome::kInvalid)], 3u);
  EXPECT_EQ(report.pairs, 1u);
  EXPECT_TRUE(Exported("inferd_feedback_total{model=\"m\",version=\"1\",outcome=\"invalid\"} 3"));
}

TEST_F(QualityTrackerTest, TheWindowKeepsTheNewestPredictionsOnly) {
  auto tracker = Make("output=OUT,task=regression,window=3");
  for (int i = 0; i < 5; ++i) {
    tracker->RecordPrediction("id" + std::to_string(i), Output<float>(DataType::kFp32, {1, 1}, {1.0f}), 1);
  }
  EXPECT_EQ(tracker->Report().predictions_tracked, 3u);
  EXPECT_FALSE(tracker->Knows("id1"));
  EXPECT_TRUE(tracker->Knows("id2"));
  EXPECT_EQ(tracker->AddFeedback("id0", {1.0}), FeedbackOutcome::kUnknown);
  EXPECT_EQ(tracker->AddFeedback("id4", {1.0}), FeedbackOutcome::kJoined);
  // An id seen twice: its older slot leaving the window must not forget the newer one.
  auto reused = Make("output=OUT,task=regression,window=2");
  reused->RecordPrediction("same", Output<float>(DataType::kFp32, {1, 1}, {1.0f}), 1);
  reused->RecordPrediction("same", Output<float>(DataType::kFp32, {1, 1}, {2.0f}), 1);
  reused->RecordPrediction("new", Output<float>(DataType::kFp32, {1, 1}, {3.0f}), 1);  // overwrites slot 0
  EXPECT_TRUE(reused->Knows("same"));
  EXPECT_EQ(reused->AddFeedback("same", {2.0}), FeedbackOutcome::kJoined);
  EXPECT_DOUBLE_EQ(reused->Report().mean_absolute_error, 0.0);
}

TEST_F(QualityTrackerTest, TheParameterIsCheckedKeyByKey) {
  EXPECT_TRUE(ParseQualitySpec("output=P,task=regression,window=5,max_age_s=9,threshold=0.3").ok());
  for (const char* bad : {"", "task=regression", "output=P,task=ranking", "output=P,window=0", "output=P,colour=red",
                          "output=P,max_age_s=-1", "output=P,threshold=x", "output=P,window"}) {
    auto spec = ParseQualitySpec(bad);
    EXPECT_FALSE(spec.ok()) << bad;
    if (!spec.ok()) {
      EXPECT_NE(spec.status().message().find("quality"), std::string::npos) << bad;
    }
  }
}

}  // namespace
}  // namespace inferd
