// SlotIndex: against std::unordered_map as the model, over a ring of keys that wraps many times
// with repeated keys, in tables small enough that probe runs collide and wrap around the table's
// end, so that backward-shift deletion is exercised.
#include "metrics/slot_index.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_map>

namespace inferd {
namespace {

struct Ring {
  std::vector<std::string> keys;
  std::string_view operator()(uint32_t slot) const { return keys[slot]; }
};

TEST(SlotIndexTest, FindsWhatWasSetAndForgetsWhatWasErased) {
  Ring ring{std::vector<std::string>(4)};
  SlotIndex index(4);
  ring.keys[0] = "a";
  index.Set("a", 0, ring);
  ring.keys[1] = "b";
  index.Set("b", 1, ring);
  EXPECT_EQ(index.Find("a", ring), 0u);
  EXPECT_EQ(index.Find("b", ring), 1u);
  EXPECT_EQ(index.Find("c", ring), std::nullopt);
  index.EraseIfAt("a", 0, ring);
  EXPECT_EQ(index.Find("a", ring), std::nullopt);
  EXPECT_EQ(index.Find("b", ring), 1u);
  EXPECT_EQ(index.size(), 1u);
}

TEST(SlotIndexTest, AKeySetAgainPointsAtItsNewSlotAndOutlivesItsOldOne) {
  Ring ring{std::vector<std::string>(4)};
  SlotIndex index(4);
  ring.keys[0] = "a";
  index.Set("a", 0, ring);
  ring.keys[1] = "a";
  index.Set("a", 1, ring);
  EXPECT_EQ(index.size(), 1u);
  EXPECT_EQ(index.Find("a", ring), 1u);
  index.EraseIfAt("a", 0, ring);  // the old entry leaves the ring: the newer one stays
  EXPECT_EQ(index.Find("a", ring), 1u);
  index.EraseIfAt("a", 1, ring);
  EXPECT_EQ(index.Find("a", ring), std::nullopt);
  EXPECT_EQ(index.size(), 0u);
}

// The ring's use: each new key takes the oldest slot, whose key leaves the index first.
void CheckAgainstAMap(size_t ring_size, size_t distinct_keys, uint32_t seed) {
  std::mt19937 random(seed);
  Ring ring{std::vector<std::string>(ring_size)};
  SlotIndex index(ring_size);
  std::unordered_map<std::string, uint32_t> model;
  for (size_t step = 0; step < 20 * ring_size; ++step) {
    const auto slot = static_cast<uint32_t>(step % ring_size);
    if (!ring.keys[slot].empty()) {
      index.EraseIfAt(ring.keys[slot], slot, ring);
      if (auto it = model.find(ring.keys[slot]); it != model.end() && it->second == slot) model.erase(it);
    }
    const std::string key = "id-" + std::to_string(random() % distinct_keys);
    ring.keys[slot] = key;
    index.Set(key, slot, ring);
    model[key] = slot;
    ASSERT_EQ(index.size(), model.size()) << "step " << step;
    for (size_t k = 0; k < distinct_keys; ++k) {
      const std::string probe = "id-" + std::to_string(k);
      auto it = model.find(probe);
      ASSERT_EQ(index.Find(probe, ring), it == model.end() ? std::nullopt : std::optional<uint32_t>(it->second))
          << "step " << step << " key " << probe;
    }
  }
}

TEST(SlotIndexTest, MatchesAMapOverAWrappingRingWithRepeatedKeys) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    CheckAgainstAMap(5, 12, seed);    // 16 cells: long runs that wrap around the table's end
    CheckAgainstAMap(64, 100, seed);
    CheckAgainstAMap(64, 1000, seed);  // keys mostly unique
  }
}

}  // namespace
}  // namespace inferd
