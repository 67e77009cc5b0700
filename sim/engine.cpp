#include "sim/engine.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "models/fpga_ku15p.h"
#include "sim/config.h"
#include "traces/attention_source.h"

namespace kvtier {

namespace {
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least q of the samples at or below it.
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}
}  // namespace

Simulation::~Simulation() = default;

Simulation::Simulation(json& cfg) : cfg_(cfg) {
  hw_ = parse_hardware(cfg_["hardware"], "hardware");
  topo_ = std::make_unique<Topology>(hw_);
  model_ = parse_llm(cfg_["model"], "model");
  const json& w = cfg_["workload"];
  batch_ = static_cast<uint32_t>(get_int(w, "batch"));
  ctx_ = static_cast<uint32_t>(get_int(w, "context_tokens"));
  steps_ = static_cast<uint32_t>(get_int(w, "decode_steps"));
  bt_ = static_cast<uint32_t>(get_int(w, "block_tokens"));
  warmup_ = static_cast<uint32_t>(get_int(w, "warmup_steps"));
  tokens_unit_ = w["transfer_unit"] == "tokens";
  if (warmup_ >= steps_)
    throw ConfigError("workload.warmup_steps: " + std::to_string(warmup_) + " leaves no measured step of " +
                      std::to_string(steps_) + " (workload.decode_steps)");
  prefill_compute_ = w["prefill"] == "compute";
  prefill_load_ = w["prefill"] == "load";
  query_tokens_ = static_cast<uint32_t>(get_int(w, "query_tokens"));
  overlap_next_load_ = w["overlap_next_load"].get<bool>();
  if (overlap_next_load_ && !prefill_load_)
    throw ConfigError("workload.overlap_next_load: needs workload.prefill \"load\" (the next request's KV is loaded, not computed)");

  json& pol = cfg_["policies"];
  const json defaults = {{"eviction", "lru"},   {"promotion", "on_access"}, {"placement", "top"},
                         {"prefetch", "none"},  {"evaluation", "trace"},    {"compression", "none"}};
  for (auto it = pol.begin(); it != pol.end(); ++it)
    if (!defaults.contains(it.key()) && !is_annotation_key(it.key())) {
      std::vector<std::string> fams;
      for (auto d = defaults.begin(); d != defaults.end(); ++d) fams.push_back(d.key());
      std::string hint = nearest(it.key(), fams);
      throw ConfigError("policies." + it.key() + ": unknown policy family" +
                        (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
  for (auto d = defaults.begin(); d != defaults.end(); ++d)
    if (!pol.contains(d.key())) pol[d.key()] = *d;
  evict_ = Registry<EvictionPolicy>::instance().create(pol["eviction"], "policies.eviction");
  promote_ = Registry<PromotionPolicy>::instance().create(pol["promotion"], "policies.promotion");
  place_ = Registry<PlacementPolicy>::instance().create(pol["placement"], "policies.placement");
  prefetch_ = Registry<PrefetchPolicy>::instance().create(pol["prefetch"], "policies.prefetch");
  eval_ = Registry<EvaluationPolicy>::instance().create(pol["evaluation"], "policies.evaluation");
  compress_ = Registry<CompressionPolicy>::instance().create(pol["compression"], "policies.compression");

  // The trace.
  const uint64_t seed = cfg_["sim"]["seed"].get<uint64_t>();
  json& tr = cfg_["workload"]["trace"];
  if (tr.value("kind", "") == "none" && pol["evaluation"]["name"] == "trace")
    throw ConfigError("workload.trace: kind \"none\" needs policies.evaluation other than \"trace\"");
  // Every kind (synthetic, patterns, any trace file, none) behind one factory.
  trace_ = make_attention_source(tr, "workload.trace", model_.layers, ctx_, steps_, bt_, batch_, seed);
  if (trace_) trace_name_ = source_name(*trace_);

  // Blocks and tiers.
  gpu_dev_ = static_cast<size_t>(hw_.device_index(hw_.gpu));
  const DeviceModel& gpu = *hw_.devices[gpu_dev_].model;
  gpu_model_ = &gpu;
  gpu_flops_ = gpu.flops();
  gpu_mem_Bps_ = gpu.memory_Bps();
  gpu_launch_s_ = gpu.launch_overhead_s();
  if (gpu_flops_ <= 0 || gpu_mem_Bps_ <= 0)
    throw ConfigError("hardware.gpu: device '" + hw_.gpu + "' cannot run attention (no FLOP/s or memory bandwidth)");
  t_.batch = batch_;
  t_.layers = model_.layers;
  t_.block_tokens = bt_;
  t_.blocks_per_seq_layer = blocks_at(steps_ - 1);
  t_.block_bytes = uint64_t(bt_) * model_.kv_bytes_per_token_layer();
  const double bb = static_cast<double>(t_.block_bytes);
  const uint64_t total_blocks = uint64_t(batch_) * model_.layers * t_.blocks_per_seq_layer;
  if (total_blocks >= kNoBlock) throw ConfigError("workload: too many KV blocks (" + std::to_string(total_blocks) + ")");
  for (size_t i = 0; i < hw_.devices.size(); ++i) {
    if (hw_.devices[i].kind == "cpu" && cpu_dev_ < 0) cpu_dev_ = static_cast<int>(i);
    if (fpga_kernel(*hw_.devices[i].model) && fpga_dev_ < 0) fpga_dev_ = static_cast<int>(i);
  }
  uint64_t capacity_blocks = 0;
  for (size_t i = 0; i < hw_.tiers.size(); ++i) {
    size_t d = static_cast<size_t>(hw_.device_index(hw_.tiers[i]));
    tier_dev_.push_back(d);
    double cap = hw_.devices[d].model->capacity_bytes();
    std::string why;
    if (d == gpu_dev_) {
      gpu_tier_ = true;
      cap -= model_.weight_bytes();
      why = " after " + std::to_string(model_.weight_bytes() / 1e9) + " GB of weights";
    }
    TierInfo ti;
    ti.name = hw_.tiers[i];
    ti.kind = hw_.devices[d].kind;
    // A tier that stores blocks compressed holds proportionally more of them.
    double frac = 0;
    for (uint32_t l = 0; l < model_.layers; ++l) {
      codec_.push_back(compress_->spec(static_cast<TierId>(i), l));
      frac += codec_.back().stored_fraction() / model_.layers;
    }
    ti.capacity_blocks = cap > 0 ? static_cast<uint64_t>(cap / (bb * frac)) : 0;
    wear_.emplace_back(*hw_.devices[d].model);
    if (ti.capacity_blocks == 0)
      throw ConfigError("hardware.devices." + ti.name + ": capacity" + why + " holds no KV block of " +
                        std::to_string(t_.block_bytes) + " bytes (" + std::to_string(bt_) + " tokens)");
    capacity_blocks += ti.capacity_blocks;
    t_.tiers.push_back(ti);
  }
  if (t_.tiers.size() > 8) throw ConfigError("hardware.tiers: at most 8 tiers");
  if (!gpu_tier_ && model_.weight_bytes() > gpu.capacity_bytes())
    throw ConfigError("hardware.devices." + hw_.gpu + ": the model's weights (" + std::to_string(model_.weight_bytes() / 1e9) +
                      " GB) do not fit in the GPU");
  if (!evict_->drops() && total_blocks > capacity_blocks)
    throw ConfigError("hardware.tiers: the KV needs " + std::to_string(total_blocks) + " blocks of " +
                      std::to_string(t_.block_bytes) + " bytes but the tiers hold " + std::to_string(capacity_blocks) +
                      "; add capacity or use an eviction policy that drops");
  // Every route the engine may use must exist; this also reports unreachable devices now.
  for (size_t d : tier_dev_)
    if (d != gpu_dev_) {
      topo_->route(d, gpu_dev_);
      topo_->route(gpu_dev_, d);
    }
  for (size_t i = 0; i + 1 < tier_dev_.size(); ++i) topo_->route(tier_dev_[i], tier_dev_[i + 1]);

  if (eval_->scoring()) {
    if (cpu_dev_ < 0 || fpga_dev_ < 0)
      throw ConfigError("policies.evaluation: '" + pol["evaluation"]["name"].get<std::string>() +
                        "' splits scoring between a CPU and an FPGA; hardware.devices needs a device of kind cpu and one of "
                        "kind ku15p");
    if (const ThermalParams* tp = fpga_thermal(*hw_.devices[static_cast<size_t>(fpga_dev_)].model))
      thermal_ = std::make_unique<ThermalModel>(*tp);
    // Keys are scored where they live: each tier below the GPU must be host
    // memory (the CPU scores it) or the SmartSSD next to the FPGA.
    for (size_t t = 0; t < tier_dev_.size(); ++t) {
      const size_t d = tier_dev_[t];
      if (d == gpu_dev_) continue;
      const DeviceModel& dm = *hw_.devices[d].model;
      if (hw_.devices[d].kind == "smartssd" && ssd_dev_ < 0) ssd_dev_ = static_cast<int>(d);
      else if (dm.role() == DeviceRole::Memory && host_mem_dev_ < 0) host_mem_dev_ = static_cast<int>(d);
      else
        throw ConfigError("policies.evaluation: '" + pol["evaluation"]["name"].get<std::string>() +
                          "' scores keys where they live, host memory on the CPU and a SmartSSD on its FPGA; tier '" +
                          hw_.tiers[t] + "' (kind " + hw_.devices[d].kind + ") has no scorer");
    }
    const int bits = eval_->scoring()->bits();
    rates_.f_c = hw_.devices[static_cast<size_t>(cpu_dev_)].model->scoring_Bps(bits);
    if (host_mem_dev_ >= 0)  // q.K is one multiply per key byte: the CPU is capped by its memory
      rates_.f_c = std::min(rates_.f_c, hw_.devices[static_cast<size_t>(host_mem_dev_)].model->read_Bps());
    fpga_compute_Bps_ = hw_.devices[static_cast<size_t>(fpga_dev_)].model->scoring_Bps(bits);
    rates_.f_s = fpga_compute_Bps_;
    if (ssd_dev_ >= 0) {  // the FPGA streams keys off its NAND: capped by that path at block-sized requests
      const DeviceModel& ssd = *hw_.devices[static_cast<size_t>(ssd_dev_)].model;
      rates_.f_s = std::min(rates_.f_s, ssd.read_Bps() * ssd.read_efficiency(static_cast<double>(t_.block_bytes), 1));
    }
    if (rates_.f_c <= 0 || rates_.f_s <= 0)
      throw ConfigError("hardware.devices: the cpu and ku15p devices must score keys (scoring rate 0 at " +
                        std::to_string(bits) + " bits)");
  }
  for (const auto& c : codec_)
    if (!c.on_gpu && c.compress_Bps + c.decompress_Bps > 0 && cpu_dev_ < 0)
      throw ConfigError("policies.compression: the codec runs on the CPU; hardware.devices needs a device of kind cpu");

  t_.tier.assign(total_blocks, kNotCreated);
  t_.last_access.assign(total_blocks, 0);
  t_.access_count.assign(total_blocks, 0);
  t_.mass.assign(total_blocks, 0.f);
  t_.last_mass.assign(total_blocks, 0.f);
  t_.created.assign(total_blocks, 0);
  t_.dirty.assign(total_blocks, 0);
  t_.copies.assign(total_blocks, 0);
  evict_->bind_placement(place_.get());
  evict_->setup(t_);
  promote_->setup(t_);
  place_->setup(t_);
  prefetch_->setup(t_);
  eval_->setup(t_);
  compress_->setup(t_);
}

// A layer's GPU work: compute-bound on FLOPs, or memory-bound on the bytes it
// reads (weights and KV), through the GPU model so that a calibrated
// attention_us curve (cuda_validate's kv_read probe) replaces bytes/bandwidth.
// Without a curve this is launch + max(flops/F, bytes/B).
double Simulation::kernel_s(double flops, double bytes) const {
  return std::max(gpu_launch_s_ + flops / gpu_flops_, gpu_model_->attention_s(bytes));
}

double Simulation::fraction(size_t tier, uint32_t layer) const {
  return codec_[tier * model_.layers + layer].stored_fraction();
}

Stream& Simulation::stream(size_t from, size_t to) {
  const size_t n = hw_.devices.size();
  Stream* s = streams_[from * n + to];
  if (!s) throw std::logic_error("kvtier: no stream " + hw_.devices[from].name + "->" + hw_.devices[to].name);
  return *s;
}

void Simulation::add_dep(std::vector<JobId>& deps, JobId j) {
  if (j != kNoJob && (deps.empty() || deps.back() != j)) deps.push_back(j);
}

// Moves b's own tier. A read up (to < from) leaves the copy it was read
// from in place; a move down finds the room already made by the caller.
void Simulation::move(BlockId b, TierId from, TierId to) {
  evict_->on_remove(b, from);
  --t_.tiers[from].used_blocks;
  if (from == 0 && prefetched_[b]) {  // predicted, never used, and now gone
    pstats_.wasted_bytes += static_cast<uint64_t>(t_.block_bytes * fraction(prefetch_src_[b], t_.layer_of(b)));
    prefetched_[b] = 0;
  }
  t_.tier[b] = to;
  auto& ti = t_.tiers[to];
  if (++ti.used_blocks > peak_blocks_[to]) peak_blocks_[to] = ti.used_blocks;
  evict_->on_insert(b, to);
  if (to < from && !evict_->exclusive()) add_copy(b, from);
}

void Simulation::emit_occupancy() {
  for (size_t t = 0; t < occupancy_track_.size(); ++t)
    if (occupancy_value_[t] >= 0) timeline_->counter(occupancy_track_[t], occupancy_t_, occupancy_value_[t]);
}

void Simulation::add_copy(BlockId b, TierId t) {
  t_.copies[b] = static_cast<uint8_t>(t_.copies[b] | (1u << t));
  copy_lists_[t].push_front(b, 0);
  if (++t_.tiers[t].used_blocks > peak_blocks_[t]) peak_blocks_[t] = t_.tiers[t].used_blocks;
}

void Simulation::drop_copy(BlockId b, TierId t) {
  t_.copies[b] = static_cast<uint8_t>(t_.copies[b] & ~(1u << t));
  copy_lists_[t].unlink(b, 0);
  --t_.tiers[t].used_blocks;
}

bool Simulation::drop_oldest_copy(TierId t) {
  const BlockId c = copy_lists_[t].tail[0];
  if (c == kNoBlock) return false;
  drop_copy(c, t);
  ++copies_dropped_;
  return true;
}

void Simulation::invalidate_copies(BlockId b) {
  for (TierId t = 0; t_.copies[b] != 0; ++t)
    if (t_.has_copy(b, t)) drop_copy(b, t);
}

void Simulation::drop(BlockId b) {
  const TierId t = t_.tier[b];
  invalidate_copies(b);
  evict_->on_remove(b, t);
  --t_.tiers[t].used_blocks;
  t_.tier[b] = kDropped;
  ++dropped_blocks_;
}

// Adds block b (raw_bytes uncompressed) to the transfer from endpoint
// from_ep to to_ep (tier indices; n = the GPU). The transfer waits for
// whatever is still moving b if wait_for_block.
JobId Simulation::add_to_batch(size_t from_ep, size_t to_ep, BlockId b, double raw_bytes, bool wait_for_block) {
  const size_t n = t_.tiers.size();
  Batch& bt = batches_[from_ep * (n + 1) + to_ep];
  if (bt.id == kNoJob) bt.id = board_->create();
  const uint32_t layer = t_.layer_of(b);
  // Bytes on the wire are as stored in the lower tier of the two; crossing
  // between the GPU (or an uncompressed tier) and a compressed tier costs a
  // codec pass.
  const size_t low = (from_ep == n) ? to_ep : (to_ep == n) ? from_ep : std::max(from_ep, to_ep);
  const size_t high = (from_ep == n || to_ep == n) ? n : std::min(from_ep, to_ep);
  const CompressionSpec& c = codec_[low * model_.layers + layer];
  const double f = c.stored_fraction();
  // A host (CPU) codec runs in host memory: between a compressed tier and
  // the GPU the uncompressed bytes cross PCIe, decompressed before the copy
  // or compressed after it. A GPU codec (quantization kernels) moves the
  // compressed bytes and runs on the GPU.
  const bool host_codec_at_gpu = f < 1.0 && !c.on_gpu && (high == n || (gpu_tier_ && high == 0));
  bt.bytes += raw_bytes * (host_codec_at_gpu ? 1.0 : f);
  bt.codec_before_write = host_codec_at_gpu;
  const bool high_plain = high == n || fraction(high, layer) >= 1.0;
  if (f < 1.0 && high_plain) {
    const bool decompress = from_ep == low;
    const double bps = decompress ? c.decompress_Bps : c.compress_Bps;
    if (bps > 0) bt.codec_s += raw_bytes / bps;
    bt.decompress = decompress;
  }
  if (wait_for_block && !board_->done(pending_[b])) add_dep(bt.deps, pending_[b]);
  return bt.id;
}

// b leaves tier `from`: where a lower tier still holds a valid copy, the
// highest such copy becomes b's own again (no bytes move); otherwise b is
// written to the tier below.
// The caller has made room below unless free_demotion(b).
void Simulation::demote(BlockId v, TierId from) {
  const TierId to = static_cast<TierId>(from + 1);
  ++demoted_blocks_;
  if (free_demotion(v)) {
    TierId c = static_cast<TierId>(from + 1);
    while (!t_.has_copy(v, c)) ++c;
    drop_copy(v, c);
    move(v, from, c);
    return;
  }
  JobId j = add_to_batch(from, to, v, data_bytes(v), true);
  move(v, from, to);
  pending_[v] = j;
  pending_src_[v] = from;
  t_.dirty[v] = 0;
  ++written_back_blocks_;
}

// Room in tier t: copies kept for blocks that live higher up go first (the
// oldest first; dropping one moves nothing), then the policy's victims.
bool Simulation::make_room(TierId t) {
  while (t_.tiers[t].used_blocks >= t_.tiers[t].capacity_blocks) {
    if (drop_oldest_copy(t)) continue;
    BlockId v = evict_->victim(t);
    if (v == kNoBlock) return false;
    if (evict_->drops()) {
      drop(v);
      continue;
    }
    if (!room_below(v, t)) return false;
    demote(v, t);
  }
  return true;
}

// Submits every open batch. Transfers into the GPU that belong to the layer
// being selected are what `slot` waits for.
void Simulation::flush(Slot* slot) {
  const size_t n = t_.tiers.size();
  // Tier occupancy (copies included) on the timeline, sampled at every
  // flush (after each layer's selection, append and background demotion);
  // of several flushes at one instant the last one's values are written.
  if (timeline_->enabled()) {
    const double now = sg4::Engine::get_clock();
    if (now > occupancy_t_) emit_occupancy();
    occupancy_t_ = now;
    for (size_t t = 0; t < n; ++t) occupancy_value_[t] = double(t_.tiers[t].used_blocks) * double(t_.block_bytes);
  }
  auto ep_dev = [&](size_t ep) { return ep == n ? gpu_dev_ : tier_dev_[ep]; };
  auto submit = [&](Batch& bt, size_t a, size_t b, bool critical) {
    if (bt.id == kNoJob) return;
    const size_t from = ep_dev(a), to = ep_dev(b);
    if (from == to) {  // GPU tier to GPU: nothing moves
      board_->finish(bt.id);
    } else {
      if (hw_.devices[to].model->is_storage()) {
        ssd_bytes_written_ += bt.bytes;
        wear_[b].record_write(bt.bytes);
      }
      if (b == n || (gpu_tier_ && b == 0)) fetched_bytes_ += bt.bytes;
      // Codec work: on the GPU it joins the next attention kernel; on the
      // CPU it is its own job where the compressed data is: before a
      // compressing write to a lower tier and after a decompressing read
      // from one, but before a read into the GPU and after a write from it
      // (codec_before_write: the copy carries the uncompressed bytes).
      const bool on_gpu = codec_[std::max(a == n ? b : a, b == n ? a : b) * model_.layers].on_gpu;
      JobId transfer_id = bt.id;
      const bool codec_first = bt.codec_before_write ? bt.decompress : !bt.decompress;
      if (bt.codec_s > 0 && !on_gpu && codec_first) {
        JobId cj = board_->create();
        stream(static_cast<size_t>(cpu_dev_), static_cast<size_t>(cpu_dev_))
            .submit(TransferJob{cj, 0, 0, 0, std::move(bt.deps), cpu_dev_, bt.codec_s, bt.decompress ? "decompress" : "compress"});
        bt.deps = {cj};
      }
      stream(from, to).submit(TransferJob{transfer_id, from, to, bt.bytes, std::move(bt.deps), -1, 0, "transfer"});
      JobId ready = transfer_id;
      if (bt.codec_s > 0 && !on_gpu && !codec_first) {
        ready = board_->create();
        stream(static_cast<size_t>(cpu_dev_), static_cast<size_t>(cpu_dev_))
            .submit(TransferJob{ready, 0, 0, 0, {transfer_id}, cpu_dev_, bt.codec_s, bt.decompress ? "decompress" : "compress"});
      }
      if (bt.codec_s > 0 && on_gpu) {
        if (critical && slot) slot->extra_gpu_s += bt.codec_s;
        else gpu_extra_s_ += bt.codec_s;
      }
      if (critical && slot) slot->waits.push_back(ready);
    }
    bt = Batch{};
  };
  // Demand fetches first: streams are FIFO, so predicted blocks queue behind them.
  for (size_t a = 0; a <= n; ++a)
    for (size_t b = 0; b <= n; ++b) {
      const bool into_gpu = a != n && (b == n || (gpu_tier_ && b == 0 && a > 0));
      submit(batches_[a * (n + 1) + b], a, b, into_gpu);
    }
  for (size_t t = 0; t < n; ++t) submit(prefetch_batches_[t], t, gpu_tier_ ? 0 : n, false);
}

void Simulation::enforce_budget(uint32_t seq, uint32_t layer) {
  BlockId v;
  while ((v = evict_->budget_victim(seq, layer)) != kNoBlock) {
    const TierId t = t_.tier[v];
    if (evict_->drops() || !room_below(v, t))
      drop(v);
    else
      demote(v, t);
  }
}

// A new block: placement picks a tier, eviction makes room (trying lower
// tiers if every block of the chosen one is pinned).
void Simulation::allocate(BlockId b, uint32_t final_blocks, TierId* tier_out) {
  TierId t = place_->place_in(b, final_blocks, t_);
  if (t >= t_.tiers.size()) throw std::logic_error("placement policy returned a tier that does not exist");
  while (!make_room(t)) {
    if (t + 1u >= t_.tiers.size())
      throw ConfigError("hardware.tiers: no room for a new KV block in any tier (all blocks pinned or tiers full)");
    ++t;
  }
  t_.tier[b] = t;
  t_.created[b] = t_.clock;
  t_.dirty[b] = 1;
  if (++t_.tiers[t].used_blocks > peak_blocks_[t]) peak_blocks_[t] = t_.tiers[t].used_blocks;
  evict_->on_insert(b, t);
  if (!defer_budget_) enforce_budget(t_.seq_of(b), t_.layer_of(b));
  *tier_out = t_.tier[b];
}

// One kernel on the GPU compute stream; on the timeline a slice named for
// what it is: "prefill L<l>", "query L<l>" or "step <s> L<l>" (step < 0:
// prefill phases), with its KV blocks in the args.
void Simulation::compute(double seconds, const char* phase, int64_t step, uint32_t layer, uint64_t kv_blocks) {
  seconds += gpu_extra_s_;
  gpu_extra_s_ = 0;
  const double t0 = sg4::Engine::get_clock();
  sg4::ExecPtr e = sg4::this_actor::exec_init(seconds * gpu_host_->get_speed());
  e->set_host(gpu_host_);
  e->start();
  e->wait();
  const double t1 = sg4::Engine::get_clock();
  gpu_busy_s_ += t1 - t0;
  if (timeline_->enabled()) {
    const std::string name = step >= 0 ? "step " + std::to_string(step) + " L" + std::to_string(layer)
                                       : std::string(phase) + " L" + std::to_string(layer);
    timeline_->slice(gpu_track_, name, t0, t1, json{{"phase", phase}, {"layer", layer}, {"kv_blocks", kv_blocks}});
  }
}

void Simulation::prefill() {
  const uint32_t ctx_blocks = (ctx_ + bt_ - 1) / bt_;
  tokens_now_ = ctx_;
  const double T = ctx_;
  const size_t n = t_.tiers.size();
  // MatKV: the prompt's KV was computed once and stored on flash (the lowest
  // tier); prefill loads what placement puts higher, layer by layer, and
  // computes only the query tokens once a layer's KV is there.
  const size_t src = n - 1;
  std::vector<std::vector<JobId>> loads(model_.layers);
  for (uint32_t l = 0; l < model_.layers; ++l) {
    t_.clock = 0;
    t_.layer = l;
    if (prefill_compute_) {
      // Weights once, every prompt token through them, causal attention over T^2/2 pairs.
      double flops = model_.weight_flops_per_token_layer() * T * batch_ +
                     2.0 * T * T * model_.heads * model_.head_dim * batch_;
      double bytes = model_.weight_bytes_per_layer() + T * batch_ * model_.kv_bytes_per_token_layer();
      compute(kernel_s(flops, bytes), "prefill", -1, l, 0);
    }
    // The prompt's own attention is what its blocks have been used for so
    // far: H2O's accumulated mass, top-k's history, HKM's ranking start from it.
    if (trace_)
      for (uint32_t s = 0; s < batch_; ++s)
        if (const std::vector<float>* pm = trace_->prompt(s % trace_->header().sequences, l))
          for (uint32_t i = 0; i < ctx_blocks && i < pm->size(); ++i) {
            const BlockId b = t_.id(s, l, i);
            t_.mass[b] = (*pm)[i];
            t_.last_mass[b] = (*pm)[i];
            t_.access_count[b] = 1;
          }
    // The whole prompt arrives at once: budgets (H2O) apply to the whole of
    // it, once its masses are known, not block by block as it is allocated.
    defer_budget_ = true;
    for (uint32_t s = 0; s < batch_; ++s)
      for (uint32_t i = 0; i < ctx_blocks; ++i) {
        BlockId b = t_.id(s, l, i);
        TierId t;
        allocate(b, ctx_blocks, &t);
        if (t == kDropped || (!prefill_compute_ && !prefill_load_)) continue;
        if (prefill_load_) {
          if (t != src) pending_[b] = add_to_batch(src, t, b, data_bytes(b), false);
          continue;
        }
        if (!(gpu_tier_ && t == 0)) {
          pending_[b] = add_to_batch(n, t, b, data_bytes(b), false);
          pending_src_[b] = kNoSource;
        }
      }
    defer_budget_ = false;
    for (uint32_t s = 0; s < batch_; ++s) enforce_budget(s, l);
    if (prefill_compute_ || prefill_load_) {
      for (const auto& bt : batches_)
        if (bt.id != kNoJob) loads[l].push_back(bt.id);
      flush(nullptr);
    } else {
      // KV assumed in place: settle every move without simulating it.
      for (auto& bt : batches_) {
        if (bt.id != kNoJob) board_->finish(bt.id);
        bt = Batch{};
      }
    }
  }
  if (!prefill_load_) return;
  const double q = query_tokens_;
  for (uint32_t l = 0; l < model_.layers; ++l) {
    for (JobId j : loads[l]) board_->wait(j);
    double flops = model_.weight_flops_per_token_layer() * q * batch_ + 4.0 * q * T * model_.heads * model_.head_dim * batch_;
    double bytes = model_.weight_bytes_per_layer() + T * batch_ * model_.kv_bytes_per_token_layer();
    compute(kernel_s(flops, bytes), "query", -1, l, 0);
  }
}

// APP: this layer's keys are scored where they live: the CPU scores those
// in host memory, the FPGA those on its SmartSSD (its NAND read is a
// transfer, so it contends with the SmartSSD's other traffic), the GPU those
// in its hot pool (a memory-bound pass added to the layer's kernel). Keys a
// split wants scored on the other side are moved there first. The layer's
// fetches wait for all of it.
void Simulation::score(Slot& slot, uint32_t step, uint32_t layer, uint32_t n) {
  ScoringSplit* sc = eval_->scoring();
  if (!sc->scores_at(step)) return;
  const double kb = static_cast<double>(t_.block_bytes) / 2.0 * sc->bits() / 16.0;  // key bytes scored per block
  double cpu_b = 0, fpga_b = 0, gpu_b = 0;
  for (uint32_t s = 0; s < batch_; ++s)
    for (uint32_t i = 0; i < n; ++i) {
      const TierId t = t_.tier[t_.id(s, layer, i)];
      if (t >= t_.tiers.size()) continue;
      if (gpu_tier_ && t == 0) gpu_b += kb;
      else if (static_cast<int>(tier_dev_[t]) == ssd_dev_) fpga_b += kb;
      else cpu_b += kb;
    }
  if (cpu_b + fpga_b + gpu_b == 0) return;
  const ScoringPlan p = sc->plan(cpu_b, fpga_b);
  slot.extra_gpu_s += gpu_b / gpu_mem_Bps_;
  const size_t c = static_cast<size_t>(cpu_dev_), f = static_cast<size_t>(fpga_dev_);
  const size_t ssd = static_cast<size_t>(ssd_dev_), host = static_cast<size_t>(host_mem_dev_);
  JobId to_cpu = kNoJob, to_fpga = kNoJob;
  if (p.moved_to_cpu > 0) {
    to_cpu = board_->create();
    stream(ssd, host).submit(TransferJob{to_cpu, ssd, host, p.moved_to_cpu, {}, -1, 0, "key move"});
    slot.waits.push_back(to_cpu);
  }
  if (p.moved_to_fpga > 0) {
    to_fpga = board_->create();
    stream(host, f).submit(TransferJob{to_fpga, host, f, p.moved_to_fpga, {}, -1, 0, "key move"});
    slot.waits.push_back(to_fpga);
  }
  double fpga_s = p.bytes_fpga / fpga_compute_Bps_;
  if (thermal_ && fpga_s > 0) {
    const double now = sg4::Engine::get_clock();
    const double dt = std::max(0.0, now - thermal_t_);
    const bool was = thermal_->throttled();
    thermal_->advance(dt, 0.0);  // idle since the last scoring burst
    if (was) throttled_s_ += dt;
    fpga_s *= thermal_->params().nominal_clock_MHz / thermal_->clock_MHz();
    if (thermal_->throttled()) throttled_s_ += fpga_s;
    thermal_->advance(fpga_s, 1.0);
    thermal_t_ = now + fpga_s;
    thermal_peak_C_ = std::max(thermal_peak_C_, thermal_->temperature_C());
  }
  slot.score_cpu = board_->create();
  slot.score_fpga = board_->create();
  std::vector<JobId> cdeps, fdeps;
  add_dep(cdeps, to_cpu);
  add_dep(fdeps, to_fpga);
  stream(c, c).submit(TransferJob{slot.score_cpu, 0, 0, 0, std::move(cdeps), cpu_dev_, p.bytes_cpu / rates_.f_c, "score"});
  // The FPGA streams keys from its NAND while it computes: read and compute overlap.
  stream(f, f).submit(TransferJob{slot.score_fpga, 0, 0, 0, std::move(fdeps), fpga_dev_, fpga_s, "score"});
  const double nand = p.bytes_fpga - p.moved_to_fpga;
  if (nand > 0) {
    slot.score_read = board_->create();
    stream(ssd, f).submit(TransferJob{slot.score_read, ssd, f, nand, {}, -1, 0, "key read"});
    slot.waits.push_back(slot.score_read);
  }
  slot.score_move_cpu = to_cpu;
  beta_sum_ += p.beta;
  ++scored_layers_;
  key_bytes_scored_cpu_ += p.bytes_cpu;
  key_bytes_scored_fpga_ += p.bytes_fpga;
  key_bytes_scored_gpu_ += gpu_b;
  key_bytes_moved_ += p.moved_to_cpu + p.moved_to_fpga;
  slot.waits.push_back(slot.score_cpu);
  slot.waits.push_back(slot.score_fpga);
}

void Simulation::select(uint64_t k) {
  const uint32_t L = model_.layers;
  const uint32_t step = static_cast<uint32_t>(k / L), layer = static_cast<uint32_t>(k % L);
  const size_t nt = t_.tiers.size();
  t_.clock = k + 1;
  t_.step = step;
  t_.layer = layer;
  t_.now_s = sg4::Engine::get_clock();
  Slot& slot = ring_[k % ring_.size()];
  slot.waits.clear();  // keeps its capacity: no allocation per layer
  slot.kv_blocks = 0;
  slot.extra_gpu_s = 0;
  slot.score_cpu = slot.score_fpga = slot.score_read = slot.score_move_cpu = kNoJob;
  // The trace's records of this (step, layer): one for every sequence, or
  // one per trace sequence (batch sequence s follows trace sequence s % S).
  if (trace_)
    for (AttentionRecord& r : recs_) {
      if (!trace_->next(r)) throw ConfigError(trace_name_ + ": ends before step " + std::to_string(step));
      if (r.step != step || r.layer != layer)
        throw ConfigError(trace_name_ + ": expected the record of step " + std::to_string(step) + ", layer " +
                          std::to_string(layer) + ", got step " + std::to_string(r.step) + ", layer " + std::to_string(r.layer));
    }
  const uint32_t n = blocks_at(step);
  // The block that receives this step's token exists from the moment the
  // step is selected: attention reads the new token too.
  for (uint32_t s = 0; s < batch_; ++s) {
    BlockId nb = t_.id(s, layer, n - 1);
    if (t_.tier[nb] == kNotCreated) {
      TierId t;
      allocate(nb, n, &t);
    }
  }
  sel_.clear();
  // Pass 1: what attention uses, stamped first so that none of it is evicted
  // while pass 2 makes room.
  for (uint32_t s = 0; s < batch_; ++s) {
    idx_.clear();
    const AttentionRecord* rec = trace_ ? &recs_[s % recs_.size()] : nullptr;
    if (rec)
      for (size_t i = 0; i < rec->blocks.size(); ++i) {
        mass_of_[rec->blocks[i]] = rec->mass[i];
        total_mass_ += rec->mass[i];
      }
    SelectInput in{step, layer, s, n, rec ? &rec->blocks : nullptr, rec ? &rec->mass : nullptr};
    eval_->select(in, t_, idx_);
    obs_mass_.clear();
    for (uint32_t i : idx_) {
      if (i >= n) throw std::logic_error("evaluation policy selected block " + std::to_string(i) + " of " + std::to_string(n));
      BlockId b = t_.id(s, layer, i);
      const float m = trace_ ? mass_of_[i] : 0.f;
      obs_mass_.push_back(m);
      ++accesses_;
      if (t_.tier[b] == kDropped) {
        ++dropped_accesses_;
        continue;
      }
      used_mass_ += m;
      t_.last_access[b] = t_.clock;
      ++t_.access_count[b];
      t_.mass[b] += m;
      t_.last_mass[b] = m;
      evict_->on_access(b, t_.tier[b]);
      promote_->on_access(b, t_.tier[b], t_);
      sel_.push_back(b);
    }
    prefetch_->observe(SelectInput{step, layer, s, n, &idx_, trace_ ? &obs_mass_ : nullptr}, t_);
    if (rec)
      for (uint32_t b : rec->blocks) mass_of_[b] = 0.f;
  }

  if (eval_->scoring()) score(slot, step, layer, n);

  // Pass 2: fetch what is below the GPU, one transfer per source tier;
  // promote what the promotion policy says.
  const size_t gpu_ep = gpu_tier_ ? 0 : nt;
  tokens_now_ = ctx_ + step + 1;
  slot.kv_tokens = 0;
  for (BlockId b : sel_) {
    const TierId t = t_.tier[b];
    const double bb = data_bytes(b);
    slot.kv_tokens += held_tokens(b);
    ++hits_[t];
    if (prefetched_[b]) {
      prefetched_[b] = 0;
      ++pstats_.used_blocks;
      if (gpu_tier_ && t == 0) {
        ++pstats_.covered_blocks;
        ++pstats_.needed_blocks;
      }
    } else if (!(gpu_tier_ && t == 0)) {
      ++pstats_.needed_blocks;
    }
    if (gpu_tier_ && t == 0) {
      if (!board_->done(pending_[b])) slot.waits.push_back(pending_[b]);
      continue;
    }
    // Still being written down from a tier: the data is read from there
    // (the source keeps it until the write completes). Prefill output
    // written from the GPU's staging buffer is not kept: that buffer is
    // reused layer after layer, so a read waits for the write.
    if (pending_src_[b] != kNoSource && !board_->done(pending_[b])) {
      const size_t src = pending_src_[b];
      if (gpu_tier_ && src == 0) continue;  // still on the GPU
      add_to_batch(src, gpu_ep, b, bb, false);
      continue;
    }
    if (gpu_tier_ && promote_->promote(b, t, t_)) {
      const TierId dest = promote_->promote_to(b, t, t_);
      if (dest < t && make_room(dest)) {
        if (dest == 0) {
          JobId fj = add_to_batch(t, 0, b, bb, true);
          move(b, t, 0);
          pending_[b] = fj;
        } else {
          // Up to an intermediate tier; then on into the GPU where it fits
          // (its copy stays in the intermediate tier), else attention reads
          // it from there.
          JobId pj = add_to_batch(t, dest, b, bb, true);
          move(b, t, dest);
          pending_[b] = pj;
          if (make_room(0)) {
            pending_[b] = add_to_batch(dest, 0, b, bb, true);
            move(b, dest, 0);
          } else {
            add_to_batch(dest, gpu_ep, b, bb, true);
          }
        }
        pending_src_[b] = kNoSource;
        ++promoted_blocks_;
        continue;
      }
    }
    add_to_batch(t, gpu_ep, b, bb, true);  // read through a staging buffer
  }
  // Scoring decides what to load: this layer's fetches wait for it.
  if (slot.score_cpu != kNoJob)
    for (size_t a = 0; a < nt; ++a) {
      Batch& bt = batches_[a * (nt + 1) + gpu_ep];
      if (bt.id == kNoJob) continue;
      add_dep(bt.deps, slot.score_cpu);
      add_dep(bt.deps, slot.score_fpga);
      add_dep(bt.deps, slot.score_read);
    }
  // Predictions for the next step of this layer ride behind the demand fetches.
  if (gpu_tier_ && step + 1 < steps_) {
    const uint32_t n1 = blocks_at(step + 1);
    for (uint32_t s = 0; s < batch_; ++s) {
      pred_.clear();
      prefetch_->predict(SelectInput{step + 1, layer, s, n1, nullptr, nullptr}, t_, pred_);
      for (uint32_t i : pred_) {
        if (i >= n1) continue;
        const BlockId b = t_.id(s, layer, i);
        const TierId t = t_.tier[b];
        if (t >= nt || t == 0 || prefetched_[b] || !make_room(0)) continue;
        Batch& bt = prefetch_batches_[t];
        if (bt.id == kNoJob) bt.id = board_->create();
        bt.bytes += data_bytes(b) * fraction(t, layer);
        if (!board_->done(pending_[b])) add_dep(bt.deps, pending_[b]);
        move(b, t, 0);
        pending_[b] = bt.id;
        pending_src_[b] = kNoSource;
        prefetched_[b] = 1;
        prefetch_src_[b] = t;
        ++pstats_.prefetched_blocks;
      }
    }
  }
  flush(&slot);
  slot.kv_blocks = sel_.size();
}

// The new token's KV of one layer goes into the sequence's last block;
// written down if that block does not live on the GPU.
void Simulation::append(uint64_t k) {
  const uint32_t L = model_.layers;
  const uint32_t step = static_cast<uint32_t>(k / L), layer = static_cast<uint32_t>(k % L);
  const uint32_t token = ctx_ + step;
  const double tok_bytes = static_cast<double>(model_.kv_bytes_per_token_layer());
  const size_t nt = t_.tiers.size();
  for (uint32_t s = 0; s < batch_; ++s) {
    BlockId b = t_.id(s, layer, token / bt_);
    const TierId t = t_.tier[b];
    if (t == kDropped || t >= nt) continue;
    t_.dirty[b] = 1;
    invalidate_copies(b);
    if (gpu_tier_ && t == 0) continue;
    pending_[b] = add_to_batch(nt, t, b, tok_bytes, true);
    pending_src_[b] = kNoSource;
  }
  flush(nullptr);
}

// Policies with a watermark (HKM) demote in the background once a step is
// done, so that the next step finds room without waiting.
void Simulation::background_demotion() {
  const size_t nt = t_.tiers.size();
  for (size_t t = 0; t + 1 < nt; ++t) {
    const double w = evict_->watermark(static_cast<TierId>(t));
    if (w >= 1.0) continue;
    const uint64_t limit = static_cast<uint64_t>(w * static_cast<double>(t_.tiers[t].capacity_blocks));
    while (t_.tiers[t].used_blocks > limit) {
      // Copies kept for blocks above count as use too, and go first.
      if (drop_oldest_copy(static_cast<TierId>(t))) continue;
      BlockId v = evict_->victim(static_cast<TierId>(t));
      if (v == kNoBlock || !room_below(v, static_cast<TierId>(t))) break;
      demote(v, static_cast<TierId>(t));
    }
  }
  flush(nullptr);
}

// MatKV overlaps loading the next request's precomputed KV with this
// request's decode. The next batch has this one's shape; its KV goes from the
// lowest tier to the tier above it (the GPU if there is none), layer by
// layer, on a queue of its own, so it contends with decode traffic on shared
// links but never waits behind it. Where it lands is a staging reservation:
// it is not placed in the block table.
void Simulation::load_next_request() {
  const size_t nt = t_.tiers.size();
  const size_t src = tier_dev_[nt - 1];
  const size_t dst = nt >= 2 && tier_dev_[nt - 2] != src ? tier_dev_[nt - 2] : gpu_dev_;
  if (src == dst) return;
  next_dst_dev_ = dst;
  auto loader = std::make_shared<Stream>("next request " + hw_.devices[src].name + "->" + hw_.devices[dst].name,
                                         *platform_, *board_, *timeline_);
  const double ctx_blocks = (ctx_ + bt_ - 1) / bt_;
  JobId last = kNoJob;
  for (uint32_t l = 0; l < model_.layers; ++l) {
    last = board_->create();
    const double bytes = batch_ * ctx_blocks * static_cast<double>(t_.block_bytes) * fraction(nt - 1, l);
    loader->submit(TransferJob{last, src, dst, bytes, {}, -1, 0, "next-request load"});
    next_load_bytes_ += bytes;
  }
  loader->start();
  loader->stop();  // ends once its queue is drained
  sg4::Actor::create("next request", platform_->controller(), [this, loader, last] {
    board_->wait(last);
    next_load_end_ = sg4::Engine::get_clock();
  });
}

void Simulation::drive() {
  prefill();
  prefill_end_ = sg4::Engine::get_clock();
  decode_start_ = prefill_end_;
  if (overlap_next_load_) load_next_request();
  const uint64_t N = uint64_t(steps_) * model_.layers;
  ring_.assign(65, Slot{});  // room for the deepest prefetch a policy may ask for (64)
  depth_ = std::min<uint32_t>(prefetch_->depth(), 64);
  uint64_t next = 0;
  double step_t0 = decode_start_, gpu_busy_t0 = gpu_busy_s_;
  // The links that fetches into the GPU cross: their utilization (bytes /
  // (bandwidth x time)) over the last step is what adaptive prefetch reads.
  std::vector<uint32_t> fetch_links;
  for (size_t d : tier_dev_)
    if (d != gpu_dev_)
      for (uint32_t i : platform_->route(d, gpu_dev_).stats)
        if (std::find(fetch_links.begin(), fetch_links.end(), i) == fetch_links.end()) fetch_links.push_back(i);
  std::vector<double> link_bytes_t0(platform_->stats().size(), 0.0);
  for (uint64_t k = 0; k < N; ++k) {
    if (k % model_.layers == 0 && k > 0) {
      // Adaptive prefetch sees the last step's utilisation.
      const double now = sg4::Engine::get_clock(), dt = now - step_t0;
      double link_busy = 0;
      auto& st = platform_->stats();
      for (uint32_t i : fetch_links) {
        if (dt > 0 && st[i].bandwidth_Bps > 0)
          link_busy = std::max(link_busy, (st[i].bytes - link_bytes_t0[i]) / (st[i].bandwidth_Bps * dt));
        link_bytes_t0[i] = st[i].bytes;
      }
      depth_ = std::min<uint32_t>(prefetch_->adapt_depth(dt > 0 ? (gpu_busy_s_ - gpu_busy_t0) / dt : 0.0,
                                                          std::min(1.0, link_busy)),
                                  64);
      step_t0 = now;
      gpu_busy_t0 = gpu_busy_s_;
    }
    t_.pin_stamp = k + 1;
    while (next < N && next <= k + depth_) select(next++);
    Slot& slot = ring_[k % ring_.size()];
    for (JobId j : slot.waits) board_->wait(j);
    if (slot.score_cpu != kNoJob) {
      const double tc = board_->duration(slot.score_cpu) +
                        (slot.score_move_cpu != kNoJob ? board_->duration(slot.score_move_cpu) : 0.0);
      const double tf = std::max(board_->duration(slot.score_fpga),
                                 slot.score_read != kNoJob ? board_->duration(slot.score_read) : 0.0);
      eval_->scoring()->report(tc, tf);
      cpu_score_s_ += tc;
      fpga_score_s_ += tf;
      cpu_idle_s_ += std::max(0.0, tf - tc);
      fpga_idle_s_ += std::max(0.0, tc - tf);
    }
    const double tokens = static_cast<double>(slot.kv_tokens);
    const double kv_bytes = tokens * static_cast<double>(model_.kv_bytes_per_token_layer());
    double flops = model_.weight_flops_per_token_layer() * batch_ + 4.0 * tokens * model_.heads * model_.head_dim;
    double bytes = model_.weight_bytes_per_layer() + kv_bytes;
    compute(kernel_s(flops, bytes) + slot.extra_gpu_s, "decode", static_cast<int64_t>(k / model_.layers),
            static_cast<uint32_t>(k % model_.layers), slot.kv_blocks);
    append(k);
    if (k % model_.layers == model_.layers - 1) {
      step_end_.push_back(sg4::Engine::get_clock());
      background_demotion();
    }
  }
  for (auto& s : owned_streams_) s->stop();
}

json Simulation::run(const std::string& timeline_path) {
  start_simgrid();
  platform_ = std::make_unique<Platform>(hw_, *topo_);
  // Every transfer moves whole blocks (or tokens of one): requests of one block.
  platform_->set_request_bytes(static_cast<double>(t_.block_bytes));
  board_ = std::make_unique<JobBoard>();
  timeline_ = std::make_unique<Timeline>();
  if (!timeline_path.empty()) timeline_->open(timeline_path);
  gpu_host_ = platform_->host(gpu_dev_);
  gpu_track_ = timeline_->track(Timeline::Streams, hw_.gpu + " compute");
  for (auto& st : platform_->stats()) st.track = timeline_->track(Timeline::Links, st.name);
  occupancy_track_.clear();
  if (timeline_->enabled())
    for (const auto& ti : t_.tiers) occupancy_track_.push_back(timeline_->counter_track(ti.name + " occupancy", "bytes"));
  occupancy_value_.assign(occupancy_track_.size(), -1.0);
  const size_t n = hw_.devices.size(), nt = t_.tiers.size();
  streams_.assign(n * n, nullptr);
  // One stream per ordered pair of devices the engine moves data between,
  // and one per scoring/codec device (from == to: its work queue). With one
  // copy engine per direction, every copy between the GPU and host-side
  // memory of one direction goes through a single stream.
  const bool one_engine = hw_.devices[gpu_dev_].model->copy_engines() == 1;
  Stream* engine_in = nullptr;
  Stream* engine_out = nullptr;
  auto make = [&](const std::string& name) {
    owned_streams_.push_back(std::make_unique<Stream>(name, *platform_, *board_, *timeline_));
    return owned_streams_.back().get();
  };
  auto want = [&](size_t a, size_t b) {
    if (streams_[a * n + b]) return;
    if (one_engine && a != b && (a == gpu_dev_ || b == gpu_dev_)) {
      const size_t other = a == gpu_dev_ ? b : a;
      if (hw_.devices[other].model->role() == DeviceRole::Memory) {
        Stream*& e = b == gpu_dev_ ? engine_in : engine_out;
        if (!e) e = make(hw_.gpu + (b == gpu_dev_ ? " copy engine in" : " copy engine out"));
        streams_[a * n + b] = e;
        return;
      }
    }
    streams_[a * n + b] = make(a == b ? hw_.devices[a].name + " work" : hw_.devices[a].name + "->" + hw_.devices[b].name);
  };
  std::vector<size_t> eps = tier_dev_;
  eps.push_back(gpu_dev_);
  for (size_t a : eps)
    for (size_t b : eps)
      if (a != b) want(a, b);
  if (cpu_dev_ >= 0) want(static_cast<size_t>(cpu_dev_), static_cast<size_t>(cpu_dev_));
  if (fpga_dev_ >= 0) want(static_cast<size_t>(fpga_dev_), static_cast<size_t>(fpga_dev_));
  if (ScoringSplit* sc = eval_->scoring()) {
    // B_c, B_s of the closed form: the paths the selected KV takes to the GPU.
    if (host_mem_dev_ >= 0) {
      want(static_cast<size_t>(host_mem_dev_), static_cast<size_t>(fpga_dev_));
      rates_.b_c = platform_->route(static_cast<size_t>(host_mem_dev_), gpu_dev_).bottleneck_Bps;
    }
    if (ssd_dev_ >= 0) {
      want(static_cast<size_t>(ssd_dev_), static_cast<size_t>(fpga_dev_));
      if (host_mem_dev_ >= 0) want(static_cast<size_t>(ssd_dev_), static_cast<size_t>(host_mem_dev_));
      rates_.b_s = platform_->route(static_cast<size_t>(ssd_dev_), gpu_dev_).bottleneck_Bps;
    }
    if (rates_.b_c <= 0) rates_.b_c = rates_.b_s > 0 ? rates_.b_s : 1.0;
    if (rates_.b_s <= 0) rates_.b_s = rates_.b_c;
    sc->configure(rates_);
  }
  for (auto& s : owned_streams_) s->start();
  pending_.assign(t_.size(), kNoJob);
  pending_src_.assign(t_.size(), kNoSource);
  copy_lists_.assign(nt, RecencyLists{});
  for (auto& l : copy_lists_) l.setup(t_.size(), 1);
  prefetched_.assign(t_.size(), 0);
  prefetch_src_.assign(t_.size(), 0);
  mass_of_.assign(t_.blocks_per_seq_layer, 0.f);
  recs_.assign(trace_ ? trace_->header().sequences : 0, AttentionRecord{});
  batches_.assign((nt + 1) * (nt + 1), Batch{});
  prefetch_batches_.assign(nt, Batch{});
  hits_.assign(nt + 1, 0);
  peak_blocks_.assign(nt, 0);

  // An exception must not escape an actor (SimGrid would abort): keep it,
  // end every actor, and rethrow once the engine has returned.
  std::exception_ptr failure;
  sg4::Actor::create(hw_.gpu + " compute", platform_->controller(), [this, &failure] {
    try {
      drive();
    } catch (...) {
      failure = std::current_exception();
      sg4::Actor::kill_all();
    }
  });
  sg4::Engine::get_instance()->run();
  if (failure) std::rethrow_exception(failure);
  const double end = sg4::Engine::get_clock();
  if (timeline_->enabled()) emit_occupancy();
  timeline_->close();

  // Metrics: names are the contract in docs (result contract). TPOT and
  // tokens/s are over the measured steps (after workload.warmup_steps).
  std::vector<double> all, lat;
  double prev = decode_start_;
  for (double e : step_end_) {
    all.push_back(e - prev);
    prev = e;
  }
  if (all.size() > warmup_) lat.assign(all.begin() + warmup_, all.end());
  auto mean = [](const std::vector<double>& v, size_t from) {
    return v.size() > from ? std::accumulate(v.begin() + static_cast<long>(from), v.end(), 0.0) / double(v.size() - from) : 0.0;
  };
  const double measured_s = std::accumulate(lat.begin(), lat.end(), 0.0);
  const double decode_s = step_end_.empty() ? 0 : step_end_.back() - decode_start_;
  json m;
  m["simulated_time_s"] = end;
  m["decode_time_s"] = decode_s;
  m["decode_tokens_per_s"] = measured_s > 0 ? double(batch_) * double(lat.size()) / measured_s : 0.0;
  m["mean_step_latency_s"] = mean(lat, 0);
  m["p50_step_latency_s"] = percentile(lat, 0.50);
  m["p99_step_latency_s"] = percentile(lat, 0.99);
  m["first_step_latency_s"] = all.empty() ? 0.0 : all.front();
  m["all_steps_mean_latency_s"] = mean(all, 0);
  // Steady state: the second half of the measured steps, once start-up
  // effects (write-back of the prompt, cold caches) have drained.
  m["steady_step_latency_s"] = mean(lat, lat.size() / 2);
  m["warmup_steps"] = warmup_;
  // TTFT: the first token comes out of prefill; without simulated prefill it
  // is the first decode step.
  m["ttft_s"] = prefill_compute_ || prefill_load_ ? prefill_end_ : (all.empty() ? 0.0 : all.front());
  m["gpu_busy_fraction"] = end > 0 ? gpu_busy_s_ / end : 0.0;
  // Attention recall is a mass, and needs a trace; block counts have their own name.
  if (trace_) m["attention_recall"] = total_mass_ > 0 ? used_mass_ / total_mass_ : 1.0;
  m["block_recall"] = accesses_ ? 1.0 - double(dropped_accesses_) / double(accesses_) : 1.0;
  m["block_accesses"] = accesses_;
  m["dropped_rate"] = accesses_ ? double(dropped_accesses_) / double(accesses_) : 0.0;
  m["blocks_promoted"] = promoted_blocks_;
  m["blocks_demoted"] = demoted_blocks_;
  m["blocks_written_back"] = written_back_blocks_;
  m["copies_dropped"] = copies_dropped_;
  m["blocks_dropped"] = dropped_blocks_;
  m["fetched_bytes"] = fetched_bytes_;
  m["ssd_bytes_written"] = ssd_bytes_written_;
  m["kv_block_bytes"] = t_.block_bytes;
  // Predictions still on the GPU, never used, are wasted too.
  for (size_t b = 0; b < prefetched_.size(); ++b)
    if (prefetched_[b])
      pstats_.wasted_bytes += static_cast<uint64_t>(t_.block_bytes * fraction(prefetch_src_[b], t_.layer_of(static_cast<BlockId>(b))));
  m["prefetch"] = {{"prefetched_blocks", pstats_.prefetched_blocks}, {"used_blocks", pstats_.used_blocks},
                   {"accuracy", pstats_.accuracy()},                  {"coverage", pstats_.coverage()},
                   {"wasted_bytes", pstats_.wasted_bytes}};
  if (eval_->scoring()) {
    json a;
    a["beta_mean"] = scored_layers_ ? beta_sum_ / double(scored_layers_) : 0.0;
    a["f_c_GBps"] = rates_.f_c / 1e9;
    a["f_s_GBps"] = rates_.f_s / 1e9;
    a["fpga_compute_GBps"] = fpga_compute_Bps_ / 1e9;
    a["key_bytes_scored_cpu"] = key_bytes_scored_cpu_;
    a["key_bytes_scored_fpga"] = key_bytes_scored_fpga_;
    a["key_bytes_scored_gpu"] = key_bytes_scored_gpu_;
    a["key_bytes_moved"] = key_bytes_moved_;
    a["scored_layers"] = scored_layers_;
    a["beta_final"] = eval_->scoring()->beta();
    a["cpu_busy_s"] = cpu_score_s_;
    a["fpga_busy_s"] = fpga_score_s_;
    a["cpu_idle_s"] = cpu_idle_s_;
    a["fpga_idle_s"] = fpga_idle_s_;
    if (thermal_) {
      a["fpga_peak_temperature_C"] = thermal_peak_C_;
      a["fpga_throttled_fraction"] = end > 0 ? std::min(1.0, throttled_s_ / end) : 0.0;
    }
    m["app"] = a;
  }
  if (overlap_next_load_) {
    // The next batch's first token: its KV load (overlapped with this
    // decode), then its query tokens through every layer on an idle GPU.
    const double decode_end = step_end_.empty() ? prefill_end_ : step_end_.back();
    const double q = query_tokens_, T = ctx_;
    double query_s = 0;
    for (uint32_t l = 0; l < model_.layers; ++l) {
      double flops = model_.weight_flops_per_token_layer() * q * batch_ + 4.0 * q * T * model_.heads * model_.head_dim * batch_;
      double bytes = model_.weight_bytes_per_layer() + T * batch_ * model_.kv_bytes_per_token_layer();
      query_s += kernel_s(flops, bytes);
    }
    // Every hop counts: where the load stops short of the GPU (in the tier
    // above the flash), the next batch's KV still crosses to the GPU, on an
    // idle link once this decode is done.
    double copy_s = 0;
    if (next_dst_dev_ != gpu_dev_ && next_load_bytes_ > 0) {
      const PlatformRoute& r = platform_->route(next_dst_dev_, gpu_dev_);
      copy_s = r.latency_s + next_load_bytes_ / (r.bottleneck_Bps * platform_->bandwidth_factor(next_dst_dev_, gpu_dev_, next_load_bytes_));
    }
    m["next_request"] = {{"load_end_s", next_load_end_},
                         {"load_hidden", next_load_end_ <= decode_end},
                         {"copy_to_gpu_s", copy_s},
                         {"ttft_s", std::max(0.0, next_load_end_ - decode_end) + copy_s + query_s}};
  }
  m["tiers"] = json::object();
  for (size_t t = 0; t < nt; ++t) {
    json& tj = m["tiers"][t_.tiers[t].name];
    tj["hit_rate"] = accesses_ ? double(hits_[t]) / double(accesses_) : 0.0;
    tj["peak_bytes"] = double(peak_blocks_[t]) * double(t_.block_bytes);
    tj["capacity_bytes"] = double(t_.tiers[t].capacity_blocks) * double(t_.block_bytes);
    if (hw_.devices[tier_dev_[t]].model->is_storage()) {
      tj["nand_bytes_written"] = wear_[t].nand_bytes_written();
      tj["endurance_used"] = wear_[t].life_used();
      // A number, or absent where nothing was written (the drive never wears out).
      const double y = end > 0 ? wear_[t].years_to_wear_out(wear_[t].host_bytes_written() / end) : 0.0;
      if (std::isfinite(y) && y > 0) tj["years_to_wear_out"] = y;
    }
  }
  m["links"] = json::object();
  for (const auto& st : platform_->stats()) {
    json& lj = m["links"][st.name];
    lj["bytes"] = st.bytes;
    lj["busy_fraction"] = end > 0 ? st.busy_s / end : 0.0;  // occupancy: some transfer active
    lj["utilization"] = end > 0 && st.bandwidth_Bps > 0 ? st.bytes / (st.bandwidth_Bps * end) : 0.0;
  }
  return m;
}

}  // namespace kvtier
