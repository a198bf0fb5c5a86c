// MessagePool and ModelInfer's pools: a kept message parses its next tensor into the allocation
// its last one had, small messages are not kept, and the limits hold.
#include <gtest/gtest.h>

#include <string>

#include "frontends/grpc/grpc_call_util.h"

namespace inferd {
namespace {

using inference::ModelInferRequest;

constexpr size_t kTensorBytes = 200 * 1024;

std::string SerializedRequest(char fill) {
  ModelInferRequest request;
  request.set_model_name("image");
  request.add_inputs()->set_name("INPUT0");
  request.add_raw_input_contents(std::string(kTensorBytes, fill));
  return request.SerializeAsString();
}

MessagePool<ModelInferRequest> Pool(size_t max_messages = 4) {
  return MessagePool<ModelInferRequest>(
      {.min_bytes = 64 * 1024, .max_message_bytes = 1 << 20, .max_bytes = 64 << 20, .max_messages = max_messages},
      [](const ModelInferRequest& m) { return RawContentsCapacity(m.raw_input_contents()); });
}

TEST(MessagePoolTest, AKeptMessageParsesItsNextTensorIntoTheSameAllocation) {
  auto pool = Pool();
  auto message = pool.Take();
  ASSERT_TRUE(message->ParseFromString(SerializedRequest('a')));
  const char* allocation = message->raw_input_contents(0).data();
  ModelInferRequest* kept = message.get();
  pool.Give(std::move(message));
  ASSERT_EQ(pool.kept_messages(), 1u);
  auto again = pool.Take();
  EXPECT_EQ(again.get(), kept);
  EXPECT_EQ(again->raw_input_contents_size(), 0);  // cleared
  EXPECT_TRUE(again->model_name().empty());
  ASSERT_TRUE(again->ParseFromString(SerializedRequest('b')));
  EXPECT_EQ(again->raw_input_contents(0).data(), allocation);
  EXPECT_EQ(again->raw_input_contents(0), std::string(kTensorBytes, 'b'));
}

TEST(MessagePoolTest, SmallAndHugeMessagesAreNotKeptAndTheCountIsBounded) {
  auto pool = Pool(/*max_messages=*/2);
  auto small = pool.Take();
  small->add_raw_input_contents(std::string(64, 'x'));
  pool.Give(std::move(small));
  auto huge = pool.Take();
  huge->add_raw_input_contents(std::string(2 << 20, 'x'));  // a batch of images: over max_message_bytes
  pool.Give(std::move(huge));
  EXPECT_EQ(pool.kept_messages(), 0u);
  for (int i = 0; i < 3; ++i) {
    auto large = std::make_unique<ModelInferRequest>();
    ASSERT_TRUE(large->ParseFromString(SerializedRequest('c')));
    pool.Give(std::move(large));
  }
  EXPECT_EQ(pool.kept_messages(), 2u);
}

// TakeMessage leaves the call's message empty (it goes back with the call) and hands the contents
// to a pooled message that returns to ModelInfer's pool once the last tensor lets go.
TEST(MessagePoolTest, TakenRequestsGoBackToTheInferPoolWhenReleased) {
  auto call_message = MessageRecycling<ModelInferRequest>::Take();
  ASSERT_TRUE(call_message->ParseFromString(SerializedRequest('d')));
  const size_t kept_before = InferRequestMessages().kept_messages();
  auto taken = TakeMessage(call_message.get());
  EXPECT_EQ(call_message->raw_input_contents_size(), 0);
  ASSERT_EQ(taken->raw_input_contents_size(), 1);
  EXPECT_EQ(taken->raw_input_contents(0)[0], 'd');
  const size_t kept_while_held = InferRequestMessages().kept_messages();
  taken.reset();
  EXPECT_EQ(InferRequestMessages().kept_messages(), kept_while_held + 1);
  EXPECT_LE(kept_while_held, kept_before);
  MessageRecycling<ModelInferRequest>::Give(std::move(call_message));
}

}  // namespace
}  // namespace inferd
