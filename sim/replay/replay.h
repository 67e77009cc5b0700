// Replay: the block references of a request stream through a hierarchy of
// cache tiers, without timing. Each tier has a capacity in blocks and its own
// eviction policy object from the registry (the same implementations the
// timed engine uses), driven through EvictionPolicy over a BlockTable that
// the replay keeps current (one sequence, one layer; block index = dense
// block id; clock = reference count). Exact against libCacheSim for the
// policies both have (docs/replay.md).
//
//  - exclusive tiers (default): a block lives in one tier; a victim moves one
//    tier down (dropped from the last, or at once if the policy drops()).
//  - inclusive tiers: a block in tier t is also in every tier below; a miss
//    inserts it into all tiers, a victim of a tier above the last just
//    leaves it (its copy stays below), a victim of the last tier leaves
//    every tier.
//  - admission: "always", or "second": a block enters the cache only on a
//    reference after its first one.
//  - promotion on hit: a hit below the top tier moves the block (exclusive)
//    or copies it (inclusive) into every tier above; off: it stays.
//  - semantics: "block" counts every reference on its own (as cache
//    simulators do); "prefix" counts a request's blocks as hits only up to
//    its first miss, as vLLM's prefix cache serves them. The cache state
//    evolves the same way in both: every block of a request is used (and
//    inserted where missing), since its KV is computed and cached.
//  - warm-up: the first warmup_requests requests (of the stream played
//    back to back) fill the cache but are not counted, as cache simulators
//    start measuring from a warm cache.
//  - bytes: every block holds block_tokens tokens except, where a request's
//    prompt does not fill its last block, that last one; hits and references
//    are also counted in tokens, for byte hit and miss ratios.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/param.h"
#include "traces/request_trace.h"

namespace kvtier {

enum class ReplaySemantics { Block, Prefix };
enum class ReplayAdmission { Always, Second };

struct ReplayTierSpec {
  std::string name;
  uint64_t capacity_blocks = 0;
  json policy;  // {"name": ..., parameters}; resolved in place by replay()
  // Where the policy came from, as error messages name it (a JSON path or
  // an option); empty: replay.tiers[i].policy.
  std::string where;
};

struct ReplayConfig {
  std::vector<ReplayTierSpec> tiers;  // top (fastest) first, at most 8
  bool inclusive = false;
  bool promote = true;
  ReplayAdmission admission = ReplayAdmission::Always;
  ReplaySemantics semantics = ReplaySemantics::Block;
  uint32_t block_tokens = 0;
  uint64_t block_bytes = 0;
  uint32_t repeat = 1;  // the stream played back to back this many times
  uint64_t warmup_requests = 0;  // requests replayed before counting starts
};

// Tokens in each request's last block (request r: tail_tokens[r], 1 ..
// block_tokens); an empty vector: every block is full.
using TailTokens = std::vector<uint32_t>;

struct ReplayTierResult {
  std::string name;
  json policy;
  uint64_t capacity_blocks = 0;
  uint64_t hits = 0;
  uint64_t hit_tokens = 0;  // tokens of the blocks it served
  // Insertions that skipped the tier because its policy named no victim
  // (only policies that keep blocks for engine-side reasons do).
  uint64_t bypassed = 0;
};

struct ReplayResult {
  // Counted after the warm-up: references, requests, misses, and the
  // tokens the references name (block_tokens each, less the last blocks'
  // room).
  uint64_t references = 0, requests = 0, misses = 0, tokens = 0;
  std::vector<ReplayTierResult> tiers;
  uint64_t hit_tokens() const {
    uint64_t h = 0;
    for (const auto& t : tiers) h += t.hit_tokens;
    return h;
  }
  uint64_t hits() const {
    uint64_t h = 0;
    for (const auto& t : tiers) h += t.hits;
    return h;
  }
};

// Replays `s` through the hierarchy of `c`. `next` (from next_references(s,
// c.repeat)) is required when a policy needs next-reference times (Belady)
// and ignored otherwise; `tails` (one per request of s, or null) sizes the
// last blocks. Throws ConfigError for an invalid configuration.
ReplayResult replay(const BlockStream& s, ReplayConfig& c, const NextReferences* next,
                    const TailTokens* tails = nullptr);

// Replay fed one request at a time, for streams read from disk twice (once
// to number the blocks, once to replay): memory is bounded by the number of
// distinct blocks, not by the stream's length. Policies that need the future
// (Belady) cannot run this way.
class ReplayHierarchy;

// Told of every block a tier takes in and lets go of, in the order the
// hierarchy does it (a victim leaves its tier before it enters the one
// below, and before the block that displaced it enters): what a cache spread
// over several places needs to say where each block lies.
class ReplayObserver {
 public:
  virtual ~ReplayObserver() = default;
  virtual void entered(uint32_t block, uint32_t tier) = 0;
  virtual void left(uint32_t block, uint32_t tier) = 0;
};

class ReplaySession {
 public:
  // `slots` > 0: at most this many blocks are ever in the tiers at once
  // (their capacities summed, plus one), and where that is fewer than
  // `blocks` and every tier's policy forgets a block that leaves
  // (EvictionPolicy::forgets_departed) with every block admitted, the
  // hierarchy keeps state for `slots` blocks only, each block held in a
  // slot while it is in some tier: the same results in memory for what the
  // cache holds, not for every block the stream names.
  ReplaySession(ReplayConfig& c, uint64_t blocks, uint64_t slots = 0);
  ~ReplaySession();
  ReplaySession(const ReplaySession&) = delete;
  ReplaySession& operator=(const ReplaySession&) = delete;
  // One request's blocks, as dense indices < blocks; `tail_tokens` in its
  // last block (0: full).
  void request(const uint32_t* refs, size_t n, uint32_t tail_tokens = 0);
  ReplayResult result() const;
  // Block by block, for an engine that decides when a block is used (the
  // serving engine: a prompt's cached prefix when it is admitted, its new
  // blocks when they are written): the tier holding b now (tiers() if
  // none), and one reference to b (hit: the tier that held it, promoted as
  // configured; miss: tiers(), and b is inserted).
  uint32_t tiers() const;
  uint32_t holder(uint32_t b) const;
  uint32_t reference(uint32_t b);
  // Blocks inserted into a tier so far (each one written into it), and its use.
  uint64_t inserted(uint32_t tier) const;
  uint64_t used(uint32_t tier) const;
  // Every later insertion and removal is told to `o` (null: none).
  void observe(ReplayObserver* o);
  // Whether the hierarchy keeps state for slots, not for every block.
  bool compact() const { return !slot_of_.empty(); }

 private:
  class SlotObserver;
  // One reference to block b through its slot (compact) or directly.
  uint32_t ref(uint32_t b);

  ReplayConfig& c_;
  std::unique_ptr<ReplayHierarchy> h_;
  // Compact: each block's slot (kNoSlot: in no tier), each slot's block,
  // the free slots, and the slots that left a tier during a reference
  // (freed after it if the block is then in no tier).
  static constexpr uint32_t kNoSlot = 0xFFFFFFFFu;
  std::vector<uint32_t> slot_of_, block_of_, free_slots_, departed_;
  std::unique_ptr<SlotObserver> slot_observer_;
  ReplayObserver* observer_ = nullptr;
  uint64_t refs_ = 0, requests_ = 0, tail_room_total_ = 0;
  bool warm_ = false;  // the warm-up is over (counters were reset once)
  std::vector<uint64_t> tail_room_;  // per tier: room left in the last blocks it served
};

// Whether any tier's policy needs next-reference times.
bool replay_needs_next(const ReplayConfig& c);
// Whether every tier's policy forgets a block that has left it.
bool replay_forgets_departed(const ReplayConfig& c);

// LRU stack distances of every reference in one pass, for the hit counts of
// LRU at every capacity at once (Mattson et al. 1970): with capacity C a
// reference hits iff its distance is <= C. For exclusive LRU tiers with
// promotion, tier t serves the distances in (C0+..+C(t-1), C0+..+Ct]. With
// prefix semantics a reference's distance is the largest of its request's
// distances so far. Requests of the warm-up are not counted. Memory:
// O(distinct blocks).
struct StackDistances {
  std::vector<uint64_t> cumulative;  // cumulative[d] = references with distance <= d (d = 0..blocks)
  // cumulative_short[d]: room left in the last blocks of requests whose last
  // reference has distance <= d (tokens a hit on them does not serve).
  std::vector<uint64_t> cumulative_short;
  uint64_t references = 0, requests = 0, tokens = 0;
  uint64_t hits_within(uint64_t capacity) const { return at(cumulative, capacity); }
  uint64_t short_within(uint64_t capacity) const { return at(cumulative_short, capacity); }

 private:
  static uint64_t at(const std::vector<uint64_t>& v, uint64_t c) {
    if (v.empty()) return 0;
    return v[c < v.size() ? c : v.size() - 1];
  }
};
StackDistances lru_stack_distances(const BlockStream& s, ReplaySemantics sem, uint32_t repeat, uint32_t block_tokens,
                                   uint64_t warmup_requests = 0, const TailTokens* tails = nullptr);

// Results as JSON (one object per run) and CSV rows.
json to_json(const ReplayResult& r, const ReplayConfig& c);
std::string csv_header();
std::string csv_rows(const ReplayResult& r, const ReplayConfig& c);

}  // namespace kvtier
