// A first-in first-out queue that also gives up an element anywhere in it,
// over a pool of nodes reused through a free list. The KV store keeps each
// tier's drains in one: a claim takes the oldest drain no layer in flight
// reads, which need not be the front. Removal anywhere is O(1) (a deque
// moves every element on one side of it), and once the pool has grown to
// the most elements held at once nothing is allocated per push.
#pragma once

#include <cstdint>
#include <vector>

namespace kvtier {

template <class T>
class PooledFifo {
 public:
  static constexpr uint32_t kEnd = UINT32_MAX;

  bool empty() const { return head_ == kEnd; }
  // Positions, oldest first: front(), next(front()), ... until kEnd.
  uint32_t front() const { return head_; }
  uint32_t next(uint32_t i) const { return nodes_[i].next; }
  const T& at(uint32_t i) const { return nodes_[i].value; }

  void push_back(const T& v) { emplace_back() = v; }
  // A new element at the back, reset to T{}, to be filled in place: the
  // caller writes its fields where they stay instead of building it
  // elsewhere and copying it in (a copy that reads back, as one wide load,
  // fields just written one by one, which the CPU cannot forward from its
  // store buffer and waits for).
  T& emplace_back() {
    uint32_t i = free_;
    if (i != kEnd) {
      free_ = nodes_[i].next;
    } else {
      i = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    Node& n = nodes_[i];
    n.value = T{};
    n.prev = tail_;
    n.next = kEnd;
    if (tail_ != kEnd) nodes_[tail_].next = i;
    else head_ = i;
    tail_ = i;
    return n.value;
  }
  void erase(uint32_t i) {
    Node& n = nodes_[i];
    if (n.prev != kEnd) nodes_[n.prev].next = n.next;
    else head_ = n.next;
    if (n.next != kEnd) nodes_[n.next].prev = n.prev;
    else tail_ = n.prev;
    n.next = free_;
    free_ = i;
  }
  void pop_front() { erase(head_); }

 private:
  struct Node {
    T value{};
    uint32_t prev = kEnd, next = kEnd;
  };
  std::vector<Node> nodes_;
  uint32_t head_ = kEnd, tail_ = kEnd, free_ = kEnd;
};

}  // namespace kvtier
