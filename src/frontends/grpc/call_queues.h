// The gRPC frontend's calls run on completion queues with polling threads of our own, not on
// gRPC's callback API.
//
// Why: gRPC 1.51 (Debian 12) has no background poller for the callback API, so a callback call
// finished from a thread of ours (the model's instance thread) completes through gRPC's executor
// thread and then one of its callback threads: two more wake-ups per call. On a completion queue
// the finished call's event goes to our poller. Both must go: while any RPC is a callback, gRPC's
// callback threads also poll the connections and hand what they read over to our queue.
// Measured (1x16 FP32, h2load, concurrency 16): 49-56 us of server CPU and 1.3 context switches
// per call on callbacks against 37-39 us and 0.6 on a completion queue (docs/BENCHMARKS.md).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace inferd {

// Something waiting for one event on a completion queue; the poller calls Proceed(ok) with it.
class CallEvent {
 public:
  virtual ~CallEvent() = default;
  virtual void Proceed(bool ok) = 0;
};

class CallQueues {
 public:
  // Adds `count` queues to `builder`; call before builder.BuildAndStart().
  CallQueues(grpc::ServerBuilder& builder, int count);
  ~CallQueues();
  CallQueues(const CallQueues&) = delete;
  CallQueues& operator=(const CallQueues&) = delete;

  size_t size() const { return queues_.size(); }

  // Runs `request_call` (a gRPC Request... method that offers one call object to queue `index`)
  // unless the queue is already shut down.
  void Offer(size_t index, const std::function<void(grpc::ServerCompletionQueue*)>& request_call);

  // One polling thread per queue.
  void Start();
  // After grpc::Server::Shutdown and Wait: waits (bounded) for the calls still running, then shuts
  // the queues down and joins the pollers once they have drained them.
  void Stop();

  // A call counts from its arrival to its last event; Stop waits for the count to reach zero.
  void CallStarted() { live_calls_.fetch_add(1); }
  void CallEnded() { live_calls_.fetch_sub(1); }

 private:
  struct Queue {
    std::unique_ptr<grpc::ServerCompletionQueue> completion_queue;
    std::mutex mu;     // orders Offer against the queue's shutdown
    bool open = true;  // guarded by mu
    std::thread poller;
  };

  static void Poll(grpc::ServerCompletionQueue* queue);

  std::vector<std::unique_ptr<Queue>> queues_;
  std::atomic<int64_t> live_calls_{0};
  bool started_ = false;
};

// Where a unary call gets its request and response messages, and where they go when it ends: new
// and delete, unless a message type specializes this (grpc_call_util.h keeps ModelInfer's in a
// pool, so that their large strings keep their allocations).
template <typename Message>
struct MessageRecycling {
  static std::unique_ptr<Message> Take() { return std::make_unique<Message>(); }
  static void Give(std::unique_ptr<Message>) {}
};

// How a unary RPC is answered: fill `response` and call `finish` exactly once, now or later from any
// thread. `request` is the handler's to change (ModelInfer moves its tensors out).
template <typename Request, typename Response>
using UnaryHandler = std::function<void(grpc::ServerContext& context, Request& request, Response* response,
                                        std::function<void(const grpc::Status&)> finish)>;

// One unary RPC method served on every queue: the method, its handler, and call objects kept offered
// on each queue (each arrival offers its successor). A call that finds none offered waits inside
// gRPC until the poller offers the next.
class UnaryRoute {
 public:
  virtual ~UnaryRoute() = default;
  virtual void OfferAll() = 0;
};

template <typename AsyncService, typename Request, typename Response>
class UnaryRouteFor final : public UnaryRoute {
 public:
  using RequestMethod = void (AsyncService::*)(grpc::ServerContext*, Request*,
                                               grpc::ServerAsyncResponseWriter<Response>*,
                                               grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*);

  UnaryRouteFor(CallQueues* queues, AsyncService* service, RequestMethod request_method,
                UnaryHandler<Request, Response> handler, int offered_per_queue = 1)
      : queues_(queues),
        service_(service),
        request_method_(request_method),
        handler_(std::move(handler)),
        offered_per_queue_(offered_per_queue) {}

  void OfferAll() override {
    for (size_t i = 0; i < queues_->size(); ++i) {
      for (int n = 0; n < offered_per_queue_; ++n) Offer(i);
    }
  }

 private:
  class Call final : public CallEvent {
   public:
    Call(UnaryRouteFor* route, size_t queue_index) : route_(route), queue_index_(queue_index) {}
    ~Call() {
      MessageRecycling<Request>::Give(std::move(request_));
      MessageRecycling<Response>::Give(std::move(response_));
    }

    void Proceed(bool ok) override {
      if (answered_) {  // the answer is out (or the client is gone)
        route_->queues_->CallEnded();
        delete this;
        return;
      }
      if (!ok) {  // an offered call the server no longer needs: it is shutting down
        delete this;
        return;
      }
      route_->Offer(queue_index_);
      answered_ = true;
      route_->queues_->CallStarted();
      response_ = MessageRecycling<Response>::Take();  // now, so that offered calls hold none
      route_->handler_(context_, *request_, response_.get(), [this](const grpc::Status& status) {
        if (status.ok()) {
          responder_.Finish(*response_, status, this);
        } else {
          responder_.FinishWithError(status, this);
        }
      });
    }

    grpc::ServerContext context_;
    std::unique_ptr<Request> request_ = MessageRecycling<Request>::Take();
    std::unique_ptr<Response> response_;
    grpc::ServerAsyncResponseWriter<Response> responder_{&context_};

   private:
    UnaryRouteFor* const route_;
    const size_t queue_index_;
    bool answered_ = false;  // read and written only by the queue's poller
  };

  void Offer(size_t queue_index) {
    queues_->Offer(queue_index, [&](grpc::ServerCompletionQueue* queue) {
      auto* call = new Call(this, queue_index);
      (service_->*request_method_)(&call->context_, call->request_.get(), &call->responder_, queue, queue, call);
    });
  }

  CallQueues* const queues_;
  AsyncService* const service_;
  const RequestMethod request_method_;
  const UnaryHandler<Request, Response> handler_;
  const int offered_per_queue_;
};

}  // namespace inferd
