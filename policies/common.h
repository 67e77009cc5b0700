// Small helpers shared by several policies: block groups, budgets, top-k
// selection with sinks and a recent window. Header-only, allocation-free on
// the hot path (callers pass scratch buffers sized in setup()).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "models/param.h"
#include "policies/block_table.h"

namespace kvtier {

// A group is one (seq, layer): its blocks are index 0 .. blocks_per_seq_layer-1,
// block i being t.block_at(g, i) (not contiguous in the table where it is chunked).
inline uint32_t group_of(const BlockTable& t, BlockId b) { return t.group_of(b); }
inline uint32_t n_groups(const BlockTable& t) { return t.batch * t.layers; }

// Blocks of (seq, layer) created so far. Blocks are created in index order
// and a created block never goes back to kNotCreated (dropped ones are
// kDropped), so "created" is a prefix: binary search, O(log blocks).
inline uint32_t created_blocks(const BlockTable& t, uint32_t seq, uint32_t layer) {
  const uint32_t g = seq * t.layers + layer;
  uint32_t lo = 0, hi = t.blocks_per_seq_layer;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (t.tier(t.block_at(g, mid)) != kNotCreated) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// A block budget per (seq, layer): a fraction of the blocks that exist, or
// a fixed count.
struct Budget {
  double value = 0.2;
  bool fraction = true;
  static ParamList params(double def, const std::string& what) {
    return {positive("budget", def, what + ": a fraction of the blocks that exist (budget_unit fraction) or a block count (budget_unit blocks)"),
            str("budget_unit", "fraction", "unit of budget: fraction of the (seq, layer)'s blocks, or blocks", {"fraction", "blocks"})};
  }
  static Budget from(const json& p) {
    Budget b;
    b.value = get_num(p, "budget");
    b.fraction = p.at("budget_unit").get<std::string>() == "fraction";
    if (b.fraction && b.value > 1.0) throw ConfigError("budget: a fraction must be in (0, 1], got " + std::to_string(b.value));
    return b;
  }
  // Blocks kept out of n (at least 1 when n > 0, at most n).
  uint32_t blocks(uint32_t n) const {
    if (n == 0) return 0;
    double k = fraction ? std::ceil(value * double(n) - 1e-9) : std::floor(value);
    if (k < 1) k = 1;
    return k >= double(n) ? n : uint32_t(k);
  }
};

// Importance estimate of a block from its history in the table: a mix of the
// attention mass at its last use and its mean mass per use. 0 if never used.
inline float history_score(const BlockTable& t, BlockId b, float last_weight) {
  uint32_t c = t.access_count(b);
  if (c == 0) return 0.f;
  return last_weight * t.last_mass[b] + (1.f - last_weight) * (t.mass[b] / float(c));
}

// Appends to `out`, in ascending order, the indices 0..n-1 to load: the first
// `sinks`, the last `recent`, and the highest-`score` others until k in all
// (sinks and the window count towards k but are kept even past it).
// `score[i]` is the score of index i; `scratch` must have size >= n.
// Ties go to the newer (higher) index. O(n) + O(k log k).
inline void select_top_k(const float* score, uint32_t n, uint32_t k, uint32_t sinks, uint32_t recent,
                         std::vector<uint32_t>& scratch, std::vector<uint32_t>& out) {
  if (n == 0) return;
  uint32_t s_end = std::min(sinks, n);
  uint32_t r_begin = recent >= n ? 0 : n - recent;
  if (r_begin < s_end) r_begin = s_end;
  for (uint32_t i = 0; i < s_end; ++i) out.push_back(i);
  uint32_t fixed = s_end + (n - r_begin);
  uint32_t want = k > fixed ? k - fixed : 0;
  uint32_t m = 0;
  for (uint32_t i = s_end; i < r_begin; ++i) scratch[m++] = i;
  if (want > m) want = m;
  if (want > 0) {
    auto better = [score](uint32_t a, uint32_t b) { return score[a] > score[b] || (score[a] == score[b] && a > b); };
    if (want < m) std::nth_element(scratch.begin(), scratch.begin() + want, scratch.begin() + m, better);
    std::sort(scratch.begin(), scratch.begin() + want);
    for (uint32_t j = 0; j < want; ++j) out.push_back(scratch[j]);
  }
  for (uint32_t i = r_begin; i < n; ++i) out.push_back(i);
}

// Per (tier, group) block counts, live blocks per group and blocks created
// per group, kept current from an eviction policy's on_insert/on_remove.
// "Created" is the highest index seen + 1: blocks are created in order.
// The group with the most blocks in a tier is kept by a max tree per tier
// (a leaf per group, each node the larger of its children): an insert or a
// removal updates one path, O(log groups), and the question is a walk down
// that path, not a scan of every group at every victim.
struct GroupCounts {
  uint32_t groups = 0, tiers = 0;
  std::vector<uint32_t> in_tier;  // [t * groups + g]
  std::vector<uint32_t> live;     // blocks of g in any tier
  std::vector<uint32_t> created;  // highest index seen + 1
  void setup(const BlockTable& t) {
    groups = n_groups(t);
    tiers = uint32_t(t.tiers.size());
    in_tier.assign(size_t(groups) * tiers, 0);
    live.assign(groups, 0);
    created.assign(groups, 0);
    leaves_ = 1;
    while (leaves_ < groups) leaves_ <<= 1;
    tree_.assign(size_t(tiers) * 2 * leaves_, 0);
  }
  void insert(const BlockTable& t, BlockId b, TierId tier) {
    uint32_t g = group_of(t, b);
    set(tier, g, ++in_tier[size_t(tier) * groups + g]);
    ++live[g];
    uint32_t i = t.index_of(b) + 1;
    if (i > created[g]) created[g] = i;
  }
  void remove(const BlockTable& t, BlockId b, TierId tier) {
    uint32_t g = group_of(t, b);
    uint32_t& c = in_tier[size_t(tier) * groups + g];
    if (c) set(tier, g, --c);
    if (live[g]) --live[g];
  }
  // b's sequence is gone (every block of its group has been removed): the
  // group's next blocks are a new sequence's, created from index 0.
  void release(const BlockTable& t, BlockId b) { created[group_of(t, b)] = 0; }
  // The group with the most blocks in tier t, the lowest-numbered of those
  // with as many (kNoBlock if the tier is empty).
  uint32_t largest(TierId tier) const {
    const uint32_t* n = tree_.data() + size_t(tier) * 2 * leaves_;
    if (n[1] == 0) return kNoBlock;
    uint32_t x = 1;
    while (x < leaves_) x = n[2 * x] == n[x] ? 2 * x : 2 * x + 1;
    return x - leaves_;
  }

 private:
  void set(TierId tier, uint32_t g, uint32_t count) {
    uint32_t* n = tree_.data() + size_t(tier) * 2 * leaves_;
    uint32_t x = leaves_ + g;
    n[x] = count;
    for (x >>= 1; x >= 1; x >>= 1) {
      const uint32_t m = std::max(n[2 * x], n[2 * x + 1]);
      if (n[x] == m) break;  // the rest of the path already holds it
      n[x] = m;
    }
  }
  uint32_t leaves_ = 1;
  std::vector<uint32_t> tree_;  // per tier, 2 x leaves_: node 1 the root, leaf leaves_ + g
};

// Deterministic hash -> uniform (0, 1), for seeded noise that needs no state
// (splitmix64).
inline double hash_unit(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return (double(x >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Per-tier recency order as intrusive doubly linked lists over a flat array:
// a node per block (a block lives in one tier; a node's two links share a
// cache line) and, after the blocks' nodes, one sentinel per tier through
// which that tier's list is a circle. A link and an unlink are then the same
// few stores wherever the block is, with no case for either end of a list;
// the least recent block is O(1) and nothing is allocated. Front = most
// recent; prev and tail answer kNoBlock past the list's end.
class RecencyLists {
 public:
  using Links = ListLinks;
  void setup(size_t blocks, size_t tiers) {
    blocks_ = static_cast<BlockId>(blocks);
    links_.assign(blocks + tiers, Links{});
    for (size_t t = 0; t < tiers; ++t) {
      const BlockId s = sentinel(static_cast<TierId>(t));
      links_[s] = Links{s, s};
    }
  }
  void push_front(BlockId b, TierId t) {
    const BlockId s = sentinel(t);
    Links& head = links_[s];
    Links& l = links_[b];
    l.prev = s;
    l.next = head.next;
    links_[head.next].prev = b;
    head.next = b;
  }
  // A block in no list (never linked, or unlinked) is left as it is.
  void unlink(BlockId b) {
    Links& l = links_[b];
    if (l.prev == kNoBlock) return;
    links_[l.prev].next = l.next;
    links_[l.next].prev = l.prev;
    l.prev = l.next = kNoBlock;
  }
  // What push_front of first, first+1, ..., first+n-1 in turn (each
  // unlinked first) leaves. Where they already lie together in t's list,
  // each behind the one after it (as a run pushed that way lies), the run
  // is cut out and put at the front as it is: a check of n links and a few
  // stores, not n unlinks and pushes.
  void push_front_run(BlockId first, uint32_t n, TierId t) {
    const BlockId newest = first + n - 1;
    bool together = n > 1 && links_[newest].prev != kNoBlock;
    for (uint32_t i = 0; together && i + 1 < n; ++i) together = links_[first + i].prev == first + i + 1;
    if (!together) {
      for (uint32_t i = 0; i < n; ++i) {
        unlink(first + i);
        push_front(first + i, t);
      }
      return;
    }
    const BlockId s = sentinel(t);
    if (links_[s].next == newest) return;  // already at the front, in this order
    const BlockId before = links_[newest].prev, after = links_[first].next;
    links_[before].next = after;
    links_[after].prev = before;
    const BlockId head = links_[s].next;
    links_[newest].prev = s;
    links_[first].next = head;
    links_[head].prev = first;
    links_[s].next = newest;
  }
  BlockId prev(BlockId b) const { return block_or_none(links_[b].prev); }
  // prev(b), where it is most often b + 1 (a run pushed at once lies
  // that way): b + 1 is taken from b, not from the link, once the link
  // agrees, so a walk of such a run is not a chain of dependent loads
  // (the CPU goes on to b + 1 before the link has arrived). The empty asm
  // keeps the compiler from using the loaded link as the equal value.
  BlockId prev_guessing(BlockId b) const {
    const BlockId p = links_[b].prev;
    BlockId guess = b + 1;
    asm("" : "+r"(guess));
    if (__builtin_expect(p == guess, 1)) return guess < blocks_ ? guess : kNoBlock;
    return block_or_none(p);
  }
  BlockId tail(TierId t) const { return block_or_none(links_[sentinel(t)].prev); }

 private:
  BlockId sentinel(TierId t) const { return blocks_ + t; }
  // A sentinel (or an unlinked node's kNoBlock) is no block.
  BlockId block_or_none(BlockId b) const { return b < blocks_ ? b : kNoBlock; }
  std::vector<Links> links_;
  BlockId blocks_ = 0;
};

}  // namespace kvtier
