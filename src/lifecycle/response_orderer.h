// dynamic_batching.preserve_ordering: answers leave in the order their requests were accepted,
// even when several instances finish batches out of order. Only models that ask for it pay for it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "common/mutex.h"

namespace inferd {

class ResponseOrderer {
 public:
  // A ticket in acceptance order.
  uint64_t Admit();
  // `deliver` runs once every earlier ticket has been delivered or withdrawn (maybe right now,
  // maybe later on the thread that completes the last earlier ticket).
  void Complete(uint64_t ticket, std::function<void()> deliver);
  // The request behind `ticket` will never complete (refused before queueing).
  void Withdraw(uint64_t ticket) { Complete(ticket, nullptr); }

 private:
  Mutex mu_;
  uint64_t next_ticket_ GUARDED_BY(mu_) = 0;
  uint64_t next_delivery_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, std::function<void()>> ready_ GUARDED_BY(mu_);  // completed, waiting their turn
  bool delivering_ GUARDED_BY(mu_) = false;                          // one thread delivers at a time
};

}  // namespace inferd
