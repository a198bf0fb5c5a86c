#include "lifecycle/response_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <tuple>

namespace inferd {
namespace {

Tensor Fp32(const std::string& name, std::vector<float> values) {
  auto owned = std::make_shared<std::vector<float>>(std::move(values));
  Tensor tensor{.name = name, .dtype = DataType::kFp32, .shape = {static_cast<int64_t>(owned->size())}};
  tensor.data = AliasData(owned, owned->data());
  tensor.byte_size = owned->size() * sizeof(float);
  return tensor;
}

InferRequest Request(std::vector<float> x) {
  InferRequest request{.model_name = "m"};
  request.inputs.push_back(Fp32("x", std::move(x)));
  return request;
}

TEST(ResponseCacheTest, KeysDifferByVersionLoadInputBytesShapeNameAndRequestedOutputs) {
  const InferRequest base = Request({1, 2, 3, 4});
  const ResponseCacheKey key = ResponseCache::KeyOf(7, base);
  EXPECT_EQ(key, ResponseCache::KeyOf(7, Request({1, 2, 3, 4})));
  EXPECT_NE(key, ResponseCache::KeyOf(8, base));  // another load of the model
  EXPECT_NE(key, ResponseCache::KeyOf(7, Request({1, 2, 3, 5})));
  InferRequest reshaped = base;
  reshaped.inputs[0].shape = {2, 2};
  EXPECT_NE(key, ResponseCache::KeyOf(7, reshaped));
  InferRequest renamed = base;
  renamed.inputs[0].name = "y";
  EXPECT_NE(key, ResponseCache::KeyOf(7, renamed));
  InferRequest one_output = base;
  one_output.requested_outputs = {"y"};
  EXPECT_NE(key, ResponseCache::KeyOf(7, one_output));
  InferRequest retyped = base;
  retyped.inputs[0].dtype = DataType::kInt32;
  EXPECT_NE(key, ResponseCache::KeyOf(7, retyped));
}

TEST(ResponseCacheTest, AHitReturnsItsOwnCopyOfTheOutputs) {
  ResponseCache cache(1 << 20, nullptr);
  const ResponseCacheKey key = ResponseCache::KeyOf(1, Request({1}));
  EXPECT_FALSE(cache.Lookup(key).has_value());
  // The answer is a slice of a larger (batch) buffer: the cache keeps only its own bytes.
  auto batch = std::make_shared<std::vector<float>>(std::vector<float>(1000, 5.0f));
  Tensor slice{.name = "y", .dtype = DataType::kFp32, .shape = {2}};
  slice.data = AliasData(batch, batch->data() + 10);
  slice.byte_size = 8;
  cache.Insert(key, {slice});
  const long batch_users = batch.use_count();
  EXPECT_EQ(batch_users, 2);  // `slice` and `batch`: the cache holds none of it
  (*batch)[10] = 9;           // the batch buffer is reused for the next batch
  auto hit = cache.Lookup(key);
  ASSERT_TRUE(hit.has_value());
  ASSERT_EQ(hit->size(), 1u);
  EXPECT_EQ((*hit)[0].name, "y");
  EXPECT_EQ((*hit)[0].shape, (Shape{2}));
  EXPECT_EQ((*hit)[0].values<float>()[0], 5.0f);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_GT(cache.bytes(), 8u);
}

TEST(ResponseCacheTest, LeastRecentlyUsedEntriesLeaveFirstWithinTheBudget) {
  // Each entry: 4000 output bytes plus bookkeeping; a shard holds two (8 shards of 10000 bytes).
  ResponseCache cache(80000, nullptr);
  std::vector<ResponseCacheKey> keys;
  std::map<size_t, std::vector<ResponseCacheKey>> by_shard;
  for (int i = 0; i < 200 && by_shard[0].size() < 3; ++i) {
    const ResponseCacheKey key = ResponseCache::KeyOf(1, Request({static_cast<float>(i)}));
    if (key.hash % 8 == 0) by_shard[0].push_back(key);
  }
  ASSERT_EQ(by_shard[0].size(), 3u);
  const auto& [a, b, c] = std::tie(by_shard[0][0], by_shard[0][1], by_shard[0][2]);
  const Tensor output = Fp32("y", std::vector<float>(1000, 1.0f));
  cache.Insert(a, {output});
  cache.Insert(b, {output});
  ASSERT_TRUE(cache.Lookup(a).has_value());  // a is now the more recent
  cache.Insert(c, {output});                 // evicts b, the least recently used
  EXPECT_TRUE(cache.Lookup(a).has_value());
  EXPECT_FALSE(cache.Lookup(b).has_value());
  EXPECT_TRUE(cache.Lookup(c).has_value());
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_LE(cache.bytes(), 80000u);
  // Larger than a shard's part of the budget: not kept at all.
  const ResponseCacheKey big = ResponseCache::KeyOf(1, Request({-1}));
  cache.Insert(big, {Fp32("y", std::vector<float>(3000, 1.0f))});
  EXPECT_FALSE(cache.Lookup(big).has_value());
}

TEST(ResponseCacheTest, ErasingAVersionDropsOnlyItsEntries) {
  ResponseCache cache(1 << 20, nullptr);
  const ResponseCacheKey old_load = ResponseCache::KeyOf(1, Request({1}));
  const ResponseCacheKey new_load = ResponseCache::KeyOf(2, Request({1}));
  cache.Insert(old_load, {Fp32("y", {1})});
  cache.Insert(new_load, {Fp32("y", {2})});
  cache.EraseVersion(1);
  EXPECT_FALSE(cache.Lookup(old_load).has_value());
  ASSERT_TRUE(cache.Lookup(new_load).has_value());
  EXPECT_EQ(cache.Lookup(new_load)->at(0).values<float>()[0], 2.0f);
  EXPECT_EQ(cache.entries(), 1u);
}

TEST(ResponseCacheTest, MetricsCountEvictionsAndSize) {
  MetricsRegistry registry;
  ResponseCache cache(8 * 1000, &registry);
  for (int i = 0; i < 100; ++i) cache.Insert(ResponseCache::KeyOf(1, Request({static_cast<float>(i)})), {Fp32("y", std::vector<float>(100, 0))});
  const std::string text = registry.RenderText();
  EXPECT_NE(text.find("inferd_cache_evictions_total"), std::string::npos);
  EXPECT_NE(text.find("inferd_cache_bytes " + std::to_string(cache.bytes())), std::string::npos) << text;
  EXPECT_GT(cache.evictions(), 0u);
}

}  // namespace
}  // namespace inferd
