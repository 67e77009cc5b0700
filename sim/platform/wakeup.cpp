#include "sim/platform/wakeup.h"

#include <simgrid/s4u/Semaphore.hpp>

namespace kvtier {

// A semaphore rather than a condition variable: a notify that comes while
// the waiter is busy (in an iteration) must not be lost. Several notifies
// before a wait leave as many permits; each only costs the waiter a check.
struct Wakeup::Impl {
  simgrid::s4u::SemaphorePtr sem = simgrid::s4u::Semaphore::create(0);
};

Wakeup::Wakeup() : impl_(std::make_unique<Impl>()) {}
Wakeup::~Wakeup() = default;

void Wakeup::wait() { impl_->sem->acquire(); }
void Wakeup::notify() { impl_->sem->release(); }

}  // namespace kvtier
