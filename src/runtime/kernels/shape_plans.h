// What a kernel prepares per input shape (a plan, a oneDNN primitive and its JIT code), with the
// session's shape sets that used each entry. A session keeps a bounded number of input shape sets
// prepared (SessionOptions::max_shape_sets); when it forgets one, each kernel's
// Kernel::ForgetShapeSet drops the entries that no remembered shape set uses, so memory follows
// the shape sets kept, not every shape the session has ever seen.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "runtime/run_context.h"

namespace inferd::runtime {

template <typename Key, typename Value>
class ShapePlans {
 public:
  // The entry for `key`, or nullptr. A hit counts as a use by the running shape set.
  Value* Find(const Key& key) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    MarkUsed(&it->second);
    return &it->second.value;
  }

  // Adds the entry for `key` (used by the running shape set) and returns it.
  Value& Add(Key key, Value value) {
    auto it = entries_.insert_or_assign(std::move(key), Entry{std::move(value), {}}).first;
    MarkUsed(&it->second);
    return it->second.value;
  }

  // The shape set is gone: entries that only it used go too. Entries made outside a session run
  // (no shape set) have no users and stay.
  void Forget(ShapeSetId shape_set) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto& users = it->second.users;
      auto user = std::find(users.begin(), users.end(), shape_set);
      if (user == users.end()) {
        ++it;
        continue;
      }
      users.erase(user);
      it = users.empty() ? entries_.erase(it) : std::next(it);
    }
  }

  template <typename Fn>
  void ForEach(Fn fn) {
    for (auto& [key, entry] : entries_) fn(entry.value);
  }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Value value;
    std::vector<ShapeSetId> users;  // few: the shape sets a session keeps
  };

  static void MarkUsed(Entry* entry) {
    const ShapeSetId current = CurrentRunContext().shape_set;
    if (current == kNoShapeSet) return;
    auto& users = entry->users;
    // A run uses an entry once per node that asks: the last user is nearly always this one.
    if (!users.empty() && users.back() == current) return;
    if (std::find(users.begin(), users.end(), current) == users.end()) users.push_back(current);
  }

  std::map<Key, Entry> entries_;
};

}  // namespace inferd::runtime
