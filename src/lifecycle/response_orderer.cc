#include "lifecycle/response_orderer.h"

#include <vector>

namespace inferd {

uint64_t ResponseOrderer::Admit() {
  MutexLock lock(&mu_);
  return next_ticket_++;
}

void ResponseOrderer::Complete(uint64_t ticket, std::function<void()> deliver) {
  MutexLock lock(&mu_);
  ready_.emplace(ticket, std::move(deliver));
  // Whoever is already delivering will pick this one up; deliveries never overlap, so their
  // order is the ticket order.
  if (delivering_) return;
  delivering_ = true;
  while (!ready_.empty() && ready_.begin()->first == next_delivery_) {
    std::function<void()> next = std::move(ready_.begin()->second);
    ready_.erase(ready_.begin());
    ++next_delivery_;
    lock.Unlock();
    if (next) next();
    lock.Lock();
  }
  delivering_ = false;
}

}  // namespace inferd
