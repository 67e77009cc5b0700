// A wake-up call between actors: one actor waits until another has news for
// it (a cluster's router handing a model instance a request). Spurious
// wake-ups are allowed: the waiter checks its own state again after wait().
#pragma once

#include <memory>

namespace kvtier {

class Wakeup {
 public:
  Wakeup();
  ~Wakeup();
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;
  // Blocks the calling actor until notify() has been called since its last
  // wake-up (returns at once if it already was).
  void wait();
  // Wakes the waiter; calls while nobody waits are kept for its next wait().
  void notify();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier
