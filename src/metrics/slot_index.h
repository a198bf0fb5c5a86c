// A hash index from string keys to the slots of a ring that the caller owns and that stores the
// keys: QualityTracker's request ids. Open addressing with linear probing over a table of
// (64-bit hash, slot), at most half full, with backward-shift deletion (no tombstones), so its
// memory is fixed at construction and no operation allocates.
//
// Why not a library map: std::unordered_map allocates a node and copies the key per insertion
// (the largest share of the tracking's per-request cost, docs/BENCHMARKS.md); Boost 1.74 (Debian
// 12) predates unordered_flat_map; absl is only gRPC's transitive dependency. And every map would
// keep a second copy of each key, which the ring holds already.
//
// `key_at(slot)` returns the key stored at a slot, as a std::string_view; a hit compares it, so
// two keys with the same hash stay apart.
#pragma once

#include <bit>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace inferd {

class SlotIndex {
 public:
  // Room for `max_entries` keys (the ring's size).
  explicit SlotIndex(size_t max_entries)
      : cells_(std::bit_ceil(std::max<size_t>(2 * max_entries, 8))), mask_(cells_.size() - 1) {}

  size_t size() const { return size_; }

  template <typename KeyAt>
  std::optional<uint32_t> Find(std::string_view key, const KeyAt& key_at) const {
    const size_t at = Locate(key, Hash(key), key_at);
    if (cells_[at].slot == kEmpty) return std::nullopt;
    return cells_[at].slot;
  }

  // Points `key` at `slot`, in place of the slot it pointed at before, if any.
  template <typename KeyAt>
  void Set(std::string_view key, uint32_t slot, const KeyAt& key_at) {
    const uint64_t hash = Hash(key);
    const size_t at = Locate(key, hash, key_at);
    if (cells_[at].slot == kEmpty) ++size_;
    cells_[at] = Cell{hash, slot};
  }

  // Removes `key` if it points at `slot` (a newer entry with the same key keeps its own).
  template <typename KeyAt>
  void EraseIfAt(std::string_view key, uint32_t slot, const KeyAt& key_at) {
    size_t hole = Locate(key, Hash(key), key_at);
    if (cells_[hole].slot != slot) return;
    --size_;
    // Backward shift: later cells of the run move into the hole unless that would put them before
    // their home cell, so every probe sequence stays unbroken.
    for (size_t next = (hole + 1) & mask_; cells_[next].slot != kEmpty; next = (next + 1) & mask_) {
      const size_t home = cells_[next].hash & mask_;
      if (((next - home) & mask_) >= ((next - hole) & mask_)) {
        cells_[hole] = cells_[next];
        hole = next;
      }
    }
    cells_[hole].slot = kEmpty;
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Cell {
    uint64_t hash = 0;
    uint32_t slot = kEmpty;
  };

  static uint64_t Hash(std::string_view key) { return std::hash<std::string_view>{}(key); }

  // The cell holding `key`, or the empty cell that ends its probe sequence.
  template <typename KeyAt>
  size_t Locate(std::string_view key, uint64_t hash, const KeyAt& key_at) const {
    size_t at = hash & mask_;
    while (cells_[at].slot != kEmpty && (cells_[at].hash != hash || key_at(cells_[at].slot) != key)) {
      at = (at + 1) & mask_;
    }
    return at;
  }

  std::vector<Cell> cells_;
  const size_t mask_;
  size_t size_ = 0;
};

}  // namespace inferd
