// Protobuf messages kept for reuse together with the allocations of their strings.
//
// Why: Clear() keeps a message's repeated strings allocated, and protobuf parses into (and we
// assign to) the cleared ones first. A kept ModelInfer message therefore takes the next 600 KB
// tensor into pages it already has, where a fresh message's string is a fresh allocation that
// glibc maps and the kernel faults in and zeroes page by page (common/string_pool.h is the same
// for HTTP bodies). The mutex is held for a vector push or pop, twice per message.
//
// What stays allocated when idle: the kept messages (max_bytes), and the messages that calls
// offered to gRPC took from the pool (at most max_message_bytes each): a request must be parsed
// into a message that the call holds before the request arrives.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace inferd {

template <typename Message>
class MessagePool {
 public:
  struct Limits {
    size_t min_bytes = 64 << 10;         // a message retaining less is not worth keeping
    size_t max_message_bytes = 1 << 20;  // nor one retaining more (an image fits; a batch of them does not)
    size_t max_bytes = 16 << 20;         // all kept messages together
    size_t max_messages = 16;
  };
  // What a message retains in its strings (their capacities), counted when it is given back.
  using RetainedBytes = std::function<size_t(const Message&)>;

  MessagePool(Limits limits, RetainedBytes retained_bytes)
      : limits_(limits), retained_bytes_(std::move(retained_bytes)) {}
  MessagePool(const MessagePool&) = delete;
  MessagePool& operator=(const MessagePool&) = delete;

  // A cleared message: a kept one where there is one, else a new one.
  std::unique_ptr<Message> Take() {
    {
      std::lock_guard lock(mutex_);
      if (!kept_.empty()) {
        auto [message, bytes] = std::move(kept_.back());
        kept_.pop_back();
        kept_bytes_ -= bytes;
        return std::move(message);
      }
    }
    return std::make_unique<Message>();
  }

  // Clears `message` and keeps it while the limits allow; deletes it otherwise.
  void Give(std::unique_ptr<Message> message) {
    if (message == nullptr) return;
    const size_t bytes = retained_bytes_(*message);
    if (bytes < limits_.min_bytes || bytes > limits_.max_message_bytes) return;
    message->Clear();
    std::lock_guard lock(mutex_);
    if (kept_.size() >= limits_.max_messages || kept_bytes_ + bytes > limits_.max_bytes) return;
    kept_bytes_ += bytes;
    kept_.emplace_back(std::move(message), bytes);
  }

  // `message` shared; it comes back to the pool when the last holder lets go.
  std::shared_ptr<Message> Share(std::unique_ptr<Message> message) {
    return std::shared_ptr<Message>(message.release(), [this](Message* shared) { Give(std::unique_ptr<Message>(shared)); });
  }

  size_t kept_messages() const {
    std::lock_guard lock(mutex_);
    return kept_.size();
  }

 private:
  const Limits limits_;
  const RetainedBytes retained_bytes_;
  mutable std::mutex mutex_;
  std::vector<std::pair<std::unique_ptr<Message>, size_t>> kept_;
  size_t kept_bytes_ = 0;
};

}  // namespace inferd
