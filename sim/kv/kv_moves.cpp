// The KV store's moves that callers ask for by name: attention's uses of a
// block, reads up, predictions, writes of new KV, prefill output and the
// room prefill sets aside. Each keeps the block's state (its tier, copies,
// the job moving it, where its data is read) consistent in one place.
#include "sim/kv/kv_store.h"

namespace kvtier {

void KvStore::begin_layer(uint64_t clock, uint32_t step, uint32_t layer, double now_s) {
  t_.clock = clock;
  t_.step = step;
  t_.layer = layer;
  t_.now_s = now_s;
}

void KvStore::set_clock(uint64_t clock, uint32_t layer) {
  t_.clock = clock;
  t_.layer = layer;
}

void KvStore::seed_prompt(BlockId b, float mass) {
  if (mass != 0.f) masses_ = true;
  t_.mass[b] = mass;
  t_.last_mass[b] = mass;
  t_.access_count(b) = 1;
}

bool KvStore::prefetch_up(BlockId b, uint32_t layer) {
  BlockState& st = t_.state[b];
  const TierId t = st.tier;
  if (t >= t_.tiers.size() || t == 0 || st.predicted || !make_room(0)) return false;
  const JobId j = planner_->add_prefetch(t, layer, data_bytes(b), st.job);
  move(b, t, 0);
  st.job = j;
  st.src = kNoSource;
  st.predicted = 1;
  ++predicted_blocks_;
  st.predicted_from = t;
  ++c_.prefetch.prefetched_blocks;
  return true;
}

void KvStore::write_kv(BlockId b, uint32_t layer, double bytes) {
  const size_t nt = t_.tiers.size();
  const TierId t = t_.tier(b);
  if (t >= nt) return;
  t_.dirty(b) = 1;
  invalidate_copies(b);
  if (s_.gpu_tier && t == 0) return;
  BlockState& st = t_.state[b];
  st.job = planner_->add(nt, t, layer, bytes, st.job);
  st.src = kNoSource;
}

JobId KvStore::write_output(BlockId b, uint32_t layer) {
  BlockState& st = t_.state[b];
  st.job = planner_->add(t_.tiers.size(), st.tier, layer, data_bytes(b), kNoJob);
  st.src = kNoSource;
  return st.job;
}

void KvStore::load_from(BlockId b, TierId from, uint32_t layer) {
  const TierId t = t_.tier(b);
  if (t != from) t_.state[b].job = planner_->add(from, t, layer, data_bytes(b), kNoJob);
}

JobId KvStore::load_cached(BlockId b, TierId from, uint32_t layer, double bytes, JobId after) {
  const TierId t = t_.tier(b);
  if (t >= t_.tiers.size()) return kNoJob;
  // The prompt's attention reads b at the layer being selected, which
  // touch() marks only once every block of the prompt is placed. Until then
  // the room made for its next blocks could take b: a policy that ranks a
  // new block first (LFU's lowest count, ARC's T1) writes it back before its
  // load has landed, its room is handed on, and attention reads it up again
  // within the same transfers: the write waits for the load and the load
  // for the write, and neither ever runs. In use from its load on, as a
  // block being read into is in a real server.
  t_.last_access(b) = t_.clock;
  if (t == from) return kNoJob;
  BlockState& st = t_.state[b];
  st.job = planner_->add(from, t, layer, bytes, after);
  st.src = kNoSource;
  return st.job;
}

// The tier's capacity_blocks is the room left to placement and eviction
// (policies size their queues by it); make_room stops one block below the
// room it is given, hence the one more it starts from.
void KvStore::reserve_room(TierId t, uint64_t blocks) {
  TierInfo& ti = t_.tiers[t];
  const uint64_t keep = ti.capacity_blocks > blocks ? ti.capacity_blocks - blocks : 0;
  ti.capacity_blocks = keep + 1;
  make_room(t);
  ti.capacity_blocks = std::max(keep, ti.occupied_blocks());
}

void KvStore::release_room(TierId t) { t_.tiers[t].capacity_blocks = capacity_[t]; }

}  // namespace kvtier
