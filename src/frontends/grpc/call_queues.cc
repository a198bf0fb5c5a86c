#include "frontends/grpc/call_queues.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace inferd {
namespace {

// How long Stop waits for calls whose answers exist (InferenceServer::Shutdown produced them) to be
// written, or for streams the server's shutdown cancelled to wind down.
constexpr auto kLiveCallBound = std::chrono::seconds(10);

}  // namespace

CallQueues::CallQueues(grpc::ServerBuilder& builder, int count) {
  for (int i = 0; i < std::max(1, count); ++i) {
    auto queue = std::make_unique<Queue>();
    queue->completion_queue = builder.AddCompletionQueue();
    queues_.push_back(std::move(queue));
  }
}

CallQueues::~CallQueues() { Stop(); }

void CallQueues::Offer(size_t index, const std::function<void(grpc::ServerCompletionQueue*)>& request_call) {
  Queue& queue = *queues_[index];
  std::lock_guard lock(queue.mu);
  if (queue.open) request_call(queue.completion_queue.get());
}

void CallQueues::Start() {
  started_ = true;
  for (auto& queue : queues_) {
    queue->poller =
        std::thread([completion_queue = queue->completion_queue.get()] { Poll(completion_queue); });
  }
}

void CallQueues::Poll(grpc::ServerCompletionQueue* queue) {
  void* tag = nullptr;
  bool ok = false;
  while (queue->Next(&tag, &ok)) static_cast<CallEvent*>(tag)->Proceed(ok);
}

void CallQueues::Stop() {
  if (!started_) return;
  started_ = false;
  const auto deadline = std::chrono::steady_clock::now() + kLiveCallBound;
  while (live_calls_.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (live_calls_.load() > 0) spdlog::warn("{} gRPC call(s) still open at shutdown", live_calls_.load());
  for (auto& queue : queues_) {
    std::lock_guard lock(queue->mu);
    queue->open = false;
    queue->completion_queue->Shutdown();
  }
  for (auto& queue : queues_) queue->poller.join();  // each drains its queue first
}

}  // namespace inferd
