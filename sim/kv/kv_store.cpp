#include "sim/kv/kv_store.h"

#include <stdexcept>

#include "sim/core/checks.h"
#include "sim/core/footprint.h"

namespace kvtier {

KvStore::KvStore(EngineSetup& s, EngineCounters& c, ValidationCache* validating) : s_(s), c_(c) {
  const LlmSpec& model = s_.model;
  t_.batch = s_.batch;
  // One KV layer of whole-model blocks (serving.kv_unit "all_layers"), or one per model layer.
  t_.layers = s_.kv_layers();
  t_.block_tokens = s_.bt;
  t_.blocks_per_seq_layer = s_.blocks_at(s_.steps - 1);
  t_.block_bytes = uint64_t(s_.bt) * s_.kv_unit_bytes_per_token();
  const uint64_t whole_blocks = uint64_t(s_.batch) * t_.layers * t_.blocks_per_seq_layer;
  if (!s_.admitted_by_scheduler && whole_blocks >= kNoBlock)
    throw ConfigError("workload: too many KV blocks (" + std::to_string(whole_blocks) + ")");
  const Hardware& hw = s_.hw;
  for (size_t i = 0; i < hw.tiers.size(); ++i) add_tier(i);
  uint64_t capacity_blocks = 0;
  for (const TierInfo& ti : t_.tiers) capacity_blocks += ti.capacity_blocks;
  if (t_.tiers.size() > 8) throw ConfigError("hardware.tiers: at most 8 tiers");
  const uint64_t total_blocks = s_.admitted_by_scheduler ? choose_layout(capacity_blocks) : whole_blocks;
  // What the GPU has for KV: its tier (if it is one) and the staging buffers
  // KV streamed through it lands in.
  s_.gpu_free_bytes = s_.gpu_model->capacity_bytes() - s_.gpu_weight_bytes();
  if (!s_.gpu_tier && prefill_output_bytes() > s_.gpu_free_bytes)
    throw ConfigError("hardware.devices." + hw.gpu + ": one sequence's prompt KV of one layer (" +
                      std::to_string(prefill_output_bytes() / 1e9) + " GB), computed in prefill, does not fit the " +
                      std::to_string(s_.gpu_free_bytes / 1e9) + " GB the GPU has after reserved_GB and the weights");
  if (!s_.gpu_tier && !s_.weights && model.weight_bytes() > s_.gpu_model->capacity_bytes())
    throw ConfigError("hardware.devices." + hw.gpu + ": the model's weights (" + std::to_string(model.weight_bytes() / 1e9) +
                      " GB) do not fit in the GPU");
  if (!s_.pol.evict->drops() && !s_.admitted_by_scheduler && total_blocks > capacity_blocks)
    throw ConfigError("hardware.tiers: the KV needs " + std::to_string(total_blocks) + " blocks of " +
                      std::to_string(t_.block_bytes) + " bytes but the tiers hold " + std::to_string(capacity_blocks) +
                      "; add capacity or use an eviction policy that drops");
  for (const auto& c : s_.codec)
    if (!c.on_gpu && c.compress_Bps + c.decompress_Bps > 0 && s_.cpu_dev < 0)
      throw ConfigError("policies.compression: the codec runs on the CPU; hardware.devices needs a device of kind cpu");
  commit_block_table(total_blocks, validating);
  if (!validating) {
    if (t_.chunk_shift) t_.chunk(t_.chunk_shift, static_cast<uint32_t>(total_blocks >> t_.chunk_shift));
    t_.allocate(total_blocks, kNotCreated);
  }
  for (const TierInfo& ti : t_.tiers) capacity_.push_back(ti.capacity_blocks);
  set_unit_bytes();
  // Every route a block may take must exist; this also reports unreachable devices now.
  for (size_t d : s_.tier_dev)
    if (d != s_.gpu_dev) {
      s_.topo->route(d, s_.gpu_dev);
      s_.topo->route(s_.gpu_dev, d);
    }
  for (size_t i = 0; i + 1 < s_.tier_dev.size(); ++i) s_.topo->route(s_.tier_dev[i], s_.tier_dev[i + 1]);
}

// Serving (sequences admitted by the scheduler): a block range per sequence
// that can run at once, sized for the longest request, is mostly never
// used where requests differ in length: with chunks, the table holds only
// what can be live at once, which is bounded twice. The sequences that run
// together hold at most the longest requests' chunks (kv_trace_chunks, from
// the request stream); and where eviction never drops, every created block
// lives in a tier, so they hold at most what the tiers hold, plus each
// (sequence, layer)'s last chunk part-filled. The table is chunked only
// where that is smaller than a range per sequence, so a run whose ranges
// are all used keeps the layout, and the results, it always had.
uint64_t KvStore::choose_layout(uint64_t capacity_blocks) {
  const uint64_t groups = uint64_t(t_.batch) * t_.layers;
  uint64_t blocks = groups * t_.blocks_per_seq_layer;
  const uint32_t shift = s_.kv_chunk_shift;
  if (shift > 0) {
    const uint64_t k = uint64_t(1) << shift;
    uint64_t live_chunks = s_.kv_trace_chunks;
    if (!s_.pol.evict->drops()) live_chunks = std::min(live_chunks, (capacity_blocks + groups * (k - 1)) / k);
    const uint64_t pool = live_chunks + 1;  // and the chunk that is never handed out
    if (pool * k < blocks) {
      blocks = pool * k;
      t_.chunk_shift = shift;
      t_.group_chunks = static_cast<uint32_t>((t_.blocks_per_seq_layer + k - 1) >> shift);
    }
  }
  if (blocks > (uint64_t(1) << 26))
    throw ConfigError("serving.kv: \"tiered\" keeps state for " + std::to_string(blocks) +
                      " KV blocks, what can be live at once: the blocks of the " + std::to_string(t_.batch) +
                      " longest requests (serving.max_running, or the requests if fewer) x " + std::to_string(t_.layers) +
                      " layers, or what hardware.tiers hold if less; above 2^26 (67,108,864): lower "
                      "serving.max_running or serving.limit, or use larger blocks (workload.block_tokens)");
  return blocks;
}

// The block table's memory, committed before it is allocated: the table's
// per-block record (with the store's move state and its node in tier 1's
// copy list) and arrays, the store's copy-list node for each tier below
// tier 1, and what the policies keep per block, measured on copies of them;
// chunked, the map of every (sequence, layer)'s chunks.
void KvStore::commit_block_table(uint64_t blocks, ValidationCache* validating) const {
  const double table = sizeof(BlockState) + 2 * sizeof(float) + sizeof(uint64_t);
  const double store = double(t_.tiers.size() > 2 ? t_.tiers.size() - 2 : 0) * sizeof(ListLinks);
  const double policies = validating ? validating->policy_state_bytes(s_.pol, t_) : s_.pol.state_bytes_per_block(t_);
  const double per_block = table + store + policies;
  const std::string knob = s_.admitted_by_scheduler
                               ? "serving.max_running, workload.block_tokens"
                               : "workload.batch, workload.context_tokens, workload.decode_steps, workload.block_tokens";
  double map = 0;
  if (t_.chunk_shift)
    map = double(t_.batch) * t_.layers * t_.group_chunks * sizeof(uint32_t) +
          double(blocks >> t_.chunk_shift) * 3 * sizeof(uint32_t);
  commit_footprint({"the KV block table (" + std::to_string(blocks) + " blocks x " +
                        std::to_string(static_cast<uint64_t>(per_block)) + " bytes)",
                    knob, double(blocks) * per_block + map});
}

// Tier i of hardware.tiers: its device, codecs, wear model and the blocks
// its capacity holds once any weights it keeps are taken off.
void KvStore::add_tier(size_t i) {
  const LlmSpec& model = s_.model;
  const Hardware& hw = s_.hw;
  const double bb = static_cast<double>(t_.block_bytes);
  const size_t d = static_cast<size_t>(hw.device_index(hw.tiers[i]));
  s_.tier_dev.push_back(d);
  double cap = hw.devices[d].model->capacity_bytes();
  std::string why, held;  // held: what the device keeps besides KV, for a kv_capacity above the rest
  if (d == s_.gpu_dev) {
    s_.gpu_tier = true;
    // With policies.weights, the GPU keeps its share of the weights and
    // the buffers streamed layers land in.
    const double w = s_.gpu_weight_bytes();
    cap -= w;
    why = " after " + std::to_string(w / 1e9) + " GB of weights";
    held = " after reserved_GB and " + std::to_string(w / 1e9) + " GB of weights";
  } else if (s_.tier_weight_bytes(i) > 0) {
    // Host memory and disk hold the weights' other shares (DRAM also the
    // buffer disk weights pass through); KV gets the rest.
    const double w = s_.tier_weight_bytes(i);
    cap -= w;
    why = " after " + std::to_string(w / 1e9) + " GB of weights (policies.weights)";
    held = why;
  }
  // hardware.kv_capacity: the room given, within what the device holds.
  cap = kv_room_bytes(hw.kv_capacity, hw.tiers[i], cap, double(model.kv_bytes_per_token()) * s_.bt, held);
  TierInfo ti;
  ti.name = hw.tiers[i];
  ti.kind = hw.devices[d].kind;
  // A tier that stores blocks compressed holds proportionally more of them.
  double frac = 0;
  const uint32_t L = s_.kv_layers();  // whole-model blocks: one codec per tier (the same at every layer)
  for (uint32_t l = 0; l < L; ++l) {
    // policies.weights.compress_cache: group-wise 4-bit KV in every tier.
    s_.codec.push_back(s_.weight_cache_compressed ? s_.weight_cache_codec : s_.pol.compress->spec(static_cast<TierId>(i), l));
    frac += s_.codec.back().stored_fraction() / L;
  }
  ti.capacity_blocks = cap > 0 ? static_cast<uint64_t>(cap / (bb * frac)) : 0;
  // A representative layer (serving.kv_layers): the tier holds every layer's
  // blocks in the full run; the one layer kept gets an Lth of them, so that
  // where it never fills, the full run's L layers never fill it either.
  full_capacity_.push_back(ti.capacity_blocks);
  if (s_.kv_representative) ti.capacity_blocks /= s_.model.layers;
  c_.wear.emplace_back(*hw.devices[d].model);
  if (ti.capacity_blocks == 0)
    throw ConfigError("hardware.devices." + ti.name + ": capacity" + why + " holds no KV block of " +
                      std::to_string(t_.block_bytes) + " bytes (" + std::to_string(s_.bt) + " tokens)");
  t_.tiers.push_back(ti);
}

void KvStore::start(MoveSink& sink) {
  planner_ = &sink;
  set_unit_bytes();
  exclusive_ = s_.pol.evict->exclusive();
  drops_ = s_.pol.evict->drops();
  // Every block's own part of its record (no job, no source, no prediction,
  // in no copy list) is as the table's allocate() left it: nothing moves a
  // block before the run starts.
  predicted_blocks_ = 0;
  copy_lists_.assign(t_.tiers.size(), CopyList{});
  drains_.assign(t_.tiers.size(), {});
  room_waits_.clear();
  for (size_t t = 2; t < copy_lists_.size(); ++t) copy_lists_[t].deeper.assign(t_.size(), ListLinks{});
  c_.peak_blocks.assign(t_.tiers.size(), 0);
}

uint64_t KvStore::unused_prefetch_bytes() const {
  uint64_t bytes = 0;
  for (size_t b = 0; b < t_.size(); ++b)
    if (t_.state[b].predicted)
      bytes += static_cast<uint64_t>(t_.block_bytes * s_.fraction(t_.state[b].predicted_from, t_.layer_of(static_cast<BlockId>(b))));
  return bytes;
}

void KvStore::waste_prefetch(BlockId b) {
  c_.prefetch.wasted_bytes += static_cast<uint64_t>(t_.block_bytes * s_.fraction(t_.state[b].predicted_from, t_.layer_of(b)));
  t_.state[b].predicted = 0;
  --predicted_blocks_;
}

void KvStore::invalidate_copies(BlockId b) {
  for (TierId t = 0; t_.copies(b) != 0; ++t)
    if (t_.has_copy(b, t)) drop_copy(b, t);
}

void KvStore::leave_tier(BlockId b) {
  const TierId t = t_.tier(b);
  invalidate_copies(b);
  s_.pol.evict->on_remove(b, t);
  --t_.tiers[t].used_blocks;
}

void KvStore::drop(BlockId b) {
  leave_tier(b);
  if (t_.state[b].predicted) waste_prefetch(b);  // predicted, never used, and now gone
  t_.tier(b) = kDropped;
  ++c_.dropped_blocks;
}

BlockId KvStore::block(uint32_t seq, uint32_t layer, uint32_t index) {
  const BlockId b = t_.take(seq * t_.layers + layer, index);
  // The pool is sized by what can be live (choose_layout): running out of it is a bug.
  if (b == kNoBlock)
    throw std::logic_error("KV block table: no chunk left for sequence " + std::to_string(seq) + ", layer " +
                           std::to_string(layer) + ", block " + std::to_string(index));
  return b;
}

// A sequence's blocks are created in index order (dropped ones stay
// created), so those past its first never-created block have nothing to
// release: the cost is the request's own blocks, not the longest request's.
void KvStore::release_sequence(uint32_t seq) {
  for (uint32_t l = 0; l < t_.layers; ++l) {
    const uint32_t g = seq * t_.layers + l;
    for (uint32_t i = 0; i < t_.blocks_per_seq_layer; ++i) {
      const BlockId b = t_.block_at(g, i);
      if (t_.tier(b) == kNotCreated) break;
      release(b);
    }
    t_.give_back(g);
  }
}

void KvStore::release(BlockId b) {
  const TierId t = t_.tier(b);
  if (t < t_.tiers.size()) {
    leave_tier(b);
    if (t_.state[b].predicted) waste_prefetch(b);  // predicted, never used, and now gone
  }
  // Nothing moves the new block that takes b's place: it must not wait
  // for b's last job or be read where b's write down started. (A drain of
  // b still in a queue knows b by its creation stamp: claim_drain.)
  BlockState& st = t_.state[b];
  st.job = kNoJob;
  st.src = kNoSource;
  st.predicted_from = 0;
  // b's place goes to a new block: no policy may carry over what it knew of b.
  s_.pol.evict->on_release(b);
  s_.pol.promote->on_release(b, t_);
  s_.pol.prefetch->on_release(b, t_);
  s_.pol.eval->on_release(b, t_);
  t_.tier(b) = kNotCreated;
  t_.last_access(b) = 0;
  t_.access_count(b) = 0;
  t_.mass[b] = t_.last_mass[b] = 0.f;
  t_.created[b] = 0;
  t_.dirty(b) = 0;
}

// Where a lower tier still holds a valid copy, the highest such copy
// becomes b's own again (no bytes move: demote); otherwise b is written to
// the tier below, and its room here stays in use until the write lands (a
// drain). The caller has made room below.
//
// `claimed`: make_room takes this room at once (its tier has no copy and
// no drain it could take, so the drain this write leaves is the one it
// takes next): the drain is handed over as claim_drain hands one over,
// without a trip through the queue.
void KvStore::write_down(BlockId v, TierId from, size_t mark, bool claimed) {
  const TierId to = static_cast<TierId>(from + 1);
  BlockState& st = t_.state[v];
  const JobId before = st.job;
  JobId j = planner_->add(from, to, st.layer, data_bytes(v), before);
  move(v, from, to);
  st.job = j;
  st.dirty = 0;
  ++c_.written_back_blocks;
  // Claimed with no room below waiting for anything: the drain would be
  // handed over at once and leave only this (hand_over): v is read from
  // below from now on, and the room waits for the write. The tier's
  // occupancy is what it was (one block leaves used for draining and comes
  // back), so its peak, which never trails it, stays.
  if (claimed && mark == room_waits_.size()) {
    st.src = kNoSource;
    // Out of the top tier no room below is being made (room_below makes
    // room from tier 1 down), so no write down's `mark` can fall between
    // these waits: the same job twice in a row is one wait (add_dep).
    if (!planner_->done(j) && (from != 0 || room_waits_.empty() || room_waits_.back() != j)) room_waits_.push_back(j);
    return;
  }
  leave_drain(v, from, mark, claimed, before, j);
}

// Out of line: the common write down (claimed, nothing below waited for)
// returns above without the frame a drain needs.
void KvStore::leave_drain(BlockId v, TierId from, size_t mark, bool claimed, JobId before, JobId j) {
  // A reader of a drain reads `from` at once, waiting for nothing. That is
  // right only if v's data is all there: while a move into `from` is still
  // landing (a new token's KV, a write down from above) the write waits for
  // it, and so must the reader, which then reads v after the write, below.
  t_.state[v].src = planner_->done(before) ? from : kNoSource;
  Drain d;
  d.block = v;
  d.created = t_.created[v];
  d.write = j;
  // The room below may itself be waiting for writes further down: this
  // room is free only once the data could land there.
  for (size_t i = mark; i < room_waits_.size(); ++i) {
    const JobId w = room_waits_[i];
    if (planner_->done(w)) continue;
    if (d.n_after < d.after.size()) d.after[d.n_after++] = w;
    else d.after.back() = std::max(d.after.back(), w);  // the latest of the rest (ids grow with time)
  }
  room_waits_.resize(mark);
  ++t_.tiers[from].draining_blocks;
  c_.peak_blocks[from] = std::max(c_.peak_blocks[from], t_.tiers[from].occupied_blocks());
  if (claimed)
    hand_over(from, d);
  else
    drains_[from].emplace_back() = d;
}

void KvStore::reclaim(TierId t) {
  auto& q = drains_[t];
  while (!q.empty()) {
    const Drain& d = q.at(q.front());
    if (!planner_->done(d.write)) return;
    for (uint8_t i = 0; i < d.n_after; ++i)
      if (!planner_->done(d.after[i])) return;
    q.pop_front();
    --t_.tiers[t].draining_blocks;
  }
}

void KvStore::reclaim_drains() {
  for (size_t t = 0; t < drains_.size(); ++t) reclaim(static_cast<TierId>(t));
}

// The oldest drain's room goes to whoever asked: it is usable once its
// writes land. Its block no longer has its data here: a reader waits for
// the write and reads it from below. A block a layer in flight reads here
// (pinned) keeps its room; false if every drain is such a block. A drain
// whose block was released is nobody's: its room goes, whatever block has
// taken that block's place since.
bool KvStore::claim_drain(TierId t) {
  auto& q = drains_[t];
  uint32_t it = q.front();
  while (it != q.kEnd && in_use(q.at(it))) it = q.next(it);
  if (it == q.kEnd) return false;
  hand_over(t, q.at(it));
  q.erase(it);  // after the last read of the drain, which lives in the node erase frees
  return true;
}

// Drain d of tier t gives its room to whoever asked: its writes are what
// that room waits for, and its block is read from below from now on.
void KvStore::hand_over(TierId t, const Drain& d) {
  --t_.tiers[t].draining_blocks;
  if (t_.state[d.block].job == d.write) t_.state[d.block].src = kNoSource;
  if (!planner_->done(d.write)) room_waits_.push_back(d.write);
  for (uint8_t i = 0; i < d.n_after; ++i)
    if (!planner_->done(d.after[i])) room_waits_.push_back(d.after[i]);
}

void KvStore::take_room_waits(std::vector<JobId>& into) {
  for (JobId j : room_waits_) add_dep(into, j);
  room_waits_.clear();
}

bool KvStore::make_room(TierId t) {
  BlockId one;
  VictimCursor c{&one};
  return make_room(t, c, 1);
}

// The policy is asked for `want` victims at a time, which the cursor keeps
// across calls: a tier's copies and drains, once none, stay none while
// room is made for a run, save the drain a victim written down leaves
// here, which is taken before the next victim.
inline bool KvStore::make_room(TierId t, VictimCursor& c, uint32_t want) {
  if (full(t) && !drains_[t].empty()) reclaim(t);
  while (full(t)) {
    if (drop_oldest_copy(t)) continue;
    if (!drains_[t].empty() && claim_drain(t)) continue;
    if (c.used == c.named) {
      flush_moves();
      c.used = 0;
      if (want == 1) {
        c.buf[0] = s_.pol.evict->victim(t);
        c.named = c.buf[0] != kNoBlock;
      } else {
        c.named = s_.pol.evict->victims(t, want, c.buf);
      }
      if (c.named == 0) return false;
    }
    const BlockId v = c.buf[c.used++];
    if (drops_) {
      flush_moves();
      drop(v);
      continue;
    }
    const size_t mark = room_waits_.size();
    if (!room_below(v, t)) {
      c.named = c.used = 0;  // v stays: the next room asks the policy again
      return false;
    }
    // Here t has no copy and no drain that could be taken: the drain a write
    // of v leaves is taken next, unless v is pinned (claim_drain).
    demote(v, t, mark, !t_.pinned(v));
  }
  return true;
}

// Each block of the run in turn: room made in the GPU's tier as make_room
// makes it, then the block read up into it, so that a victim written down
// may take the room below that an earlier block of the run left as a copy.
// What is the same for every block is done once for the run: the policy
// names its victims at once where it can (EvictionPolicy::victims), the
// copy is one transfer, and a policy whose victims do not depend on where
// pinned blocks lie hears of the moves up once room for all of them is
// made (on_move_range). The common case of a block is read_up_common's.
uint32_t KvStore::read_up_run(const BlockId* blocks, uint32_t k, TierId from, uint32_t layer, uint8_t* read) {
  constexpr TierId top = 0;
  TierInfo& src = t_.tiers[from];
  EvictionPolicy& evict = *s_.pol.evict;
  // The run's own moves up: after every other move of the run where the
  // policy's victims do not depend on them, else in their place.
  const bool defer_reads = evict.pinned_moves_commute();
  defer_moves_ = true;
  RunState r;
  const double whole_blocks = s_.tokens_unit ? 0.0 : whole_block_bytes_;  // each block's bytes, if all alike
  run_waits_.clear();
  moved_.clear();
  VictimCursor victims{victims_.data()};
  // read_up_common's preconditions that hold for the whole run (the top
  // tier never holds a copy; a copy list's ends fit its locals).
  const size_t nt = t_.tiers.size();
  const bool common = !drops_ && !exclusive_ && whole_blocks != 0 && copy_lists_[top].tail == kNoBlock && nt >= 2 &&
                      nt <= kMaxCopyTiers;
  for (uint32_t i = 0; i < k; ++i) {
    if (common && r.m > 0 && drains_[top].empty()) {
      i = nt == 2 ? read_up_common<true>(blocks, i, k, from, read, victims, r, defer_reads, whole_blocks)
                  : read_up_common<false>(blocks, i, k, from, read, victims, r, defer_reads, whole_blocks);
      if (i == k) break;
    }
    read[i] = make_room(top, victims, std::min<uint32_t>(k - i, kVictimBatch));
    if (!read[i]) continue;
    const BlockId b = blocks[i];
    // Pinned (a layer in flight reads it), so no room made above moved it.
    BlockState& mo = t_.state[b];
    if (mo.tier != from) throw std::logic_error("KV store: a block of a run read up left its tier while room was made");
    // The copy opens where the first block's read would have opened it;
    // whole blocks join it once their rooms are made, a part of one (the
    // tokens a sequence's last block holds) at once.
    if (r.m == 0 || whole_blocks == 0) {
      r.j = planner_->add(from, top, layer, data_bytes(b), mo.job);
    } else {
      if (mo.job != kNoJob && (run_waits_.empty() || run_waits_.back() != mo.job)) run_waits_.push_back(mo.job);
    }
    ++r.m;
    mo.job = r.j;
    mo.src = kNoSource;
    mo.tier = top;
    count_use(top);
    if (defer_reads)
      hold_move(moved_, b, from, top);
    else
      tell_move(b, from, top);
    // The copy b leaves keeps its room in `from` (its count and so its
    // peak, which no count ever exceeds, stay as they are).
    if (exclusive_)
      --src.used_blocks;
    else
      link_copy(b, from);
  }
  // Every whole block read up after the first joined its copy.
  const uint32_t joined = whole_blocks != 0 && r.m > 1 ? r.m - 1 : 0;
  if (joined > 0) planner_->add_run(from, top, layer, whole_blocks, joined, run_waits_.data(), run_waits_.size());
  defer_moves_ = false;
  flush_moves();
  tell_ranges(moved_);
  return r.m;
}

// read_up_run's loop for blocks i, i + 1, ... while each is the common
// case: the GPU's room is made by demoting victims the policy has already
// named, each to its valid copy below (no bytes move) or, with none,
// written down into tier 1 as far as room there is free or its oldest
// copies leave it; then the block joins the run's copy. It does what
// make_room and the loop's body do, in the same order, with what they
// change for every block (two tiers' counts and peaks, the copy lists'
// ends, the held moves, the counters) in locals, stored back once: a store
// into a block's record (a byte, which may alias anything) otherwise makes
// the compiler load each of them again, and the run's cost per block was
// twice what it is. Returns the first block it leaves to the general path
// (a victim not yet named, a predicted or pinned victim, room in tier 1
// only a drain or a victim there could make, a drain in the GPU's tier),
// which finds the state as this left it, a room part made included.
template <bool kTwoTiers>
uint32_t KvStore::read_up_common(const BlockId* blocks, uint32_t i, uint32_t k, TierId from, uint8_t* read,
                                 VictimCursor& vc, RunState& r, bool defer_reads, double whole_bytes) {
  BlockState* const st = t_.state.data();
  TierInfo& top = t_.tiers[0];
  // Full while used + draining >= capacity, with draining fixed here: the
  // peak is the most used plus draining.
  const uint64_t draining = top.draining_blocks;
  const uint64_t limit = top.capacity_blocks > draining ? top.capacity_blocks - draining : 0;
  uint64_t used = top.used_blocks, most_used = 0;
  const size_t nt = t_.tiers.size();
  // The copy lists' ends: tier 1's in scalars, the deeper tiers' (none
  // with two tiers, where every copy is in tier 1) in arrays.
  BlockId head1 = copy_lists_[1].head, tail1 = copy_lists_[1].tail;
  BlockId head[kMaxCopyTiers], tail[kMaxCopyTiers];
  ListLinks* deeper[kMaxCopyTiers];
  if constexpr (!kTwoTiers)
    for (size_t t = 2; t < nt; ++t) {
      head[t] = copy_lists_[t].head;
      tail[t] = copy_lists_[t].tail;
      deeper[t] = copy_lists_[t].deeper.data();
    }
  auto head_of = [&](TierId t) -> BlockId& {
    if constexpr (kTwoTiers) return head1;
    else return t == 1 ? head1 : head[t];
  };
  auto tail_of = [&](TierId t) -> BlockId& {
    if constexpr (kTwoTiers) return tail1;
    else return t == 1 ? tail1 : tail[t];
  };
  auto node = [&](BlockId b, TierId t) -> ListLinks& {
    if constexpr (kTwoTiers) return st[b].copy1;
    else return t == 1 ? st[b].copy1 : deeper[t][b];
  };
  // unlink_copy's and link_copy's list part.
  auto unlink = [&](BlockId b, TierId t) {
    unlink_copy_node([&](BlockId x) -> ListLinks& { return node(x, t); }, head_of(t), tail_of(t), b);
  };
  // Tier 1, where a victim with no copy is written (make_room of tier 1
  // drops its oldest copies; anything else is the general path's).
  TierInfo& below = t_.tiers[1];
  const uint64_t capacity1 = below.capacity_blocks, draining1 = below.draining_blocks;
  uint64_t used1 = below.used_blocks, peak1 = c_.peak_blocks[1];
  const bool drains1_empty = drains_[1].empty();
  const uint64_t pin_stamp = t_.pin_stamp;
  uint64_t copies_dropped = 0;
  // The victims written down, in turn: their writes are handed to the
  // planner once the loop is left, so that it makes no call.
  BlockId written[kVictimBatch];
  uint32_t n_written = 0;
  // The moves held for the policy: the range each queue's last one would
  // continue, pushed once a move does not continue it (hold_move).
  // (No key is all ones: an id is below 2^32 and a tier below 2^8.)
  struct Held {
    std::vector<MoveRange>* q;
    MoveRange last{~uint64_t(0), 0};
    void open() {
      if (!q->empty()) {
        last = q->back();
        q->pop_back();
      }
    }
    void add(uint64_t key) {
      if (last.next == key) {
        ++last.next;
        ++last.n;
        return;
      }
      if (last.n != 0) q->push_back(last);
      last = MoveRange{key + 1, 1};
    }
    void close() {
      if (last.n != 0) q->push_back(last);
    }
  };
  Held pend{&pending_moves_}, moved{&moved_};
  pend.open();
  if (defer_reads) moved.open();
  const bool predictions = predicted_blocks_ != 0;
  const uint32_t named = vc.named, first_victim = vc.used;
  uint32_t next = vc.used;
  const BlockId* const buf = vc.buf;
  const JobId j = r.j;
  JobId last_wait = run_waits_.empty() ? kNoJob : run_waits_.back();
  const uint64_t read_key = move_key(0, from, 0);
  uint32_t m = r.m;
  for (; i < k; ++i) {
    while (used >= limit) {
      if (next == named) goto out;
      const BlockId v = buf[next];
      BlockState& sv = st[v];
      const uint8_t cp = sv.copies;
      if (predictions && sv.predicted) goto out;
      if (cp != 0) {
        ++next;
        // demote: the highest valid copy below becomes v's own (unlink_copy).
        const TierId c = kTwoTiers ? 1 : static_cast<TierId>(__builtin_ctz(cp >> 1) + 1);
        unlink(v, c);
        sv.copies = static_cast<uint8_t>(cp & ~(1u << c));
        --used;
        sv.tier = c;
        pend.add(move_key(v, 0, c));
        continue;
      }
      // write_down, claimed (v is not pinned), into room tier 1's oldest
      // copies leave (make_room of tier 1 as far as it drops copies).
      if (pin_stamp != 0 && sv.last_access >= pin_stamp) goto out;
      if (used1 + draining1 >= capacity1 && !drains1_empty) goto out;
      while (used1 + draining1 >= capacity1) {
        const BlockId old = tail1;
        if (old == kNoBlock) goto out;
        unlink(old, 1);
        st[old].copies = static_cast<uint8_t>(st[old].copies & ~2u);
        --used1;
        ++copies_dropped;
      }
      ++next;
      --used;
      sv.tier = 1;
      ++used1;
      peak1 = std::max(peak1, used1 + draining1);
      pend.add(move_key(v, 0, 1));
      sv.dirty = 0;
      // Claimed with no room below waiting (write_down): read from below
      // from now on, the room waits for the write (below, once the loop
      // is left: nothing here reads v's job again, and no other move is
      // handed to the planner meanwhile, so its writes keep their order).
      sv.src = kNoSource;
      written[n_written++] = v;
    }
    {
      const BlockId b = blocks[i];
      BlockState& mo = st[b];
      if (mo.tier != from) goto out;  // the general path says what went wrong
      if (mo.job != kNoJob && mo.job != last_wait) {
        run_waits_.push_back(mo.job);
        last_wait = mo.job;
      }
      ++m;
      mo.job = j;
      mo.src = kNoSource;
      mo.tier = 0;
      ++used;
      most_used = std::max(most_used, used);
      if (defer_reads)
        moved.add(read_key | b);
      else
        pend.add(read_key | b);
      // link_copy(b, from)
      mo.copies = static_cast<uint8_t>(mo.copies | (1u << from));
      push_front_copy([&](BlockId x) -> ListLinks& { return node(x, from); }, head_of(from), tail_of(from), b);
      read[i] = 1;
    }
  }
out:
  for (uint32_t x = 0; x < n_written; ++x) {
    BlockState& sv = st[written[x]];
    const JobId w = planner_->add(0, 1, sv.layer, whole_bytes, sv.job);
    sv.job = w;
    if (!planner_->done(w) && (room_waits_.empty() || room_waits_.back() != w)) room_waits_.push_back(w);
  }
  top.used_blocks = used;
  if (most_used != 0) c_.peak_blocks[0] = std::max(c_.peak_blocks[0], most_used + draining);
  c_.demoted_blocks += next - first_victim;  // every victim taken here was demoted
  below.used_blocks = used1;
  c_.peak_blocks[1] = peak1;
  c_.copies_dropped += copies_dropped;
  c_.written_back_blocks += n_written;
  copy_lists_[1].head = head1;
  copy_lists_[1].tail = tail1;
  if constexpr (!kTwoTiers)
    for (size_t t = 2; t < nt; ++t) {
      copy_lists_[t].head = head[t];
      copy_lists_[t].tail = tail[t];
    }
  pend.close();
  if (defer_reads) moved.close();
  vc.used = next;
  r.m = m;
  return i;
}

void KvStore::enforce_budget(uint32_t seq, uint32_t layer) {
  BlockId v;
  while ((v = s_.pol.evict->budget_victim(seq, layer)) != kNoBlock) {
    const TierId t = t_.tier(v);
    const size_t mark = room_waits_.size();
    if (drops_ || !room_below(v, t))
      drop(v);
    else
      demote(v, t, mark);
  }
}

TierId KvStore::allocate(BlockId b, uint32_t final_blocks) {
  TierId t = s_.pol.place->place_in(b, final_blocks, t_);
  if (t >= t_.tiers.size()) throw std::logic_error("placement policy returned a tier that does not exist");
  static const bool skip_room = planted_fault("allocate_without_room");  // shows the invariant checker at work
  while (!skip_room && !make_room(t)) {
    if (t + 1u >= t_.tiers.size())
      throw ConfigError("hardware.tiers: no room for a new KV block in any tier (all blocks pinned or tiers full)");
    ++t;
  }
  t_.tier(b) = t;
  t_.state[b].layer = static_cast<uint16_t>(t_.layer_of(b));  // models have at most 4,096 layers
  t_.created[b] = t_.clock;
  t_.dirty(b) = 1;
  count_use(t);
  s_.pol.evict->on_insert(b, t);
  if (!defer_budget_) enforce_budget(t_.seq_of(b), t_.layer_of(b));
  return t_.tier(b);
}

void KvStore::background_demotion() {
  const size_t nt = t_.tiers.size();
  for (size_t t = 0; t + 1 < nt; ++t) {
    const double w = s_.pol.evict->watermark(static_cast<TierId>(t));
    if (w >= 1.0) continue;
    const uint64_t limit = static_cast<uint64_t>(w * static_cast<double>(t_.tiers[t].capacity_blocks));
    // Blocks already being written down are on their way out: the
    // watermark counts what stays.
    while (t_.tiers[t].used_blocks > limit) {
      // Copies kept for blocks above count as use too, and go first.
      if (drop_oldest_copy(static_cast<TierId>(t))) continue;
      BlockId v = s_.pol.evict->victim(static_cast<TierId>(t));
      const size_t mark = room_waits_.size();
      if (v == kNoBlock || !room_below(v, static_cast<TierId>(t))) break;
      demote(v, static_cast<TierId>(t), mark);
    }
  }
}

void KvStore::open_occupancy(Timeline& timeline) {
  timeline_ = &timeline;
  occupancy_track_.clear();
  if (timeline.enabled())
    for (const auto& ti : t_.tiers) occupancy_track_.push_back(timeline.counter_track(ti.name + " occupancy", "bytes"));
  occupancy_value_.assign(occupancy_track_.size(), -1.0);
}

// Sampled at every flush (after each layer's selection, append and
// background demotion); of several samples at one instant the last one's
// values are written.
void KvStore::sample_occupancy(double now) {
  if (!timeline_ || !timeline_->enabled()) return;
  if (now > occupancy_t_) close_occupancy();
  occupancy_t_ = now;
  for (size_t t = 0; t < t_.tiers.size(); ++t)
    occupancy_value_[t] = double(t_.tiers[t].occupied_blocks()) * double(t_.block_bytes) * s_.represented_layers();
}

void KvStore::close_occupancy() {
  for (size_t t = 0; t < occupancy_track_.size(); ++t)
    if (occupancy_value_[t] >= 0) timeline_->counter(occupancy_track_[t], occupancy_t_, occupancy_value_[t]);
}

}  // namespace kvtier
