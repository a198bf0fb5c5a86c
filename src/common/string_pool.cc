#include "common/string_pool.h"

#include <algorithm>
#include <utility>

namespace inferd {

StringPool::StringPool(Limits limits) : limits_(limits) {}

std::string StringPool::Take(size_t bytes) {
  std::string taken;
  if (bytes >= limits_.min_bytes) {
    std::lock_guard lock(mutex_);
    // The smallest kept string that fits, so that a small body does not hold a batch-sized one.
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (it->capacity() >= bytes && it->capacity() <= 2 * bytes &&
          (best == kept_.end() || it->capacity() < best->capacity())) {
        best = it;
      }
    }
    if (best != kept_.end()) {
      kept_bytes_ -= best->capacity();
      taken = std::move(*best);
      *best = std::move(kept_.back());
      kept_.pop_back();
    }
  }
  taken.reserve(bytes);
  return taken;
}

void StringPool::Give(std::string&& s) {
  const size_t capacity = s.capacity();
  if (capacity < limits_.min_bytes) return;
  s.clear();  // keeps the allocation
  std::lock_guard lock(mutex_);
  if (kept_.size() >= limits_.max_strings || kept_bytes_ + capacity > limits_.max_bytes) return;
  kept_bytes_ += capacity;
  kept_.push_back(std::move(s));
}

std::shared_ptr<const std::string> StringPool::Share(std::string&& s) {
  if (s.capacity() < limits_.min_bytes) return std::make_shared<const std::string>(std::move(s));
  return std::shared_ptr<const std::string>(new std::string(std::move(s)), [this](const std::string* shared) {
    Give(std::move(*const_cast<std::string*>(shared)));
    delete shared;
  });
}

size_t StringPool::kept_strings() const {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

size_t StringPool::kept_bytes() const {
  std::lock_guard lock(mutex_);
  return kept_bytes_;
}

StringPool& BodyStringPool() {
  static StringPool* const pool = new StringPool(StringPool::Limits{});
  return *pool;
}

}  // namespace inferd
