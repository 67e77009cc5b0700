#include "sim/serving/prefix_cache.h"

#include <algorithm>
#include <string>

#include "sim/core/config.h"
#include "sim/platform/transfer_planner.h"
#include "sim/replay/replay.h"
#include "sim/serving/gpu_prefix_cache.h"
#include "sim/serving/kv_pool.h"

namespace kvtier {

ParamList PrefixCache::params() {
  return {
      boolean("enabled", true, "keep prompt blocks in the tiers below the GPU for reuse"),
      str("write", "write_through",
          "when a prompt's new blocks are written down: write_through (as its prefill completes) or on_finish (when "
          "the request leaves the GPU)",
          {"write_through", "on_finish"}),
      any("policy", "lru", "eviction policy of every cache tier (a name or {\"name\": ..., params})"),
      boolean("inclusive", false, "a block in a tier is also in every tier below (default: exclusive)"),
      str("match", "prefix",
          "which cached blocks of a prompt are loaded: prefix (its leading run, as vLLM and LMCache serve prefixes) or "
          "any (every cached block wherever it is in the prompt, as MatKV loads retrieved chunks)",
          {"prefix", "any"}),
      boolean("gpu", false,
              "the GPU's free KV pool keeps the prompt blocks of finished requests until it hands them out again, "
              "least recently freed first (vLLM's automatic prefix caching): a prompt starting with them computes "
              "and loads none of them"),
      num("tier_share", 0.5,
          "with serving.kv \"tiered\": the share of each tier below the GPU that keeps prompt blocks; running "
          "sequences' KV gets the rest (with the paged pool the cache takes every tier's room beside the swap space: "
          "leave the default)",
          0.0, 1.0),
      boolean("warm", false,
              "the cache starts holding every block of the request stream, written before time 0 (MatKV: the "
              "corpus's KV is precomputed on flash), as far as the tiers hold them. In a cluster: every instance's "
              "own cache starts so (each node holds the whole corpus), or with cluster.kv_pool \"pooled\" the pool "
              "does, each block placed by the pool's placement (hashed: its hash's share; local_first: the slot the "
              "tier's last victim freed, else the share with the most room) and none of them written"),
  };
}

PrefixCache::PrefixCache() = default;
PrefixCache::~PrefixCache() = default;

// Precomputed before time 0, in stream order: what the tiers hold of it is
// what they keep. Nothing moves for it, and it is not counted as written.
void PrefixCache::warm(const std::vector<ServingRequest>& reqs) {
  if (!cache_ || pool_) return;  // off, or a pool's member (the pool warms itself)
  for (const ServingRequest& q : reqs)
    for (uint32_t b : q.prefix_blocks) cache_->reference(b);
  for (uint32_t u = 0; u < cache_->tiers(); ++u) inserted_seen_[u] = cache_->inserted(u);
}

void PrefixCache::setup(json& pc, const EngineSetup& s, uint32_t block_tokens, uint64_t distinct_blocks,
                        const Room& room, uint32_t pool_block_tokens) {
  write_through_ = pc["write"] == "write_through";
  warm_ = pc["warm"].get<bool>();
  match_any_ = pc["match"] == "any";
  inclusive_ = pc["inclusive"].get<bool>();
  block_tokens_ = block_tokens;
  distinct_blocks_ = distinct_blocks;
  kv_bytes_per_token_layer_ = double(s.model.kv_bytes_per_token_layer());
  layers_ = s.model.layers;
  const bool enabled = pc["enabled"].get<bool>() && distinct_blocks_ > 0;
  if (enabled && s.tier_dev.size() > 1) {
    setup_tiers(pc, s, room);
    index_ = cache_.get();
    for (uint32_t u = 0; u < cache_->tiers(); ++u) inserted_seen_.push_back(cache_->inserted(u));
  }
  if (enabled && pc["gpu"].get<bool>()) {
    gpu_ = std::make_unique<GpuPrefixCache>();
    gpu_->setup(static_cast<uint32_t>(distinct_blocks_), (block_tokens_ + pool_block_tokens - 1) / pool_block_tokens);
  }
}

// Every tier below the GPU, in blocks of the trace's hash size, less what
// the swap space and the weights take of it.
void PrefixCache::setup_tiers(json& pc, const EngineSetup& s, const Room& room) {
  cfg_ = std::make_unique<ReplayConfig>();
  cfg_->inclusive = inclusive_;
  cfg_->block_tokens = block_tokens_;
  cfg_->block_bytes = static_cast<uint64_t>(static_cast<double>(s.model.kv_bytes_per_token())) * block_tokens_;
  for (size_t t = 1; t < s.tier_dev.size(); ++t) {
    const bool swap_here = static_cast<int>(s.tier_dev[t]) == room.swap_dev;
    double cap = s.hw.devices[s.tier_dev[t]].model->capacity_bytes() - room.weight_bytes[t];
    if (swap_here) cap -= room.swap_bytes;
    // hardware.kv_capacity: the cache's room given (the swap space and weights beside it).
    cap = kv_room_bytes(s.hw.kv_capacity, s.hw.tiers[t], cap, room.kv_block_bytes,
                        std::string(" after") + (room.weight_bytes[t] > 0 ? " the weights (policies.weights) and" : "") +
                            (swap_here ? " the swap space (serving.swap_space_GiB)" : " nothing else"));
    cap *= room.share;
    ReplayTierSpec ts;
    ts.name = s.hw.tiers[t];
    ts.capacity_blocks = cap > 0 ? static_cast<uint64_t>(cap / double(cfg_->block_bytes)) : 0;
    if (ts.capacity_blocks == 0)
      throw ConfigError("hardware.devices." + ts.name + ": holds no prefix-cache block of " +
                        std::to_string(cfg_->block_bytes) + " bytes (" + std::to_string(block_tokens_) + " tokens)" +
                        (room.share < 1.0 ? " in serving.prefix_cache.tier_share of its room" : "") +
                        (swap_here ? " besides the swap space" : "") +
                        (room.weight_bytes[t] > 0 ? " and the weights (policies.weights)" : ""));
    ts.policy = pc["policy"].is_string() ? json{{"name", pc["policy"]}} : pc["policy"];
    ts.where = "serving.prefix_cache.policy";
    cfg_->tiers.push_back(ts);
    dev_.push_back(s.tier_dev[t]);
  }
  // What the tiers hold at once is bounded by their room: with a policy
  // that forgets what leaves, the index is sized by that, not by every
  // block of the stream (a cluster has an index per instance).
  uint64_t room_blocks = 1;
  for (const ReplayTierSpec& ts : cfg_->tiers) room_blocks += std::min<uint64_t>(ts.capacity_blocks, distinct_blocks_);
  cache_ = std::make_unique<ReplaySession>(*cfg_, distinct_blocks_, room_blocks);
  json policy = cfg_->tiers[0].policy;
  pc["policy"] = policy;
}

// The prompt's blocks the cache holds, in order, each with its tier (kOnGpu:
// still in the GPU's pool) and its tokens: its longest run of leading blocks
// (as vLLM and LMCache serve prefixes), or every block held with match_any.
// The one walk lookup, routing and the split over a pool's members share.
template <class F>
void PrefixCache::for_each_hit(const ServingRequest& r, F&& f) const {
  const uint32_t T = index_ ? index_->tiers() : 0;
  uint64_t pos = 0;
  for (uint32_t b : r.prefix_blocks) {
    if (pos >= r.input_tokens) break;
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(block_tokens_, r.input_tokens - pos));
    pos += n;
    if (gpu_ && gpu_->holds(b)) {
      f(b, kOnGpu, n);
      continue;
    }
    const uint32_t h = index_ ? index_->holder(b) : T;
    if (h >= T) {
      if (match_any_) continue;
      break;
    }
    f(b, h, n);
  }
}

// The prompt tokens the cache holds, split by the tier each block is in. A
// peek: recency changes only once the request is admitted.
uint32_t PrefixCache::lookup(ServingRequest& r) const {
  if ((!index_ && !gpu_) || r.generated > 0) return 0;  // after a recompute the prompt grew beyond what is hashed
  r.hit_tokens.assign(index_ ? index_->tiers() : 0, 0);
  r.gpu_hit_tokens = 0;
  r.remote_hit_tokens = r.remote_nodes = 0;
  uint64_t tokens = 0;
  for_each_hit(r, [&](uint32_t, uint32_t h, uint32_t n) {
    if (h == kOnGpu) r.gpu_hit_tokens += n;  // nothing to load
    else r.hit_tokens[h] += n;
    tokens += n;
  });
  return static_cast<uint32_t>(tokens);
}

uint32_t PrefixCache::routing_tokens(const ServingRequest& r) const {
  if ((!index_ && !gpu_) || r.generated > 0) return 0;
  // With a pool: only the blocks this instance reads without crossing the
  // fabric (its GPU's, and those whose share or copy is on its node).
  const uint32_t node = pool_ ? pool_->member(member_).gpu_node : 0;
  uint64_t tokens = 0;
  for_each_hit(r, [&](uint32_t b, uint32_t h, uint32_t n) {
    if (pool_ && h != kOnGpu) {
      const uint32_t m = pool_->source(b, h, member_);
      if (m == KvPool::kNoMember || pool_->member(m).nodes[h] != node) return;
    }
    tokens += n;
  });
  return static_cast<uint32_t>(tokens);
}

uint32_t PrefixCache::hit_sources(const ServingRequest& r, std::vector<std::pair<size_t, uint32_t>>& from) const {
  if ((!index_ && !gpu_) || r.generated > 0) return 0;
  uint64_t tokens = 0;
  for_each_hit(r, [&](uint32_t b, uint32_t h, uint32_t n) {
    tokens += n;
    if (h == kOnGpu) return;
    size_t dev = dev_[h];
    if (pool_) {
      const uint32_t m = pool_->source(b, h, member_);
      if (m != KvPool::kNoMember) dev = pool_->member(m).devs[h];
    }
    if (!from.empty() && from.back().first == dev) from.back().second += n;
    else from.emplace_back(dev, n);
  });
  return static_cast<uint32_t>(tokens);
}

// Used now: recency and promotion in the tiers; the GPU's blocks are this request's.
void PrefixCache::mark_used(const ServingRequest& r) {
  const size_t T = index_ ? index_->tiers() : 0;
  if (pool_) pool_->act_as(member_);
  for (uint32_t b : r.prefix_blocks) {
    if (gpu_ && gpu_->holds(b)) {
      gpu_->take(b);
      continue;
    }
    if (!index_) break;
    if (index_->holder(b) >= T) {
      if (match_any_) continue;
      break;
    }
    index_->reference(b);
  }
}

// An admitted prompt's loaded tokens: less the last one (recomputed), less
// what the GPU's pool holds, split over the tiers in the order lookup found
// them. False if the item loads nothing now.
bool PrefixCache::split_loads(const IterationItem& item, ServingRequest& r) {
  if (!item.prefill || item.loaded == 0 || item.past != item.loaded) return false;
  const size_t T = index_ ? index_->tiers() : 0;
  uint32_t left = item.loaded;
  r.gpu_hit_tokens = std::min(left, r.gpu_hit_tokens);
  left -= r.gpu_hit_tokens;
  for (size_t u = 0; u < T; ++u) {
    const uint32_t n = std::min(left, r.hit_tokens[u]);
    r.hit_tokens[u] = n;
    left -= n;
  }
  if (pool_) split_by_member(r, r.hit_tokens);
  mark_used(r);
  return true;
}

// Loaded layer by layer from the tier holding them.
void PrefixCache::plan_loads(const IterationPlan& p, std::vector<ServingRequest>& reqs, PagedIteration& it) {
  const size_t T = index_ ? index_->tiers() : 0;
  std::vector<double> load_tokens(T, 0.0);
  if (pool_) member_tokens_.assign(T * pool_->members(), 0.0);
  for (const IterationItem& item : p.items) {
    ServingRequest& r = reqs[item.req];
    if (!split_loads(item, r)) continue;
    for (size_t u = 0; u < T; ++u) load_tokens[u] += r.hit_tokens[u];
  }
  it.after = last_write_;  // a block written moments ago is read once it is there
  if (pool_) {
    plan_pool_loads(it);
    return;
  }
  for (size_t u = 0; u < T; ++u) {
    if (load_tokens[u] == 0) continue;
    const double bytes = load_tokens[u] * kv_bytes_per_token_layer_;
    it.loads.push_back(PagedIteration::Load{dev_[u], bytes});
    for (uint32_t l = 0; l < layers_; ++l) load_bytes_ += bytes;
  }
}

void PrefixCache::take_loads(const IterationItem& item, ServingRequest& r, std::vector<uint32_t>& tokens) {
  tokens.clear();
  if (!split_loads(item, r)) return;
  const size_t T = index_ ? index_->tiers() : 0;
  tokens.assign(r.hit_tokens.begin(), r.hit_tokens.begin() + static_cast<std::ptrdiff_t>(T));
  for (size_t u = 0; u < T; ++u)
    for (uint32_t l = 0; l < layers_; ++l) load_bytes_ += double(tokens[u]) * kv_bytes_per_token_layer_;
}

// One reference each (a block another request wrote meanwhile is just a hit).
void PrefixCache::write_down(const ServingRequest& r) {
  if (!index_) return;
  if (pool_) pool_->act_as(member_);
  for (uint32_t b : r.prefix_blocks) index_->reference(b);
}

// Into the cache's top tier from the GPU; into lower tiers from the tier
// above (exclusive: demotions) or from the GPU (inclusive: written to every
// tier). Off the critical path, sharing links with everything else.
void PrefixCache::submit_moves(TransferPlanner& planner, size_t gpu_dev) {
  if (!index_) return;
  const double bb = double(cfg_->block_bytes);
  if (pool_) {
    // The pool's moves for this member: into its own share or another's,
    // and victims demoted between shares.
    for (const KvPool::Move& mv : pool_->take_moves(member_)) {
      const double bytes = double(mv.blocks) * bb;
      std::vector<JobId> deps;
      add_dep(deps, last_write_);
      last_write_ = planner.move(mv.from, mv.to, bytes, std::move(deps), "cache write");
      write_bytes_ += bytes;
      if (mv.across_nodes) remote_write_bytes_ += bytes * ranks_;
    }
    pool_->written(member_, last_write_);
    return;
  }
  for (uint32_t u = 0; u < cache_->tiers(); ++u) {
    const uint64_t n = cache_->inserted(u) - inserted_seen_[u];
    if (n == 0) continue;
    inserted_seen_[u] = cache_->inserted(u);
    const size_t to = dev_[u];
    const size_t from = (u == 0 || inclusive_) ? gpu_dev : dev_[u - 1];
    const double bytes = double(n) * bb;
    std::vector<JobId> deps;
    add_dep(deps, last_write_);
    last_write_ = planner.move(from, to, bytes, std::move(deps), "cache write");
    write_bytes_ += bytes;
  }
}

void PrefixCache::free_to_gpu(const ServingRequest& r) {
  if (!gpu_) return;
  uint64_t pos = 0;
  for (uint32_t b : r.prefix_blocks) {
    if (pos + block_tokens_ > r.input_tokens) break;  // a partial last block is not reusable
    pos += block_tokens_;
    gpu_->put(b);
  }
}

void PrefixCache::trim_gpu(uint64_t free_blocks) {
  if (gpu_) gpu_->trim(free_blocks);
}

uint64_t PrefixCache::gpu_pool_blocks() const { return gpu_ ? gpu_->pool_blocks() : 0; }

uint32_t PrefixCache::tiers() const { return index_ ? index_->tiers() : 0; }

double PrefixCache::used_bytes(uint32_t tier) const {
  const uint64_t blocks = pool_ ? pool_->used(member_, tier) : index_->used(tier);
  return double(blocks) * double(cfg_->block_bytes);
}

json PrefixCache::metrics(const std::vector<ServingRequest>& reqs) const {
  json m = {{"enabled", index_ != nullptr}, {"load_bytes", load_bytes_},     {"write_bytes", write_bytes_},
            {"distinct_blocks", distinct_blocks_}, {"block_tokens", block_tokens_}};
  if (gpu_) {
    uint64_t g = 0;
    for (const auto& r : reqs) g += r.gpu_hit_tokens;
    m["gpu_hit_tokens"] = g;
  }
  if (pool_)
    m["pool"] = {{"local_hit_tokens", local_hit_tokens_},
                 {"remote_hit_tokens", remote_hit_tokens_},
                 {"remote_load_bytes", remote_load_bytes_},
                 {"remote_write_bytes", remote_write_bytes_}};
  if (pool_ && pool_->replicate_after() > 0) m["pool"]["replica_hit_tokens"] = replica_hit_tokens_;
  return m;
}

void PrefixCache::join(KvPool& pool, uint32_t member, uint32_t ranks) {
  pool_ = &pool;
  member_ = member;
  ranks_ = ranks;
  index_ = &pool.index();
  cache_.reset();  // the pool's index replaces it
  unlanded_.assign(pool.members(), kNoJob);
}

void PrefixCache::pool_board(JobBoard& board) { pool_->set_board(member_, &board); }

// Block by block in the order lookup found them: each tier's loaded tokens
// go to the member whose share holds the block. Hits on another node's
// share are remote; what the GPU's own pool holds is neither.
void PrefixCache::split_by_member(ServingRequest& r, const std::vector<uint32_t>& tier_tokens) {
  const uint32_t T = index_->tiers();
  const size_t M = pool_->members();
  const uint32_t my_node = pool_->member(member_).gpu_node;
  uint32_t left[8] = {0};  // ReplayConfig: at most 8 tiers
  for (uint32_t u = 0; u < T; ++u) left[u] = tier_tokens[u];
  uint32_t remote = 0, local = 0;
  nodes_seen_.clear();
  for_each_hit(r, [&](uint32_t b, uint32_t h, uint32_t n) {
    if (h == kOnGpu) return;
    const uint32_t take = std::min(n, left[h]);
    if (take == 0) return;
    left[h] -= take;
    const uint32_t m = pool_->source(b, h, member_);
    member_tokens_[size_t(h) * M + m] += take;
    if (m != pool_->home(b, h)) replica_hit_tokens_ += take;
    // Written by another instance and still on its way: the load waits for it.
    const uint32_t w = pool_->writer(b);
    const JobId j = pool_->write_job(b);
    if (w != KvPool::kNoMember && w != member_) {
      if (pool_->unsent(b)) unsent_.push_back(b);
      else if (!pool_->board(w)->done(j)) unlanded_[w] = std::max(unlanded_[w], j);
    }
    const uint32_t node = pool_->member(m).nodes[h];
    if (node == my_node) {
      local += take;
      return;
    }
    remote += take;
    if (h == 0) pool_->read_remotely(b, member_);
    if (std::find(nodes_seen_.begin(), nodes_seen_.end(), node) == nodes_seen_.end()) nodes_seen_.push_back(node);
  });
  r.remote_hit_tokens = remote;
  r.remote_nodes = static_cast<uint32_t>(nodes_seen_.size());
  local_hit_tokens_ += local;
  remote_hit_tokens_ += remote;
}

// Pooled: each tier's tokens from every share holding them, one load per
// device, layer by layer over the route from that device to the GPU.
void PrefixCache::plan_pool_loads(PagedIteration& it) {
  const uint32_t T = index_->tiers();
  const size_t M = pool_->members();
  const uint32_t my_node = pool_->member(member_).gpu_node;
  // Another instance's writes are its own jobs, which this instance's loads
  // cannot depend on: the iteration starts once they have landed (rare: a
  // prefix asked for on one instance while another is still writing it).
  for (uint32_t w = 0; w < M; ++w)
    if (unlanded_[w] != kNoJob) {
      pool_->board(w)->wait(unlanded_[w]);
      unlanded_[w] = kNoJob;
    }
  // Moved by another instance at the end of the iteration it runs now (a
  // promotion into its share): once that move is made and has landed.
  for (uint32_t b : unsent_) {
    const uint32_t w = pool_->writer(b);
    JobBoard& board = *pool_->board(w);
    board.wait_until([&] { return pool_->writer(b) != w || (!pool_->unsent(b) && board.done(pool_->write_job(b))); });
  }
  unsent_.clear();
  for (uint32_t u = 0; u < T; ++u) {
    const size_t first = it.loads.size();
    for (size_t m = 0; m < M; ++m) {
      const double tokens = member_tokens_[size_t(u) * M + m];
      if (tokens == 0) continue;
      const double bytes = tokens * kv_bytes_per_token_layer_;
      const size_t dev = pool_->member(m).devs[u];
      auto same = std::find_if(it.loads.begin() + static_cast<std::ptrdiff_t>(first), it.loads.end(),
                               [&](const PagedIteration::Load& l) { return l.from == dev; });
      if (same != it.loads.end()) same->bytes += bytes;  // two members' shares of one device
      else it.loads.push_back(PagedIteration::Load{dev, bytes});
      for (uint32_t l = 0; l < layers_; ++l) load_bytes_ += bytes;
      if (pool_->member(m).nodes[u] != my_node)
        for (uint32_t l = 0; l < layers_; ++l) remote_load_bytes_ += bytes * ranks_;
    }
  }
}

}  // namespace kvtier
