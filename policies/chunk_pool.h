// The chunked block table's free chunks, and where a group's next chunk
// comes from. Which chunk a group gets changes no result (policies see
// blocks through the table's accessors, by group and index), only where its
// state lies in memory, and once the table outgrows the caches that is a
// large part of what a block access costs (docs/performance.md: where a
// request's chunks lie). Attention reads a group's blocks in index
// order and the eviction policy sends them down in the order they were
// read, so every pass over them walks memory forward as long as the group's
// chunks lie one after another; a jump to another chunk costs misses in
// every array the pass touches.
//
// So a group is given a range of consecutive free chunks sized for what it
// is expected to grow to (expect: a serving request's prompt and output),
// the smallest free range that holds it, lowest first among equals (best
// fit keeps large ranges for large groups). The chunks of the range the
// group has not reached yet stay set aside for it, and are taken from it
// only where no free chunk is left, so a pool that is large enough for
// what is live never runs out because of them.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace kvtier {

class ChunkPool {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // Chunks 0 .. n-1 free, for `groups` groups; nothing set aside.
  void reset(uint32_t n, uint32_t groups) {
    by_start_.clear();
    by_size_.clear();
    if (n > 0) insert(0, n);
    next_.assign(groups, 0);
    end_.assign(groups, 0);
    holders_.clear();
    free_ = n;
  }
  // Chunks free or set aside (what take can still hand out).
  uint64_t available() const { return free_; }

  // A chunk for group g, which expects to need `want` more chunks (this
  // one included; at least one): the next one of its range, else the first
  // of a new range, else one set aside for another group. kNone if none is
  // left.
  uint32_t take(uint32_t g, uint32_t want) {
    if (next_[g] < end_[g]) return handed(next_[g]++);
    if (!by_size_.empty()) {
      if (want == 0) want = 1;
      auto it = by_size_.lower_bound({want, 0});
      if (it == by_size_.end()) it = by_size_.lower_bound({by_size_.rbegin()->first, 0});  // the largest, lowest first
      const uint32_t start = it->second, len = it->first;
      const uint32_t got = len < want ? len : want;
      erase(start, len);
      if (got < len) insert(start + got, len - got);
      next_[g] = start + 1;
      end_[g] = start + got;
      if (got > 1) hold(g);
      return handed(start);
    }
    // Nothing free: the last chunk another group set aside and has not
    // reached (the group that set aside most recently first).
    while (!holders_.empty()) {
      const uint32_t h = holders_.back();
      if (next_[h] < end_[h]) return handed(--end_[h]);
      holders_.pop_back();
    }
    return kNone;
  }

  // Group g is given back: its chunks (`chunks`, in any order) and what it
  // set aside and did not reach are free again.
  void give_back(uint32_t g, const uint32_t* chunks, uint32_t n) {
    uint32_t i = 0;
    while (i < n) {
      // Consecutive chunks go back as one range.
      uint32_t j = i + 1;
      while (j < n && chunks[j] == chunks[j - 1] + 1) ++j;
      release(chunks[i], j - i);
      i = j;
    }
    if (next_[g] < end_[g]) {
      const uint32_t s = next_[g], len = end_[g] - next_[g];
      free_ -= len;  // counted again by release
      release(s, len);
    }
    next_[g] = end_[g] = 0;
  }

 private:
  // g set chunks aside. The list keeps groups whose ranges were used up or
  // given back until a steal passes them; it is swept when it outgrows the
  // groups, so it stays bounded however many groups come and go.
  void hold(uint32_t g) {
    if (holders_.size() >= 2 * next_.size() + 16) {
      std::vector<uint8_t> seen(next_.size(), 0);
      size_t k = 0;
      for (uint32_t h : holders_)
        if (next_[h] < end_[h] && !seen[h]) {
          seen[h] = 1;
          holders_[k++] = h;
        }
      holders_.resize(k);
    }
    holders_.push_back(g);
  }
  uint32_t handed(uint32_t c) {
    --free_;
    return c;
  }
  void release(uint32_t start, uint32_t len) {
    free_ += len;
    // Joined with the free ranges on either side.
    auto after = by_start_.lower_bound(start);
    if (after != by_start_.end() && after->first == start + len) {
      len += after->second;
      const uint32_t s = after->first, l = after->second;
      erase(s, l);
    }
    auto before = by_start_.lower_bound(start);
    if (before != by_start_.begin()) {
      --before;
      if (before->first + before->second == start) {
        const uint32_t s = before->first, l = before->second;
        erase(s, l);
        start = s;
        len += l;
      }
    }
    insert(start, len);
  }
  void insert(uint32_t start, uint32_t len) {
    by_start_.emplace(start, len);
    by_size_.emplace(len, start);
  }
  void erase(uint32_t start, uint32_t len) {
    by_start_.erase(start);
    by_size_.erase({len, start});
  }

  std::map<uint32_t, uint32_t> by_start_;           // free ranges: first chunk -> length
  std::set<std::pair<uint32_t, uint32_t>> by_size_;  // the same ranges as (length, first chunk)
  std::vector<uint32_t> next_, end_;                 // per group: its range's chunks not reached yet
  std::vector<uint32_t> holders_;                    // groups that set chunks aside, latest last
  uint64_t free_ = 0;
};

}  // namespace kvtier
