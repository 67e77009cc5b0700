#include "sim/serving/serving.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <stdexcept>

#include "sim/core/config.h"
#include "sim/core/progress.h"
#include "sim/core/timeline.h"
#include "sim/engine/engine_metrics.h"
#include "sim/engine/invariants.h"
#include "sim/engine/kernel_cost.h"
#include "sim/engine/layer_pipeline.h"
#include "sim/engine/paged_pipeline.h"
#include "sim/kv/kv_store.h"
#include "sim/platform/collective.h"
#include "sim/platform/job_watch.h"
#include "sim/platform/pipeline_stages.h"
#include "sim/platform/platform.h"
#include "sim/platform/sim_clock.h"
#include "sim/platform/streams.h"
#include "sim/platform/transfer_planner.h"
#include "sim/platform/wakeup.h"
#include "sim/platform/weight_stream.h"
#include "sim/serving/prefix_cache.h"
#include "sim/serving/serving_energy.h"
#include "sim/serving/serving_metrics.h"
#include "traces/synthetic.h"

namespace kvtier {

ServingSimulation::~ServingSimulation() = default;

// serving.attention: a request's attention when it is admitted, from its own
// synthetic generator (its prompt and output lengths; seeded sim.seed + its
// id), dropped when it finishes.
AttentionSource* ServingSimulation::attention_of(const ServingRequest& r) {
  if (attention_cfg_.empty() || r.output_tokens < 2) return nullptr;
  std::unique_ptr<AttentionSource>& a = attention_[r.id];
  if (!a) {
    json p = attention_cfg_;
    p.erase("kind");
    a = std::make_unique<SyntheticAttention>(p, "serving.attention", s_.model.layers, r.input_tokens, r.output_tokens - 1,
                                             limits_.block_tokens, seed_ + r.id);
  }
  return a.get();
}

// Each tier's KV now (the GPU's pool, the prefix cache, the swap space, or
// the block table's tiers): its time-weighted area and peak.
void ServingSimulation::sample_occupancy() {
  const double now = sim_now();
  for (size_t t = 0; t < occ_now_.size(); ++t) occ_area_[t] += occ_now_[t] * (now - occ_t_);
  occ_t_ = now;
  const double kv_blk = double(s_.model.kv_bytes_per_token()) * limits_.block_tokens;
  std::fill(occ_now_.begin(), occ_now_.end(), 0.0);
  if (kv_)
    for (size_t t = 0; t < occ_now_.size(); ++t)
      occ_now_[t] = double(kv_->table().tiers[t].occupied_blocks()) * double(kv_->table().block_bytes) *
                    s_.represented_layers();  // between iterations every layer holds what layer 0 does
  else
    occ_now_[0] = double(sched_->used_blocks()) * kv_blk;
  for (uint32_t u = 0; u < cache_->tiers(); ++u) occ_now_[u + 1] += cache_->used_bytes(u);
  if (swap_dev_ >= 0)
    for (size_t t = 1; t < s_.tier_dev.size(); ++t)
      if (static_cast<int>(s_.tier_dev[t]) == swap_dev_) occ_now_[t] += double(sched_->swapped_blocks()) * kv_blk;
  for (size_t t = 0; t < occ_now_.size(); ++t) {
    occ_peak_[t] = std::max(occ_peak_[t], occ_now_[t]);
    if (timeline_->enabled()) timeline_->counter(occ_track_[t], now, occ_now_[t]);
  }
}

void ServingSimulation::iteration(const IterationPlan& p, uint64_t index, bool more_after) {
  const double now = sim_now();
  for (const IterationItem& it : p.items)
    if (reqs_[it.req].first_scheduled_s < 0) {
      reqs_[it.req].first_scheduled_s = now;
      if (on_schedule_) on_schedule_(it.req);
    }
  if (tiered_) tiered_iteration(p, index, more_after);
  else paged_iteration(p, index, more_after);
}

// The paged pool: the swaps the scheduler decided (whole sequences, all
// layers), the prefix hits to load, and the kernel's shape, run by the
// paged pipeline.
void ServingSimulation::paged_iteration(const IterationPlan& p, uint64_t index, bool more_after) {
  const double kv_blk = double(s_.model.kv_bytes_per_token()) * limits_.block_tokens;
  PagedIteration it;
  it.index = index;
  it.more_after = more_after;
  it.computed_tokens = p.computed_tokens;
  for (uint32_t id : p.swapped_out) {
    it.swap_out.push_back(double(reqs_[id].gpu_blocks) * kv_blk);
    swap_bytes_ += it.swap_out.back();
    ++swapped_out_;
  }
  for (uint32_t id : p.swapped_in) {
    it.swap_in.push_back(double(sched_->blocks_for(reqs_[id].ctx - 1)) * kv_blk);
    swap_bytes_ += it.swap_in.back();
    ++swapped_in_;
  }
  recomputed_ += p.recomputed.size();
  for (uint32_t id : p.recomputed)
    if (id < push_of_.size() && push_of_[id]) {
      KvPush& push = *push_of_[id];
      // Whole iterations counted so far (every stage has run them): tokens of every layer.
      push.skip = push.stages[0].computed / push.stages[0].layers;
      push.started = false;
    }
  for (uint32_t id : p.pulled_in)
    it.pulls.push_back({static_cast<size_t>(pull_from_[id]), double(sched_->blocks_for(reqs_[id].input_tokens)) * kv_blk});
  cache_->plan_loads(p, reqs_, it);
  it.seqs.reserve(p.items.size());
  for (const IterationItem& item : p.items) {
    it.seqs.push_back(KernelSeq{item.past, item.tokens, item.prefill, item.prefill && item.completes_prefill});
    if (item.prefill && item.req < push_of_.size() && push_of_[item.req]) {
      // The chunk's KV, each layer's as it is computed; with the first chunk
      // the prefix found in place (its KV is part of what the decode
      // instance needs), with the last the rest of the last block (whole
      // blocks move, as a pull moves them).
      KvPush& push = *push_of_[item.req];
      uint64_t tokens = item.tokens;
      if (!push.started) tokens += item.past;
      push.started = true;
      if (item.completes_prefill) {
        const ServingRequest& r = reqs_[item.req];
        tokens += sched_->blocks_for(r.input_tokens) * limits_.block_tokens - r.input_tokens;
      }
      // A prompt recomputed after preemption sends none of its KV twice.
      const uint64_t again = std::min(tokens, push.skip);
      push.skip -= again;
      if (tokens > again) it.pushes.push_back(PushChunk{&push, static_cast<uint32_t>(tokens - again)});
    }
  }
  if (paged_->run(it)) ++layered_iterations_;
  for (uint32_t id : p.pulled_in) reqs_[id].first_token_s = paged_->moved_in_s();
  ++iterations_;
}

// A request's KV lives in a block-table sequence from its first iteration
// until it finishes or is recomputed: the lowest one free, so that a run is
// the same whatever ran before.
uint32_t ServingSimulation::take_slot(uint32_t id) {
  if (slot_of_[id] != kNoSlot) return slot_of_[id];
  if (free_slots_.empty())
    throw std::logic_error("serving: more requests hold KV than serving.max_running allows");
  std::pop_heap(free_slots_.begin(), free_slots_.end(), std::greater<uint32_t>());
  slot_of_[id] = free_slots_.back();
  free_slots_.pop_back();
  const ServingRequest& r = reqs_[id];
  pipeline_->expect(slot_of_[id], uint64_t(r.input_tokens) + r.output_tokens);
  return slot_of_[id];
}

// Its blocks leave every tier and the sequence is free for another request.
void ServingSimulation::give_back_slot(uint32_t id) {
  if (slot_of_[id] == kNoSlot) return;
  pipeline_->release(slot_of_[id]);
  free_slots_.push_back(slot_of_[id]);
  std::push_heap(free_slots_.begin(), free_slots_.end(), std::greater<uint32_t>());
  slot_of_[id] = kNoSlot;
}

// serving.kv "tiered": the iteration runs through the layer pipeline, which
// selects, fetches, computes and appends layer by layer as in decode.
void ServingSimulation::tiered_iteration(const IterationPlan& p, uint64_t index, bool more_after) {
  for (uint32_t id : p.recomputed) give_back_slot(id);  // its KV is dropped; prefill computes it again
  recomputed_ += p.recomputed.size();
  std::vector<LayerPipeline::IterationSeq> seqs;
  seqs.reserve(p.items.size());
  if (cached_tokens_.size() < p.items.size()) cached_tokens_.resize(p.items.size());
  for (size_t i = 0; i < p.items.size(); ++i) {
    const IterationItem& it = p.items[i];
    ServingRequest& r = reqs_[it.req];
    LayerPipeline::IterationSeq q{take_slot(it.req), it.past, it.tokens, it.prefill, it.prefill && it.completes_prefill};
    q.attention = attention_of(r);
    // A prompt admitted with prefix hits reads them from the cache's tiers.
    cache_->take_loads(it, r, cached_tokens_[i]);
    if (!cached_tokens_[i].empty()) {
      q.cached_tokens = &cached_tokens_[i];
      q.cached_after = cache_->last_write();
    }
    if (!it.prefill) {
      q.step = it.past - r.input_tokens;  // 0: the first token after the one prefill produced
      q.predict = q.step + 2 < r.output_tokens;
    }
    seqs.push_back(q);
  }
  pipeline_->run_iteration(index, seqs, more_after);
  ++layered_iterations_;
  ++iterations_;
}

// With invariants checked (sim/engine/invariants.h): the pool and the swap space
// within their sizes, the blocks held by requests adding up to the pool's
// use, time never going back.
void ServingSimulation::check_iteration(double now) {
  auto fail = [&](const std::string& what) {
    throw InvariantError("invariant violated at simulated time " + std::to_string(now) + " s, iteration " +
                         std::to_string(iterations_) + ": " + what);
  };
  if (now < last_check_t_) fail("time went back from " + std::to_string(last_check_t_));
  last_check_t_ = now;
  if (sched_->used_blocks() > limits_.gpu_blocks)
    fail("the GPU's KV pool holds " + std::to_string(sched_->used_blocks()) + " blocks, above its " +
         std::to_string(limits_.gpu_blocks));
  if (sched_->swapped_blocks() > limits_.swap_blocks)
    fail("swapped-out KV takes " + std::to_string(sched_->swapped_blocks()) + " blocks, above the swap space's " +
         std::to_string(limits_.swap_blocks));
  uint64_t held = 0;
  for (const ServingRequest& r : reqs_)
    if (r.state == ServingRequest::State::Running || r.state == ServingRequest::State::Incoming)
      held += r.gpu_blocks + r.held_blocks;
    else if (r.state != ServingRequest::State::Swapped && r.gpu_blocks != 0)
      fail("request " + std::to_string(r.id) + " holds " + std::to_string(r.gpu_blocks) + " GPU blocks but is not running");
    else held += r.held_blocks;  // finished, its KV still streaming out
  if (cache_->has_gpu() && cache_->gpu_pool_blocks() > limits_.gpu_blocks - sched_->used_blocks())
    fail("the GPU's prefix cache keeps " + std::to_string(cache_->gpu_pool_blocks()) + " pool blocks, more than the " +
         std::to_string(limits_.gpu_blocks - sched_->used_blocks()) + " free");
  if (held != sched_->used_blocks())
    fail("running, incoming and streaming requests hold " + std::to_string(held) + " blocks, the pool counts " +
         std::to_string(sched_->used_blocks()));
}

void ServingSimulation::drive() {
  sched_ = std::make_unique<Scheduler>(limits_, reqs_, [this](ServingRequest& r) { return cache_->lookup(r); });
  size_t next = 0;
  uint64_t done = 0;
  const bool check = invariants_requested();
  // Progress through the arrivals' span of simulated time (requests done
  // where every request arrives at once); it holds at the end while the
  // last requests finish.
  const double span = reqs_.empty() ? 0.0 : reqs_.back().arrival_s;
  Progress progress("serving", span > 0 ? span : static_cast<double>(reqs_.size()),
                    span > 0 ? "simulated seconds of arrivals" : "requests");
  // Fed by a router, requests keep coming until it closes.
  // A prefill instance streaming KV out runs until the last layer has left
  // (its blocks are held until then, and its streams carry them).
  while (done < reqs_.size() || (fed_ && !closed_) || sched_->held_blocks() > 0) {
    const double now = sim_now();
    if (!fed_) progress.update(span > 0 ? std::min(now, span) : static_cast<double>(done));
    while (next < reqs_.size() && reqs_[next].arrival_s <= now) {
      if (next < pull_from_.size() && pull_from_[next] >= 0) sched_->arrive_prefilled(static_cast<uint32_t>(next++));
      else if (next < streamed_in_.size() && streamed_in_[next]) sched_->arrive_streamed(static_cast<uint32_t>(next++));
      else sched_->arrive(static_cast<uint32_t>(next++));
    }
    if (sched_->idle()) {
      wait_for_arrival(next);
      continue;
    }
    // What the running sequences took from the pool since is no longer cached there.
    cache_->trim_gpu(limits_.gpu_blocks - sched_->used_blocks());
    const IterationPlan& p = sched_->plan();
    if (on_reserved_ && !p.reserved.empty()) {
      for (uint32_t id : p.reserved) on_reserved_(id);
      sample_occupancy();  // the reserved blocks count in the pool's use from now
    }
    if (p.items.empty()) {
      // Nothing fits now (the pool is held by sequences that cannot grow):
      // only an arrival can change that, or KV streaming in or out; with
      // none left the trace cannot be served.
      if (next >= reqs_.size() && (!fed_ || closed_) && sched_->held_blocks() == 0 && sched_->awaiting_kv() == 0)
        throw ConfigError("serving: the GPU's KV pool (" + std::to_string(limits_.gpu_blocks) +
                          " blocks) cannot hold the running sequences; raise memory or lower serving.max_running");
      wait_for_arrival(next);
      continue;
    }
    if (record_iterations_) iteration_rows_.push_back(planned_row(p, now));
    // Whether requests remain after this iteration (weights for the next one may load during its last layer).
    iteration(p, iterations_, done + sched_->finishing() < reqs_.size() || (fed_ && !closed_));
    after_iteration(p, done);
    if (record_iterations_) {
      iteration_rows_.back().end_s = sim_now();
      iteration_rows_.back().tier_bytes = occ_now_;
    }
    if (check) check_iteration(sim_now());
  }
  planner_->stop();
}

void ServingSimulation::wait_for_arrival(size_t next) {
  if (next < reqs_.size()) sim_sleep_until(reqs_[next].arrival_s);
  else wakeup_->wait();  // fed: the router's next hand-over (or its close)
}

// Prompts whose prefill completed are written down (write-through); requests
// that finished leave the GPU, their prompt blocks kept in its pool; what
// the cache inserted moves.
void ServingSimulation::after_iteration(const IterationPlan& p, uint64_t& done) {
  const double end = sim_now();
  const bool write_through = cache_->write_through();
  for (const IterationItem& it : p.items) {
    if (write_through && it.completes_prefill && reqs_[it.req].generated == 0) cache_->write_down(reqs_[it.req]);
    if (it.completes_prefill && it.req < queued_of_.size() && queued_of_[it.req].layer_s > 0) {
      queued_prefill_layer_s_ -= queued_of_[it.req].layer_s;
      queued_prefill_ends_s_ -= queued_of_[it.req].ends_s;
      queued_of_[it.req] = QueuedPrefill{};
    }
  }
  for (uint32_t id : sched_->complete(end)) {
    ++done;
    if (fed_) {
      outstanding_tokens_ -= uint64_t(reqs_[id].input_tokens) + reqs_[id].output_tokens;
      --unfinished_;
    }
    if (pipeline_) give_back_slot(id);
    if (!attention_.empty()) attention_[id].reset();
    if (!write_through) cache_->write_down(reqs_[id]);
    cache_->free_to_gpu(reqs_[id]);
    if (on_finish_) on_finish_(id);
  }
  cache_->trim_gpu(limits_.gpu_blocks - sched_->used_blocks());
  cache_->submit_moves(*planner_, s_.gpu_dev);
  sample_occupancy();
}

// iterations.csv's row as the plan leaves it: the iteration's work and the
// queues (running: admitted and resumed requests, those the iteration
// finishes among them); its end and each tier's KV once it has run.
IterationRow ServingSimulation::planned_row(const IterationPlan& p, double start) const {
  IterationRow row;
  row.start_s = start;
  row.batch = static_cast<uint32_t>(p.items.size());
  for (const IterationItem& it : p.items) (it.prefill ? row.prefill_tokens : row.decode_tokens) += it.tokens;
  row.running = static_cast<uint32_t>(sched_->running());
  row.waiting = static_cast<uint32_t>(sched_->waiting());
  row.swapped = static_cast<uint32_t>(sched_->swapped());
  return row;
}

// The platform, the timeline's tracks and the transfer planner's streams.
void ServingSimulation::start_engines(const std::string& timeline_path) {
  owned_platform_ = std::make_unique<Platform>(s_.hw, *s_.topo);
  // Paged KV moves whole sequences' blocks (all layers); tiered KV a layer's block at a time.
  owned_platform_->set_request_bytes(tiered_ ? double(kv_->table().block_bytes)
                                             : double(s_.model.kv_bytes_per_token()) * limits_.block_tokens);
  owned_timeline_ = std::make_unique<Timeline>();
  if (!timeline_path.empty()) owned_timeline_->open(timeline_path);
  platform_ = owned_platform_.get();
  timeline_ = owned_timeline_.get();
  attach_engines(true);
}

void ServingSimulation::attach(Platform& platform, Timeline& timeline) {
  platform_ = &platform;
  timeline_ = &timeline;
  wakeup_ = std::make_unique<Wakeup>();
  attach_engines(false);
  start_pipelines();
}

// `own_links`: the run's own platform, whose links' tracks come after its GPU's.
void ServingSimulation::attach_engines(bool own_links) {
  board_ = std::make_unique<JobBoard>();
  gpu_track_ = timeline_->track(Timeline::Streams, s_.hw.gpu + " compute");
  if (own_links)
    for (auto& st : platform_->stats()) st.track = timeline_->track(Timeline::Links, st.name);
  if (timeline_->enabled())
    for (const auto& name : s_.hw.tiers)
      occ_track_.push_back(timeline_->counter_track(fed_ ? s_.hw.gpu + ": " + name + " occupancy" : name + " occupancy", "bytes"));
  occ_area_.assign(s_.hw.tiers.size(), 0.0);
  occ_peak_.assign(s_.hw.tiers.size(), 0.0);
  occ_now_.assign(s_.hw.tiers.size(), 0.0);
  planner_ = std::make_unique<TransferPlanner>(s_, c_, *platform_, *board_, *timeline_);
  std::vector<std::pair<size_t, size_t>> pulls;
  for (size_t d : pull_devices_) pulls.emplace_back(d, s_.gpu_dev);
  for (size_t d : push_devices_) pulls.emplace_back(s_.gpu_dev, d);
  pulls.insert(pulls.end(), pool_pairs_.begin(), pool_pairs_.end());
  for (const auto& [dev, tier] : pool_drives_) planner_->wears_as(dev, tier);
  if (pooled_) {
    planner_->streams_on_demand();  // demotions between other members' shares
    cache_->pool_board(*board_);
  }
  if (!rank_devices_.empty()) planner_->mirror(rank_devices_);
  planner_->fold_ranks(fold_ranks_);
  planner_->make_streams(pulls);
  planner_->start();
}

void ServingSimulation::start_pipelines() {
  if (tiered_) {
    // Before any transfer is submitted: the checker counts them.
    if (invariants_requested()) checker_ = std::make_unique<InvariantChecker>(s_, *kv_, *board_, *platform_);
    kv_->start(*planner_);
    c_.hits.assign(s_.tiers() + 1, 0);
    pipeline_ = std::make_unique<LayerPipeline>(s_, c_, *kv_, *planner_, *platform_, *board_, *timeline_, gpu_track_);
    pipeline_->check_with(checker_.get());
    pipeline_->set_coarsen(coarsen_);
  } else {
    paged_ = std::make_unique<PagedPipeline>(s_, c_, *planner_, *platform_, *board_, *timeline_, gpu_track_, swap_dev_,
                                             limits_.block_tokens, coarsen_);
    paged_->run_on_stages(stages_);
  }
}

json ServingSimulation::run(const std::string& timeline_path) {
  start_simgrid();
  start_engines(timeline_path);
  start_pipelines();
  run_simulation(platform_->controller(), s_.hw.gpu + " compute", [this] { drive(); });
  const double end = sim_now();
  check_end();
  checker_.reset();
  sample_occupancy();
  timeline_->close();
  if (s_.kv_representative && !pipeline_->representative_why().empty())
    std::cerr << "kvtier: warning: serving.kv_layers \"representative\" is not exact for this run ("
              << pipeline_->representative_why()
              << "); it models per-layer KV memory (each layer its own Lth of every tier and eviction order), "
                 "result.json's representative_layer says so\n";
  return metrics(end);
}

void ServingSimulation::serve() { drive(); }

void ServingSimulation::tensor_parallel(std::vector<size_t> gpus, double allreduce_bytes_per_token, bool through_switch,
                                        std::vector<std::vector<size_t>> rank_devices) {
  s_.tp_gpus = std::move(gpus);
  s_.tp_allreduce_bytes_per_token = allreduce_bytes_per_token;
  s_.tp_switch = through_switch;
  rank_devices_ = std::move(rank_devices);
}

void ServingSimulation::accept(ServingRequest r) {
  r.id = static_cast<uint32_t>(reqs_.size());
  outstanding_tokens_ += uint64_t(r.input_tokens) + r.output_tokens;
  ++unfinished_;
  queued_of_.resize(r.id + 1);
  if (r.generated == 0) {
    QueuedPrefill& q = queued_of_[r.id];
    q = {prefill_layer_s(0, r.input_tokens), prefill_ends_s(0, r.input_tokens)};
    queued_prefill_layer_s_ += q.layer_s;
    queued_prefill_ends_s_ += q.ends_s;
  }
  reqs_.push_back(std::move(r));
  if (!attention_cfg_.empty()) attention_.resize(reqs_.size());
  if (!pull_from_.empty()) pull_from_.push_back(-1);
  if (!streamed_in_.empty()) streamed_in_.push_back(0);
  if (!push_of_.empty()) push_of_.push_back(nullptr);
}

// Prefilled by another instance: its first token is out, nothing computed or found here.
void ServingSimulation::accept_prefilled_elsewhere(ServingRequest r) {
  r.ctx = r.input_tokens;
  r.generated = 1;
  r.first_token_s = -1;
  r.computed_tokens = 0;
  r.hit_tokens.clear();
  r.gpu_hit_tokens = 0;
  accept(std::move(r));
}

void ServingSimulation::accept_streamed(ServingRequest r) {
  accept_prefilled_elsewhere(std::move(r));
  streamed_in_.resize(reqs_.size(), 0);
  streamed_in_.back() = 1;
}

void ServingSimulation::kv_in(uint32_t id, double first_token_s) {
  reqs_[id].first_token_s = first_token_s;
  sched_->kv_in(id);
  wakeup_->notify();
}

void ServingSimulation::stream_kv(uint32_t id, KvPush* push) {
  push_of_.resize(reqs_.size(), nullptr);
  push_of_[id] = push;
  reqs_[id].hold_kv = true;
  // One rank's share of the prompt's KV, token-layer by token-layer: what a
  // pull would move (whole blocks), by layers and tokens; through pipeline
  // stages, each stage's layers from its own GPUs.
  push->token_layer_bytes = double(s_.model.kv_bytes_per_token()) / double(s_.model.layers);
  push->tokens = sched_->blocks_for(reqs_[id].input_tokens) * uint64_t(limits_.block_tokens);
  push->stages.clear();
  if (stages_)
    for (size_t st = 0; st < stages_->size(); ++st) push->stages.push_back(KvPush::Stage{stages_->stage(st).layers});
  else
    push->stages.push_back(KvPush::Stage{s_.model.layers});
}

void ServingSimulation::push_computed(KvPush& push) {
  push.room = true;
  for (size_t st = 0; st < push.stages.size(); ++st) {
    KvPush::Stage& p = push.stages[st];
    if (p.computed == p.sent) continue;
    const double bytes = double(p.computed - p.sent) * push.token_layer_bytes;
    p.last = planner_->move_stage(stages_, st, s_.gpu_dev, push.to, bytes, "kv push");
    p.sent = p.computed;
  }
}

void ServingSimulation::when_pushed(const KvPush& push, std::function<void()> then) {
  std::vector<JobId> last;
  for (const KvPush::Stage& p : push.stages) last.push_back(p.last);
  when_done(*platform_, *board_, std::move(last), std::move(then));
}

void ServingSimulation::release_kv(uint32_t id) {
  sched_->release(id);
  push_of_[id] = nullptr;
  sample_occupancy();  // the held KV counted in the pool's use until now
  wakeup_->notify();
}

void ServingSimulation::accept_prefilled(ServingRequest r, size_t from) {
  accept_prefilled_elsewhere(std::move(r));
  pull_from_.resize(reqs_.size(), -1);
  pull_from_.back() = static_cast<int32_t>(from);
}

void ServingSimulation::wake() { wakeup_->notify(); }

void ServingSimulation::close() {
  closed_ = true;
  wakeup_->notify();
}

size_t ServingSimulation::queued() const { return sched_ ? sched_->waiting() + sched_->swapped() : 0; }

uint32_t ServingSimulation::cached_prefix_tokens(const ServingRequest& r) const { return cache_->routing_tokens(r); }

double ServingSimulation::prefill_layer_s(uint32_t cached, uint32_t tokens) const {
  const std::vector<KernelSeq> one{KernelSeq{cached, tokens, true}};
  double s = iteration_kernel_s(s_, limits_.block_tokens, one) + weight_restore_s(s_);
  // A tensor-parallel layer's two all-reduces of the computed tokens' hidden
  // states follow its kernel on the critical path (PagedPipeline::all_reduce).
  if (s_.tp_gpus.size() > 1 && platform_) {
    const CollectiveAlgorithm algo = s_.tp_switch ? CollectiveAlgorithm::Switch : CollectiveAlgorithm::Ring;
    s += idle_duration_s(*platform_, allreduce_repeated_plan(*platform_, s_.tp_gpus,
                                                             double(tokens) * s_.tp_allreduce_bytes_per_token, algo, 2));
  }
  return s;
}

double ServingSimulation::prefill_ends_s(uint32_t cached, uint32_t tokens) const {
  const PassEnds e = iteration_ends_s(s_, {KernelSeq{cached, tokens, true, true}});
  return e.first_s + e.last_s;
}

uint32_t ServingSimulation::prefix_hit_sources(const ServingRequest& r,
                                               std::vector<std::pair<size_t, uint32_t>>& from) const {
  return cache_->hit_sources(r, from);
}

double ServingSimulation::prefix_load_bytes_per_token_layer() const { return cache_->load_bytes_per_token_layer(); }

// Every rank reads its share at once, each over its own route (the ranks'
// reads share what links their routes share: a PCIe switch two GPUs hang
// from), as the transfer planner mirrors a move.
double ServingSimulation::prefix_load_layer_s(size_t dev, double bytes) const {
  if (!platform_) return 0.0;
  CollectivePlan plan;
  plan.flows.push_back(CollectiveFlow{dev, s_.gpu_dev, bytes});
  if (!rank_devices_.empty())
    for (size_t r = 0; r < rank_devices_[dev].size(); ++r)
      plan.flows.push_back(CollectiveFlow{rank_devices_[dev][r], rank_devices_[s_.gpu_dev][r], bytes});
  return idle_duration_s(*platform_, plan);
}

bool ServingSimulation::gpu_prefix_cache() const { return cache_->has_gpu(); }

json ServingSimulation::instance_metrics(double end) {
  check_end();
  sample_occupancy();
  ServingTotals tot = totals(end);
  json m = serving_metrics(reqs_, tot);
  // A tensor-parallel instance's ranks each move their share of a block:
  // the instance moved all of them.
  m["swap_bytes"] = swap_bytes_ * ranks();
  m["prefix_cache"] = cache_->metrics(reqs_);
  m["kv_pool_blocks"] = limits_.gpu_blocks;
  m["ssd_bytes_written"] = c_.ssd_bytes_written;
  if (c_.allreduce_bytes > 0) {
    m["allreduce_s"] = c_.allreduce_s;
    m["allreduce_bytes"] = c_.allreduce_bytes;
  }
  m["tiers"] = tier_metrics(end, m["prefix_cache"]);
  return m;
}

void ServingSimulation::check_end() const {
  if (!checker_) return;
  checker_->at_end();
  // Every request has left: its blocks and their copies with it.
  for (const TierInfo& ti : kv_->table().tiers)
    if (ti.used_blocks != 0)
      throw InvariantError("invariant violated at the end of the run: tier " + ti.name + " still holds " +
                           std::to_string(ti.used_blocks) + " blocks after every request finished");
}

ServingTotals ServingSimulation::totals(double end) const {
  ServingTotals tot;
  tot.end_s = end;
  tot.iterations = iterations_;
  tot.layered_iterations = layered_iterations_;
  tot.preemptions = sched_->preemptions();
  tot.swapped_out = swapped_out_;
  tot.swapped_in = swapped_in_;
  tot.recomputed = recomputed_;
  tot.gpu_busy_s = c_.gpu_busy_s;
  tot.slo_ttft_s = slo_ttft_s_;
  tot.slo_tpot_s = slo_tpot_s_;
  return tot;
}

json ServingSimulation::metrics(double end) const {
  json m = serving_metrics(reqs_, totals(end));
  // A tensor-parallel instance's ranks each move their share of a block:
  // the instance moved all of them.
  m["swap_bytes"] = swap_bytes_ * ranks();
  m["prefix_cache"] = cache_->metrics(reqs_);
  m["kv_pool_blocks"] = limits_.gpu_blocks;
  if (s_.weights) m["weights"] = s_.weights->metrics();
  m["ssd_bytes_written"] = c_.ssd_bytes_written;
  if (c_.allreduce_bytes > 0) {
    m["allreduce_s"] = c_.allreduce_s;
    m["allreduce_bytes"] = c_.allreduce_bytes;
  }
  m["tiers"] = tier_metrics(end, m["prefix_cache"]);
  if (kv_) {
    // The KV in tiers: what attention read where, and the moves between tiers.
    for (size_t t = 0; t < s_.hw.tiers.size(); ++t)
      m["tiers"][s_.hw.tiers[t]]["hit_rate"] = c_.accesses ? double(c_.hits[t]) / double(c_.accesses) : 0.0;
    if (!attention_cfg_.empty()) m["attention_recall"] = c_.total_mass > 0 ? c_.used_mass / c_.total_mass : 1.0;
    if (s_.kv_representative) {
      // Layer 0's counts of blocks stand for every layer's: L times them
      // (bytes moved were issued for every layer and are counted as they are).
      EngineCounters c = c_;
      const uint64_t L = s_.represented_layers();
      for (uint64_t* n : {&c.accesses, &c.promoted_blocks, &c.demoted_blocks, &c.dropped_blocks, &c.written_back_blocks})
        *n *= L;
      m["kv"] = kv_counter_metrics(c, kv_->table().block_bytes);
      const std::string& why = pipeline_->representative_why();
      m["representative_layer"] = {{"layers", L},
                                   {"exact", why.empty()},
                                   {"why", why.empty() ? "every layer decided as layer 0: no block left a tier and no "
                                                         "tier filled its Lth share"
                                                       : why},
                                   {"scaled_by_layers", {"kv.block_accesses", "kv.blocks_promoted", "kv.blocks_demoted",
                                                         "kv.blocks_dropped", "kv.blocks_written_back",
                                                         "tiers.*.peak_bytes", "tiers.*.mean_bytes"}}};
    } else {
      m["kv"] = kv_counter_metrics(c_, kv_->table().block_bytes);
    }
    // What one block (one access, one of kv.block_accesses) holds: a layer's KV of its tokens or every layer's.
    m["kv_unit"] = s_.kv_all_layers ? "all_layers" : "layer";
  }
  m["links"] = link_metrics(*platform_, end);
  m.update(energy_cost_metrics(s_.hw, *platform_, serving_energy_run(s_, c_, end, m)));
  return m;
}

// Per tier: prefix-cache hits (the GPU's: its own pool's), occupancy, and a drive's wear.
json ServingSimulation::tier_metrics(double end, const json& prefix_cache) const {
  json tiers = json::object();
  for (size_t t = 0; t < s_.hw.tiers.size(); ++t) {
    json& tj = tiers[s_.hw.tiers[t]];
    uint64_t hits = 0;
    for (const auto& r : reqs_)
      if (t > 0 && t - 1 < r.hit_tokens.size()) hits += r.hit_tokens[t - 1];
    if (t > 0) tj["hit_tokens"] = hits;
    else if (cache_->has_gpu()) tj["hit_tokens"] = prefix_cache["gpu_hit_tokens"];
    tj["peak_bytes"] = occ_peak_[t];
    tj["mean_bytes"] = end > 0 ? occ_area_[t] / end : 0.0;
    if (t > 0 && s_.hw.devices[s_.tier_dev[t]].model->is_storage()) {
      tj["nand_bytes_written"] = c_.wear[t].nand_bytes_written();
      const double y = end > 0 ? c_.wear[t].years_to_wear_out(c_.wear[t].host_bytes_written() / end) : 0.0;
      if (std::isfinite(y) && y > 0) tj["years_to_wear_out"] = y;
    }
  }
  return tiers;
}

std::string ServingSimulation::requests_csv() const {
  std::vector<std::string> tiers(s_.hw.tiers.begin() + 1, s_.hw.tiers.end());
  return serving_requests_csv(reqs_, ServingSlo{slo_ttft_s_, slo_tpot_s_}, tiers,
                              cache_->has_gpu() ? s_.hw.tiers[0] : std::string());
}

std::string ServingSimulation::iterations_csv() const { return serving_iterations_csv(iteration_rows_, s_.hw.tiers); }

}  // namespace kvtier
