#include "sim/replay/replay.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "policies/eviction/hints.h"
#include "policies/policy.h"

namespace kvtier {
namespace {
constexpr TierId kNone = kNotCreated;
}  // namespace

// The tiers' state and the moves between them. Per reference: a few flat
// array accesses and one policy call (on_access for a hit); misses add the
// insert and the evictions it needs. Nothing allocates after construction.
class ReplayHierarchy {
 public:
  ReplayHierarchy(ReplayConfig& c, uint32_t blocks, bool want_next) : c_(c), n_tiers_(uint32_t(c.tiers.size())) {
    BlockTable& t = table_;
    t.batch = 1;
    t.layers = 1;
    t.blocks_per_seq_layer = blocks;
    t.block_tokens = c.block_tokens;
    t.block_bytes = c.block_bytes;
    t.allocate(blocks, kNone);
    t.pin_stamp = 0;  // nothing is pinned: no request is in flight in a replay
    for (const auto& ts : c.tiers) {
      TierInfo ti;
      ti.name = ts.name;
      ti.kind = "cache";
      ti.capacity_blocks = ts.capacity_blocks;
      t.tiers.push_back(ti);
    }
    mask_.assign(blocks, 0);
    if (c.admission == ReplayAdmission::Second) seen_.assign(blocks, 0);
    if (want_next) next_.assign(blocks, kNeverAgain);
    for (uint32_t i = 0; i < n_tiers_; ++i) {
      const std::string where =
          c.tiers[i].where.empty() ? "replay.tiers[" + std::to_string(i) + "].policy" : c.tiers[i].where;
      auto p = Registry<EvictionPolicy>::instance().create(c.tiers[i].policy, where);
      if (auto* na = dynamic_cast<NextAccessEviction*>(p.get())) {
        if (!want_next) throw ConfigError(where + ": needs next-reference times (internal: not computed)");
        na->set_next_access(next_.data());
      }
      miss_aware_.push_back(dynamic_cast<MissAwareEviction*>(p.get()));
      drops_.push_back(p->drops());
      cap_.push_back(c.tiers[i].capacity_blocks);
      policies_.push_back(std::move(p));
    }
    for (auto& p : policies_) p->setup(table_);
    used_.assign(n_tiers_, 0);
    hits_.assign(n_tiers_, 0);
    bypassed_.assign(n_tiers_, 0);
    inserted_.assign(n_tiers_, 0);
  }

  // One reference to block b; `next` is the time of its next reference
  // (kNeverAgain if none) when next-reference times are kept. Returns the
  // tier that holds it (a hit there) or n_tiers_ (a miss).
  uint32_t reference(uint32_t b, uint64_t next) {
    BlockTable& t = table_;
    t.last_access(b) = ++t.clock;
    ++t.access_count(b);
    if (!next_.empty()) next_[b] = next;
    TierId top = t.tier(b);
    if (top != kNone) {
      policies_[top]->on_access(b, top);
      if (c_.promote && top > 0) {
        if (c_.inclusive) {
          for (int u = int(top) - 1; u >= 0; --u) insert_inclusive(b, TierId(u));
        } else {
          remove(b, top);
          insert_exclusive(b, 0);
        }
      }
      return top;
    }
    if (!seen_.empty() && !seen_[b]) {
      seen_[b] = 1;
      return n_tiers_;
    }
    if (c_.inclusive) {
      for (int u = int(n_tiers_) - 1; u >= 0; --u) insert_inclusive(b, TierId(u));
    } else {
      insert_exclusive(b, 0);
    }
    return n_tiers_;
  }

  uint32_t tiers() const { return n_tiers_; }
  // The tier holding b (the highest one, inclusive), or tiers() if none.
  uint32_t holder(uint32_t b) const { return table_.tier(b) == kNone ? n_tiers_ : table_.tier(b); }
  uint64_t used(uint32_t u) const { return used_[u]; }

 private:
  // False if the policy names no victim although the tier is full (a policy
  // of the timed engine that keeps blocks for reasons a replay does not
  // model, such as HKM's time pinning): the block then bypasses the tier.
  bool make_room(uint32_t b, TierId u, bool inclusive) {
    MissAwareEviction* ma = miss_aware_[u];
    if (ma) ma->on_miss(b, u);
    while (used_[u] >= cap_[u] || (ma && ma->needs_room(u))) {
      BlockId v = policies_[u]->victim(u);
      if (v == kNoBlock) {
        if (used_[u] < cap_[u]) break;
        ++bypassed_[u];
        return false;
      }
      if (inclusive) evict_inclusive(v, u);
      else evict_exclusive(v, u);
    }
    return true;
  }
  void insert_exclusive(uint32_t b, TierId u) {
    if (!make_room(b, u, false)) {
      if (u + 1u < n_tiers_) insert_exclusive(b, TierId(u + 1));
      return;
    }
    policies_[u]->on_insert(b, u);
    ++used_[u];
    ++inserted_[u];
    if (observer_) observer_->entered(b, u);
    table_.tier(b) = u;
    table_.created[b] = table_.clock;
  }
  void remove(uint32_t b, TierId u) {
    policies_[u]->on_remove(b, u);
    --used_[u];
    if (observer_) observer_->left(b, u);
    table_.tier(b) = kNone;
  }
  void evict_exclusive(uint32_t v, TierId u) {
    remove(v, u);
    if (u + 1u < n_tiers_ && !drops_[u]) insert_exclusive(v, TierId(u + 1));
  }
  void insert_inclusive(uint32_t b, TierId u) {
    if (mask_[b] >> u & 1u) return;
    if (!make_room(b, u, true)) return;
    policies_[u]->on_insert(b, u);
    ++used_[u];
    ++inserted_[u];
    if (observer_) observer_->entered(b, u);
    mask_[b] |= uint8_t(1u << u);
    set_top(b);
  }
  void evict_inclusive(uint32_t v, TierId u) {
    policies_[u]->on_remove(v, u);
    --used_[u];
    if (observer_) observer_->left(v, u);
    mask_[v] &= uint8_t(~(1u << u));
    // Leaving the last tier (or a dropping policy's tier) leaves the cache:
    // copies above would break inclusion.
    if (u + 1u == n_tiers_ || drops_[u]) {
      for (uint32_t w = 0; w < n_tiers_; ++w)
        if (mask_[v] >> w & 1u) {
          policies_[w]->on_remove(v, TierId(w));
          --used_[w];
          if (observer_) observer_->left(v, w);
        }
      mask_[v] = 0;
    }
    set_top(v);
  }
  void set_top(uint32_t b) {
    uint8_t m = mask_[b];
    table_.tier(b) = m ? TierId(__builtin_ctz(m)) : kNone;
  }

  ReplayConfig& c_;
  uint32_t n_tiers_;
  BlockTable table_;
  std::vector<std::unique_ptr<EvictionPolicy>> policies_;
  std::vector<MissAwareEviction*> miss_aware_;
  std::vector<uint8_t> drops_;
  std::vector<uint64_t> cap_, used_;
  std::vector<uint8_t> mask_, seen_;
  std::vector<uint64_t> next_;

 public:
  std::vector<uint64_t> hits_, bypassed_, inserted_;
  ReplayObserver* observer_ = nullptr;
};

namespace {

void check_config(const ReplayConfig& c) {
  if (c.tiers.empty()) throw ConfigError("replay: no tiers (give --capacity or --tier)");
  if (c.tiers.size() > 8) throw ConfigError("replay: at most 8 tiers");
  for (size_t i = 0; i < c.tiers.size(); ++i)
    if (c.tiers[i].capacity_blocks == 0)
      throw ConfigError("replay: tier " + c.tiers[i].name + ": capacity must be at least one block");
  if (c.repeat < 1) throw ConfigError("replay: --repeat must be at least 1");
}

}  // namespace

bool replay_needs_next(const ReplayConfig& c) {
  for (const auto& t : c.tiers) {
    json p = t.policy;
    auto e = Registry<EvictionPolicy>::instance().create(p, t.where.empty() ? "replay policy" : t.where);
    if (dynamic_cast<NextAccessEviction*>(e.get())) return true;
  }
  return false;
}

ReplayResult replay(const BlockStream& s, ReplayConfig& c, const NextReferences* next, const TailTokens* tails) {
  check_config(c);
  if (tails && !tails->empty() && tails->size() != s.requests)
    throw ConfigError("replay: last-block sizes of " + std::to_string(tails->size()) + " requests for " +
                      std::to_string(s.requests));
  if (c.warmup_requests >= s.requests * c.repeat && s.requests > 0)
    throw ConfigError("replay: a warm-up of " + std::to_string(c.warmup_requests) + " requests leaves none of the " +
                      std::to_string(s.requests * c.repeat) + " to count");
  bool want_next = replay_needs_next(c);
  if (want_next && (!next || next->n != s.refs.size() || next->repeat != c.repeat))
    throw ConfigError("replay: next-reference times of the stream are needed (Belady)");
  ReplayHierarchy h(c, uint32_t(s.blocks()), want_next);
  const uint32_t T = h.tiers();
  const bool prefix_sem = c.semantics == ReplaySemantics::Prefix;
  const bool sized = tails && !tails->empty();
  std::vector<uint64_t>& hits = h.hits_;
  // Room left in the last blocks: in total, and per tier that served them.
  std::vector<uint64_t> tail_room(T, 0);
  uint64_t tail_room_total = 0, warm_refs = 0, seen_requests = 0;
  const uint32_t* refs = s.refs.data();
  for (uint32_t rep = 0; rep < c.repeat; ++rep) {
    uint64_t i = 0;
    for (uint64_t r = 0; r < s.requests; ++r) {
      const uint64_t first = i;
      bool prefix = true;
      uint32_t last = T;  // the tier the last reference counted as a hit in
      for (uint64_t end = s.request_end[r]; i < end; ++i) {
        uint64_t nx = want_next ? next->next_position(i, rep, refs[i]) : NextReferences::kNoNext;
        uint32_t w = h.reference(refs[i], nx == NextReferences::kNoNext ? kNeverAgain : nx);
        if (w >= T) prefix = false;
        last = prefix_sem && !prefix ? T : w;
        if (last < T) ++hits[w];
      }
      if (sized && i > first) {
        const uint32_t room = c.block_tokens - std::min((*tails)[r], c.block_tokens);
        tail_room_total += room;
        if (last < T) tail_room[last] += room;
      }
      if (++seen_requests == c.warmup_requests) {  // the warm-up ends: counting starts afresh
        std::fill(hits.begin(), hits.end(), 0);
        std::fill(h.bypassed_.begin(), h.bypassed_.end(), 0);
        std::fill(tail_room.begin(), tail_room.end(), 0);
        tail_room_total = 0;
        warm_refs = uint64_t(rep) * s.refs.size() + i;
      }
    }
  }
  ReplayResult res;
  res.requests = seen_requests - std::min(seen_requests, c.warmup_requests);
  res.references = uint64_t(s.refs.size()) * c.repeat - warm_refs;
  res.tokens = res.references * c.block_tokens - tail_room_total;
  for (uint32_t t = 0; t < T; ++t) {
    ReplayTierResult tr;
    tr.name = c.tiers[t].name;
    tr.policy = c.tiers[t].policy;
    tr.capacity_blocks = c.tiers[t].capacity_blocks;
    tr.hits = hits[t];
    tr.hit_tokens = hits[t] * c.block_tokens - tail_room[t];
    tr.bypassed = h.bypassed_[t];
    res.tiers.push_back(tr);
  }
  res.misses = res.references - res.hits();
  return res;
}

// Compact: the hierarchy speaks of slots; the session's observer hears of
// blocks, and the slots that leave a tier are noted to be freed.
class ReplaySession::SlotObserver : public ReplayObserver {
 public:
  explicit SlotObserver(ReplaySession& s) : s_(s) {}
  void entered(uint32_t slot, uint32_t tier) override {
    if (s_.observer_) s_.observer_->entered(s_.block_of_[slot], tier);
  }
  void left(uint32_t slot, uint32_t tier) override {
    if (s_.observer_) s_.observer_->left(s_.block_of_[slot], tier);
    s_.departed_.push_back(slot);
  }

 private:
  ReplaySession& s_;
};

bool replay_forgets_departed(const ReplayConfig& c) {
  for (const auto& t : c.tiers) {
    json p = t.policy;
    auto e = Registry<EvictionPolicy>::instance().create(p, t.where.empty() ? "replay policy" : t.where);
    if (!e->forgets_departed()) return false;
  }
  return true;
}

ReplaySession::ReplaySession(ReplayConfig& c, uint64_t blocks, uint64_t slots) : c_(c) {
  check_config(c);
  tail_room_.assign(c.tiers.size(), 0);
  if (replay_needs_next(c))
    throw ConfigError("replay: a policy that needs the future (belady) needs the whole stream in memory, not --stream");
  if (blocks >= 0xFFFFFFFFull) throw ConfigError("replay: more than 2^32 - 2 distinct blocks");
  const bool compact =
      slots > 0 && slots < blocks && c.admission == ReplayAdmission::Always && replay_forgets_departed(c);
  h_ = std::make_unique<ReplayHierarchy>(c, uint32_t(compact ? slots : blocks), false);
  if (compact) {
    slot_of_.assign(blocks, kNoSlot);
    block_of_.assign(slots, kNoSlot);
    // Handed out lowest first.
    for (uint64_t k = slots; k-- > 0;) free_slots_.push_back(static_cast<uint32_t>(k));
    slot_observer_ = std::make_unique<SlotObserver>(*this);
    h_->observer_ = slot_observer_.get();
  }
}

ReplaySession::~ReplaySession() = default;

uint32_t ReplaySession::ref(uint32_t b) {
  if (slot_of_.empty()) return h_->reference(b, kNeverAgain);
  uint32_t& slot = slot_of_[b];
  if (slot == kNoSlot) {
    if (free_slots_.empty()) throw std::logic_error("replay: more blocks in the tiers than their capacity");
    slot = free_slots_.back();
    free_slots_.pop_back();
    block_of_[slot] = b;
  }
  departed_.push_back(slot);  // a block that found no room anywhere leaves at once
  const uint32_t w = h_->reference(slot, kNeverAgain);
  const uint32_t T = h_->tiers();
  for (uint32_t s : departed_)
    if (block_of_[s] != kNoSlot && h_->holder(s) == T) {
      slot_of_[block_of_[s]] = kNoSlot;
      block_of_[s] = kNoSlot;
      free_slots_.push_back(s);
    }
  departed_.clear();
  return w;
}

void ReplaySession::request(const uint32_t* refs, size_t n, uint32_t tail_tokens) {
  const uint32_t T = h_->tiers();
  bool prefix = c_.semantics == ReplaySemantics::Prefix;
  bool ok = true;
  uint32_t last = T;
  for (size_t i = 0; i < n; ++i) {
    uint32_t w = ref(refs[i]);
    if (w >= T) ok = false;
    last = prefix && !ok ? T : w;
    if (last < T) ++h_->hits_[w];
  }
  if (tail_tokens && n) {
    const uint32_t room = c_.block_tokens - std::min(tail_tokens, c_.block_tokens);
    tail_room_total_ += room;
    if (last < T) tail_room_[last] += room;
  }
  refs_ += n;
  ++requests_;
  if (!warm_ && requests_ == c_.warmup_requests) {  // the warm-up ends: counting starts afresh
    std::fill(h_->hits_.begin(), h_->hits_.end(), 0);
    std::fill(h_->bypassed_.begin(), h_->bypassed_.end(), 0);
    std::fill(tail_room_.begin(), tail_room_.end(), 0);
    refs_ = requests_ = tail_room_total_ = 0;
    warm_ = true;
  }
}

uint32_t ReplaySession::tiers() const { return h_->tiers(); }
uint32_t ReplaySession::holder(uint32_t b) const {
  if (slot_of_.empty()) return h_->holder(b);
  return slot_of_[b] == kNoSlot ? h_->tiers() : h_->holder(slot_of_[b]);
}
uint32_t ReplaySession::reference(uint32_t b) {
  ++refs_;
  return ref(b);
}
uint64_t ReplaySession::inserted(uint32_t tier) const { return h_->inserted_[tier]; }
uint64_t ReplaySession::used(uint32_t tier) const { return h_->used(tier); }
void ReplaySession::observe(ReplayObserver* o) {
  if (slot_observer_) observer_ = o;
  else h_->observer_ = o;
}

ReplayResult ReplaySession::result() const {
  ReplayResult res;
  res.requests = requests_;
  res.references = refs_;
  res.tokens = refs_ * c_.block_tokens - tail_room_total_;
  for (uint32_t t = 0; t < h_->tiers(); ++t) {
    ReplayTierResult tr;
    tr.name = c_.tiers[t].name;
    tr.policy = c_.tiers[t].policy;
    tr.capacity_blocks = c_.tiers[t].capacity_blocks;
    tr.hits = h_->hits_[t];
    tr.hit_tokens = h_->hits_[t] * c_.block_tokens - tail_room_[t];
    tr.bypassed = h_->bypassed_[t];
    res.tiers.push_back(tr);
  }
  res.misses = res.references - res.hits();
  return res;
}

StackDistances lru_stack_distances(const BlockStream& s, ReplaySemantics sem, uint32_t repeat, uint32_t block_tokens,
                                   uint64_t warmup_requests, const TailTokens* tails) {
  // A Fenwick tree over reference slots marks each block's latest slot; the
  // marks after a block's previous slot count the distinct blocks used since.
  // Slots are renumbered (live marks packed to the front) when they run out,
  // so the tree has 2 x blocks slots whatever the stream's length.
  const uint64_t D = s.blocks();
  const uint64_t slots = std::max<uint64_t>(2 * D, 1024);
  constexpr uint64_t kNo = ~0ull;
  std::vector<uint64_t> slot_of(D, kNo);
  std::vector<uint32_t> block_at(slots, 0);
  std::vector<int32_t> fen(slots + 1, 0);
  std::vector<uint64_t> hist(D + 2, 0);  // hist[d], d = 1..D; D+1: first references
  uint64_t now = 0, live = 0;
  auto add = [&](uint64_t i, int32_t v) {
    for (++i; i <= slots; i += i & (~i + 1)) fen[i] += v;
  };
  auto prefix = [&](uint64_t i) {  // marks in slots 0..i
    int64_t sum = 0;
    for (++i; i > 0; i -= i & (~i + 1)) sum += fen[i];
    return uint64_t(sum);
  };
  auto compact = [&]() {
    uint64_t k = 0;
    for (uint64_t j = 0; j < now; ++j) {
      uint32_t b = block_at[j];
      if (slot_of[b] == j) {
        slot_of[b] = k;
        block_at[k++] = b;
      }
    }
    std::fill(fen.begin(), fen.end(), 0);
    for (uint64_t j = 1; j <= slots; ++j) {  // O(slots) build: ones at slots 0..k-1
      if (j <= k) fen[j] += 1;
      uint64_t p = j + (j & (~j + 1));
      if (p <= slots) fen[p] += fen[j];
    }
    now = k;
  };
  auto distance = [&](uint32_t b) -> uint64_t {
    if (now == slots) compact();
    uint64_t d;
    if (slot_of[b] == kNo) {
      d = D + 1;
      ++live;
    } else {
      d = 1 + live - prefix(slot_of[b]);
      add(slot_of[b], -1);
    }
    add(now, 1);
    slot_of[b] = now;
    block_at[now++] = b;
    return d;
  };
  const bool sized = tails && !tails->empty();
  if (sized && tails->size() != s.requests)
    throw ConfigError("replay: last-block sizes of " + std::to_string(tails->size()) + " requests for " +
                      std::to_string(s.requests));
  std::vector<uint64_t> short_hist(D + 2, 0);  // room left in last blocks, by their distance
  uint64_t seen = 0, counted_refs = 0;
  for (uint32_t rep = 0; rep < std::max<uint32_t>(repeat, 1); ++rep) {
    uint64_t i = 0;
    for (uint64_t r = 0; r < s.requests; ++r) {
      const bool count = seen++ >= warmup_requests;
      uint64_t worst = 0, d = 0;
      const uint64_t first = i;
      for (uint64_t end = s.request_end[r]; i < end; ++i) {
        d = distance(s.refs[i]);
        if (sem == ReplaySemantics::Prefix) d = worst = std::max(worst, d);
        if (count) ++hist[d];
      }
      if (!count) continue;
      counted_refs += i - first;
      if (sized && i > first) short_hist[d] += block_tokens - std::min((*tails)[r], block_tokens);
    }
  }
  StackDistances sd;
  sd.references = counted_refs;
  sd.requests = seen - std::min(seen, warmup_requests);
  uint64_t short_total = 0;
  for (uint64_t v : short_hist) short_total += v;
  sd.tokens = counted_refs * block_tokens - short_total;
  sd.cumulative.assign(D + 1, 0);
  sd.cumulative_short.assign(D + 1, 0);
  for (uint64_t d = 1; d <= D; ++d) {
    sd.cumulative[d] = sd.cumulative[d - 1] + hist[d];
    sd.cumulative_short[d] = sd.cumulative_short[d - 1] + short_hist[d];
  }
  return sd;
}

namespace {

// Bytes of `tokens` tokens of KV: block bytes per block tokens, exact.
uint64_t token_bytes(uint64_t tokens, const ReplayConfig& c) {
  if (!c.block_tokens) return 0;
  return uint64_t((unsigned __int128)tokens * c.block_bytes / c.block_tokens);
}

double ratio(uint64_t a, uint64_t b) { return b ? double(a) / double(b) : 0.0; }

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

}  // namespace

json to_json(const ReplayResult& r, const ReplayConfig& c) {
  json tiers = json::array();
  for (const auto& t : r.tiers) {
    tiers.push_back({{"name", t.name},
                     {"policy", t.policy},
                     {"capacity_blocks", t.capacity_blocks},
                     {"capacity_bytes", t.capacity_blocks * c.block_bytes},
                     {"hits", t.hits},
                     {"bypassed", t.bypassed},
                     {"hit_ratio", ratio(t.hits, r.references)},
                     {"byte_hit_ratio", ratio(t.hit_tokens, r.tokens)},
                     {"bytes_served", token_bytes(t.hit_tokens, c)},
                     {"prefill_tokens_saved", t.hit_tokens}});
  }
  const uint64_t hits = r.hits(), hit_tokens = r.hit_tokens();
  return {{"references", r.references},
          {"requests", r.requests},
          {"hits", hits},
          {"misses", r.misses},
          {"hit_ratio", ratio(hits, r.references)},
          {"miss_ratio", ratio(r.misses, r.references)},
          {"bytes_referenced", token_bytes(r.tokens, c)},
          {"bytes_missed", token_bytes(r.tokens - hit_tokens, c)},
          {"byte_miss_ratio", ratio(r.tokens - hit_tokens, r.tokens)},
          {"prefill_tokens_saved", hit_tokens},
          {"tiers", tiers}};
}

std::string csv_header() {
  return "policy,tier,capacity_blocks,capacity_bytes,references,hits,hit_ratio,bytes_served,prefill_tokens_saved,"
         "byte_hit_ratio,miss_ratio,byte_miss_ratio\n";
}

std::string csv_rows(const ReplayResult& r, const ReplayConfig& c) {
  std::string out;
  const uint64_t hit_tokens = r.hit_tokens();
  const std::string run = number(ratio(r.misses, r.references)) + "," + number(ratio(r.tokens - hit_tokens, r.tokens));
  for (const auto& t : r.tiers) {
    std::string pol = t.policy.is_object() ? t.policy.value("name", "") : t.policy.dump();
    out += pol + "," + t.name + "," + std::to_string(t.capacity_blocks) + "," +
           std::to_string(t.capacity_blocks * c.block_bytes) + "," + std::to_string(r.references) + "," +
           std::to_string(t.hits) + "," + number(ratio(t.hits, r.references)) + "," +
           std::to_string(token_bytes(t.hit_tokens, c)) + "," + std::to_string(t.hit_tokens) + "," +
           number(ratio(t.hit_tokens, r.tokens)) + "," + run + "\n";
  }
  return out;
}

}  // namespace kvtier
