#include "sim/engine/layer_pipeline.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "sim/core/progress.h"
#include "sim/engine/energy_metrics.h"
#include "sim/engine/kernel_cost.h"
#include "sim/platform/platform.h"
#include "sim/platform/sim_clock.h"
#include "sim/platform/weight_stream.h"

namespace kvtier {

LayerPipeline::LayerPipeline(EngineSetup& s, EngineCounters& c, KvStore& kv, TransferPlanner& planner,
                             Platform& platform, JobBoard& board, Timeline& timeline, uint32_t gpu_track)
    : s_(s),
      c_(c),
      kv_(kv),
      t_(kv.table()),
      tp_(planner),
      platform_(platform),
      board_(board),
      timeline_(timeline),
      gpu_(platform, s.gpu_dev, c, timeline, gpu_track),
      output_(s, c, kv, board) {
  if (s_.pol.eval->scoring()) scoring_ = std::make_unique<AppScoring>(s_, c_, kv_, tp_, board_);
  if (s_.weights) offload_ = std::make_unique<WeightOffload>(s_, tp_, board_);
  mass_of_.assign(t_.blocks_per_seq_layer, 0.f);
  recs_.assign(s_.trace ? s_.trace->header().sequences : 0, AttentionRecord{});
}

// Staging buffers in use now, beside the KV the GPU tier holds now: their
// peaks, and the most GPU memory the two take together.
void LayerPipeline::note_staging(double staged) {
  c_.staging_peak_bytes = std::max(c_.staging_peak_bytes, staged);
  c_.gpu_kv_and_staging_peak_bytes = std::max(c_.gpu_kv_and_staging_peak_bytes, staged + output_.gpu_tier_bytes());
}

void LayerPipeline::flush(Slot* slot) {
  kv_.sample_occupancy(sim_now());
  tp_.flush(slot ? &slot->waits : nullptr, slot ? &slot->extra_gpu_s : nullptr);
}

// One kernel on the GPU compute stream; on the timeline a slice named for
// what it is: "prefill L<l>", "query L<l>" or "step <s> L<l>" (step < 0:
// prefill phases), with its KV blocks in the args.
void LayerPipeline::compute(double seconds, const char* phase, int64_t step, uint32_t layer, uint64_t kv_blocks,
                            uint32_t layers) {
  seconds += tp_.take_gpu_codec_s();
  if (offload_) seconds += offload_->take_codec_s();
  const GpuStream::Span span = gpu_.run(seconds);
  if (gpu_.traced()) {
    const std::string ls = " L" + std::to_string(layer) + (layers > 1 ? "-" + std::to_string(layer + layers - 1) : "");
    const std::string name = step < 0 ? std::string(phase) + ls
                             : std::string(std::strcmp(phase, "iteration") == 0 ? "iter " : "step ") + std::to_string(step) + ls;
    gpu_.slice(name, span, json{{"phase", phase}, {"layer", layer}, {"kv_blocks", kv_blocks}});
  }
}

// The prompt's own attention is what its blocks have been used for so far:
// H2O's accumulated mass, top-k's history, HKM's ranking start from it.
void LayerPipeline::seed_prompt_attention(uint32_t l, uint32_t ctx_blocks) {
  if (!s_.trace) return;
  for (uint32_t s = 0; s < s_.batch; ++s)
    if (const std::vector<float>* pm = s_.trace->prompt(s % s_.trace->header().sequences, l))
      for (uint32_t i = 0; i < ctx_blocks && i < pm->size(); ++i) kv_.seed_prompt(kv_.block(s, l, i), (*pm)[i]);
}

// The prompt blocks of layer l of sequences [s0, s0 + k) placed where
// placement puts them: written from the GPU below it (into `out`), or with
// MatKV loaded from flash (the lowest tier) into a higher one. Returns the
// most bytes one sequence wrote below.
double LayerPipeline::place_prompt(uint32_t l, uint32_t s0, uint32_t k, uint32_t ctx_blocks,
                                   PrefillOutput::StagedWrites& out) {
  double most = 0;
  // The whole prompt arrives at once: budgets (H2O) apply to the whole of
  // it, once its masses are known, not block by block as it is allocated.
  kv_.defer_budget(true);
  double gpu_kept_tokens = 0;  // prompt KV that stays on the GPU (compress_cache quantizes it there)
  for (uint32_t s = s0; s < s0 + k; ++s) {
    const double before = out.bytes;
    for (uint32_t i = 0; i < ctx_blocks; ++i) {
      BlockId b = kv_.block(s, l, i);
      const TierId t = kv_.allocate(b, ctx_blocks);
      if (s_.weights && s_.gpu_tier && t == 0) gpu_kept_tokens += double(kv_.held_tokens(b));
      if (t == kDropped || (!s_.prefill_compute && !s_.prefill_load)) continue;
      if (s_.prefill_load) {
        kv_.load_from(b, static_cast<TierId>(t_.tiers.size() - 1), l);
        continue;
      }
      if (!(s_.gpu_tier && t == 0)) {
        const JobId j = kv_.write_output(b, l);
        if (out.jobs.empty() || out.jobs.back() != j) out.jobs.push_back(j);
        out.bytes += kv_.data_bytes(b);
      }
    }
    most = std::max(most, out.bytes - before);
  }
  kv_.defer_budget(false);
  if (offload_) offload_->compress_kept_prompt(gpu_kept_tokens);
  for (uint32_t s = s0; s < s0 + k; ++s) kv_.enforce_budget(s, l);
  return most;
}

void LayerPipeline::prefill() {
  const uint32_t ctx_blocks = (s_.ctx + s_.bt - 1) / s_.bt;
  kv_.set_tokens_now(s_.ctx);
  const double T = s_.ctx;
  // MatKV: the prompt's KV was computed once and stored on flash (the lowest
  // tier); prefill loads what placement puts higher, layer by layer, and
  // computes only the query tokens once a layer's KV is there.
  std::vector<std::vector<JobId>> loads(s_.model.layers);
  double below_per_seq = 0;
  for (uint32_t l = 0; l < s_.model.layers; ++l) {
    kv_.set_clock(0, l);
    seed_prompt_attention(l, ctx_blocks);
    // A computed layer's output sits in GPU memory until it is written to
    // its tier, so the layer runs in kernels of as many sequences as that
    // memory holds (prefill_chunk). What one sequence writes below: at most
    // its whole layer at the first layer, then what the previous layer
    // wrote below per sequence (placement that keeps new blocks on the GPU
    // writes none directly, and its layers run whole).
    if (l == 0) below_per_seq = kv_.prefill_output_bytes();
    const double est = below_per_seq;
    below_per_seq = 0;
    for (uint32_t s0 = 0; s0 < s_.batch;) {
      const uint32_t k = s_.prefill_compute ? output_.chunk(s0, est) : s_.batch - s0;
      // The blocks the last kernel's output took were still being written
      // out of that room: this kernel waits until they have left.
      output_.wait_rooms();
      if (s_.prefill_compute) {
        // The embedding's rows before the first layer; the head samples after
        // the last unless query tokens (prefill_load) produce the first token.
        auto kernel = [&] {
          return prefill_kernel_s(s_, T, k) + (l == 0 ? embedding_kernel_s(s_, KernelPhase::Prefill, T * k) : 0.0) +
                 (l + 1 == s_.model.layers && !s_.prefill_load ? head_kernel_s(s_, KernelPhase::Prefill, k) : 0.0);
        };
        // The layer's weights first; compressed weights are restored for every GPU batch.
        const double extra = offload_ ? offload_->before_prefill_kernel(l, s0 == 0, T * k) : 0.0;
        compute(kernel() + extra, "prefill", -1, l, 0);
      }
      PrefillOutput::StagedWrites out;
      below_per_seq = std::max(below_per_seq, place_prompt(l, s0, k, ctx_blocks, out));
      if (s_.prefill_compute || s_.prefill_load) {
        tp_.open_ids(loads[l]);
        flush(nullptr);
      } else {
        // KV assumed in place: settle every move without simulating it.
        tp_.settle();
      }
      if (s_.prefill_compute) output_.note(std::move(out));
      output_.take_room_waits();
      s0 += k;
    }
  }
  if (s_.gpu_tier) kv_.release_room(0);  // the room prefill output took is free once written
  // The first token needs the last layer's KV in place.
  output_.wait_rooms();
  if (!s_.prefill_load) return;
  const double q = s_.query_tokens;
  for (uint32_t l = 0; l < s_.model.layers; ++l) {
    for (JobId j : loads[l]) board_.wait(j);
    compute(query_kernel_s(s_, q, T, s_.batch) + (l == 0 ? embedding_kernel_s(s_, KernelPhase::Prefill, q * s_.batch) : 0.0) +
                (l + 1 == s_.model.layers ? head_kernel_s(s_, KernelPhase::Prefill, s_.batch) : 0.0),
            "query", -1, l, 0);
  }
}

// What attention will read on the GPU (predictions may move blocks it
// reads through a staging buffer up too: those are not its data).
void LayerPipeline::note_on_gpu(Slot& slot) {
  slot.on_gpu.clear();
  for (BlockId b : sel_)
    if (s_.gpu_tier && t_.tier(b) == 0) slot.on_gpu.push_back(b);
}

LayerPipeline::Slot& LayerPipeline::open_slot(uint64_t k) {
  Slot& slot = ring_[k % ring_.size()];
  tp_.take_staged_bytes();  // earlier flushes stage nothing this slot reads
  slot.waits.clear();  // keeps its capacity: no allocation per layer
  // Rooms handed out since the last kernel (a prefill chunk's or an
  // append's new blocks) are written into by then: the next kernel waits.
  kv_.take_room_waits(slot.waits);
  slot.kv_blocks = 0;
  slot.extra_gpu_s = 0;
  slot.score_cpu = slot.score_fpga = slot.score_read = slot.score_move_cpu = kNoJob;
  return slot;
}

void LayerPipeline::select(uint64_t k) {
  const uint32_t L = s_.model.layers;
  const uint32_t step = static_cast<uint32_t>(k / L), layer = static_cast<uint32_t>(k % L);
  const size_t nt = t_.tiers.size();
  kv_.begin_layer(k + 1, step, layer, sim_now());
  Slot& slot = open_slot(k);
  // The trace's records of this (step, layer): one for every sequence, or
  // one per trace sequence (batch sequence s follows trace sequence s % S).
  if (s_.trace)
    for (AttentionRecord& r : recs_) {
      if (!s_.trace->next(r)) throw ConfigError(s_.trace_name + ": ends before step " + std::to_string(step));
      if (r.step != step || r.layer != layer)
        throw ConfigError(s_.trace_name + ": expected the record of step " + std::to_string(step) + ", layer " +
                          std::to_string(layer) + ", got step " + std::to_string(r.step) + ", layer " + std::to_string(r.layer));
    }
  const uint32_t n = s_.blocks_at(step);
  // The block that receives this step's token exists from the moment the
  // step is selected: attention reads the new token too.
  for (uint32_t s = 0; s < s_.batch; ++s) {
    BlockId nb = kv_.block(s, layer, n - 1);
    if (t_.tier(nb) == kNotCreated) {
      kv_.allocate(nb, n);
    }
  }
  sel_.clear();
  // Pass 1: what attention uses, stamped first so that none of it is evicted
  // while pass 2 makes room.
  for (uint32_t s = 0; s < s_.batch; ++s) use_blocks(step, layer, s, n, s_.trace ? &recs_[s % recs_.size()] : nullptr);

  if (scoring_) scoring_->score(slot, step, layer, n, sel_);

  // Pass 2: fetch what is below the GPU, one transfer per source tier;
  // promote what the promotion policy says.
  const size_t gpu_ep = s_.gpu_tier ? 0 : nt;
  kv_.set_tokens_now(s_.ctx + step + 1);
  fetch_selected(slot, layer);
  // Scoring decides what to load: this layer's fetches wait for it.
  if (slot.score_cpu != kNoJob)
    for (size_t a = 0; a < nt; ++a) {
      tp_.depend(a, gpu_ep, slot.score_cpu);
      tp_.depend(a, gpu_ep, slot.score_fpga);
      tp_.depend(a, gpu_ep, slot.score_read);
    }
  // Pageable host memory (FlexGen's CPU cache): the thread that launches the
  // kernels copies what this layer reads from host memory into pinned
  // buffers, a GPU batch's share at a time, each before it launches the
  // next kernel (offload_compute). The first share is copied now and the
  // layer's transfer starts after it; the others follow the kernels.
  if (offload_ && slot.host_read_bytes > 0) offload_->pin_first_share(slot.host_read_bytes, step, layer, gpu_ep);
  // What attention will read on the GPU (predictions below may move blocks it
  // reads through a staging buffer up too: those are not its data).
  if (check_) note_on_gpu(slot);
  // Predictions for the next step of this layer ride behind the demand
  // fetches; what they read from pageable host memory is copied into pinned
  // buffers first, as the demand reads are.
  if (s_.gpu_tier && step + 1 < s_.steps) {
    const uint32_t n1 = s_.blocks_at(step + 1);
    double pageable_raw = 0;
    for (uint32_t s = 0; s < s_.batch; ++s) pageable_raw += predict_for(step + 1, layer, s, n1);
    if (offload_ && pageable_raw > 0)
      offload_->pin_predicted(crossing_bytes(static_cast<TierId>(pageable_tier()), layer, pageable_raw), step, layer);
  }
  // What comes into rooms still being written out lands after those writes:
  // the kernel that reads it waits for them.
  kv_.take_room_waits(slot.waits);
  flush(&slot);
  slot.staged_bytes = tp_.take_staged_bytes();
  slot.kv_blocks = sel_.size();
}

// One sequence's part of pass 1: the blocks the evaluation policy selects
// of its `n`, stamped as used (into sel_), and what the prefetch policy observes.
void LayerPipeline::use_blocks(uint32_t step, uint32_t layer, uint32_t s, uint32_t n, const AttentionRecord* rec,
                               bool dense) {
  idx_.clear();
  if (rec)
    for (size_t i = 0; i < rec->blocks.size(); ++i) {
      mass_of_[rec->blocks[i]] = rec->mass[i];
      c_.total_mass += rec->mass[i];
    }
  SelectInput in{step, layer, s, n, rec ? &rec->blocks : nullptr, rec ? &rec->mass : nullptr};
  if (dense)
    for (uint32_t i = 0; i < n; ++i) idx_.push_back(i);
  else
    s_.pol.eval->select(in, t_, idx_);
  obs_mass_.clear();
  if (rec) {
    obs_mass_.reserve(idx_.size());
    if (used_mass_.size() < idx_.size()) used_mass_.resize(idx_.size());
  }
  // The selection is written through a pointer into room made first, and
  // counted in locals: a push_back (which may allocate) or a counter in
  // memory would make the compiler reload every pointer the loop reads, the
  // store's arrays and the policies', for every block.
  const size_t first_used = sel_.size();
  sel_.resize(first_used + idx_.size());
  BlockId* const used = sel_.data() + first_used;
  size_t k = 0;
  uint64_t dropped = 0;
  const uint32_t g = s * t_.layers + layer;
  for (uint32_t i : idx_) {
    if (i >= n) throw std::logic_error("evaluation policy selected block " + std::to_string(i) + " of " + std::to_string(n));
    const BlockId b = t_.block_at(g, i);
    const float m = rec ? mass_of_[i] : 0.f;
    if (rec) obs_mass_.push_back(m);  // the prefetch policy sees masses only where a trace gives them
    if (t_.tier(b) == kDropped) {
      ++dropped;
      continue;
    }
    if (rec) {
      c_.used_mass += m;
      used_mass_[k] = m;
    }
    used[k++] = b;
  }
  c_.accesses += idx_.size();
  c_.dropped_accesses += dropped;
  sel_.resize(first_used + k);
  kv_.use_run(used, rec ? used_mass_.data() : nullptr, k);
  kv_.accessed(used, k);
  if (!dense) s_.pol.prefetch->observe(SelectInput{step, layer, s, n, &idx_, rec ? &obs_mass_ : nullptr}, t_);
  if (rec)
    for (uint32_t b : rec->blocks) mass_of_[b] = 0.f;
}

// What crosses PCIe for `raw` bytes of KV read from tier t into the GPU:
// stored bytes where the GPU restores them, raw bytes where a host codec
// restores them before the copy.
double LayerPipeline::crossing_bytes(TierId t, uint32_t layer, double raw) const {
  const CompressionSpec& c = s_.codec[t * s_.kv_layers() + layer];
  return c.on_gpu ? raw * c.stored_fraction() : raw;
}

// Pass 2: fetch what of sel_ is below the GPU, one transfer per source
// tier; promote what the promotion policy says.
void LayerPipeline::fetch_selected(Slot& slot, uint32_t layer) {
  const size_t nt = t_.tiers.size();
  const size_t gpu_ep = s_.gpu_tier ? 0 : nt;
  // Summed in locals, written to the slot at the end (a sum in memory is
  // reloaded and stored again for every block).
  uint64_t kv_tokens = 0, cpu_tokens = 0;
  uint64_t whole = 0;  // blocks whose tokens are block_tokens (no tokens unit), added at the end
  slot.host_read_bytes = 0;
  const bool cpu_attn = s_.weights && s_.weights->plan().cpu_attention;
  const int host_tier = s_.weights ? s_.weights->homes().dram_tier : -1;
  // What is read into the GPU from pageable host memory (pin_cache false), raw bytes.
  const int pageable = pageable_tier();
  double host_raw = 0;
  // Every read into the GPU says where from: a read from pageable host
  // memory goes through the CPU's pinned-buffer copy.
  auto read_into_gpu_from = [&](size_t src, double bytes) {
    if (static_cast<int>(src) == pageable) host_raw += bytes;
  };
  // Fixed for the layer: read once here, not again for every block after
  // the policies' calls (which the compiler must assume change them).
  const bool gpu_tier = s_.gpu_tier, representative = s_.kv_representative;
  const bool tokens_unit = s_.tokens_unit;
  const uint64_t block_tokens = s_.bt;
  PromotionPolicy& promote = *s_.pol.promote;
  const bool every_block_up = promote.every_block_to_top();
  // Consecutive blocks promoted from one tier into the GPU's form a run,
  // read up as one copy once room for all of them is made
  // (KvStore::read_up_run); what room is not made for is read through a
  // staging buffer. A run ends at the first block that is anything else,
  // before that block is fetched, so every other fetch keeps its order.
  run_.clear();
  TierId run_from = 0;
  auto end_run = [&] {
    if (run_.empty()) return;
    run_read_.resize(run_.size());
    const uint32_t m = kv_.read_up_run(run_.data(), static_cast<uint32_t>(run_.size()), run_from, layer, run_read_.data());
    c_.promoted_blocks += m;
    // Bytes of a block read up are asked for only where they are counted.
    const bool from_pageable = static_cast<int>(run_from) == pageable;
    if (m == run_.size() && !from_pageable) {  // every block read up, none counted
      run_.clear();
      return;
    }
    for (size_t i = 0; i < run_.size(); ++i) {
      if (run_read_[i] && !from_pageable) continue;
      const BlockId b = run_[i];
      const double bb = kv_.data_bytes(b);
      if (!run_read_[i]) tp_.add(run_from, gpu_ep, layer, bb, kv_.pending(b));  // read through a staging buffer
      read_into_gpu_from(run_from, bb);
    }
    run_.clear();
  };
  for (BlockId b : sel_) {
    const TierId t = t_.tier(b);
    if (tokens_unit) kv_tokens += kv_.held_tokens(b);
    else ++whole;
    // A block still being written down is read where its data is: the tier
    // it is leaving, which keeps the memory until the write lands.
    const TierId at = kv_.hit(b);
    const bool draining = at != t;  // a block is read from elsewhere only while it drains
    if (gpu_tier && t == 0) {
      const JobId p = kv_.pending(b);
      if (!board_.done(p)) slot.waits.push_back(p);
      // Layer l's block waits for its own move, done or not at layer 0's selection.
      if (representative && p != kNoJob) add_dep(rep_.select_waits, p);
      continue;
    }
    if (cpu_attn) {
      const double bb = kv_.data_bytes(b);
      // FlexGen's CPU attention: the KV stays in host memory and the CPU
      // reads it there (what is on disk is read into host memory first);
      // it waits for the block's last write (the new token) to land.
      if (tokens_unit) kv_tokens -= kv_.held_tokens(b);
      else --whole;
      cpu_tokens += kv_.held_tokens(b);
      if (!board_.done(kv_.pending(b))) slot.waits.push_back(kv_.pending(b));
      if (static_cast<int>(t) != host_tier) {
        const JobId j = tp_.add(t, static_cast<size_t>(host_tier), layer, bb, kv_.pending(b));
        if (slot.waits.empty() || slot.waits.back() != j) slot.waits.push_back(j);
      }
      continue;
    }
    // Still being written down from a tier: the data is read from there
    // (the source keeps it until the write completes, unless its room was
    // given away or the data had not all arrived there when the write
    // began: then pending_src is cleared and the read waits for the write).
    // Prefill output written from the GPU's staging buffer is not kept:
    // that buffer is reused layer after layer, so a read waits for the write.
    // Whatever else is fetched comes after the run gathered so far (a
    // GPU's block, above, moves nothing).
    if (draining) {
      const double bb = kv_.data_bytes(b);
      end_run();
      const size_t src = at;
      if (gpu_tier && src == 0) continue;  // still on the GPU
      tp_.add(src, gpu_ep, layer, bb, kNoJob);
      read_into_gpu_from(src, bb);
      continue;
    }
    if (gpu_tier && (every_block_up || promote.promote(b, t, t_))) {
      const TierId dest = every_block_up ? 0 : promote.promote_to(b, t, t_);
      if (dest == 0) {
        if (!run_.empty() && run_from != t) end_run();
        run_from = t;
        run_.push_back(b);
        continue;
      }
      end_run();
      const double bb = kv_.data_bytes(b);
      bool promoted = false;
      TierId read_from = t;  // where the GPU reads b from once it is promoted
      if (dest < t && kv_.make_room(dest)) {
        // Up to an intermediate tier; then on into the GPU where it fits
        // (its copy stays in the intermediate tier), else attention reads
        // it from there.
        kv_.read_up(b, t, dest, layer);
        if (kv_.make_room(0)) {
          kv_.read_up(b, dest, 0, layer);
        } else {
          tp_.add(dest, gpu_ep, layer, bb, kv_.pending(b));
        }
        read_from = dest;
        promoted = true;
      }
      if (promoted) {
        read_into_gpu_from(read_from, bb);
        ++c_.promoted_blocks;
        continue;
      }
    }
    end_run();
    const double bb = kv_.data_bytes(b);
    tp_.add(t, gpu_ep, layer, bb, kv_.pending(b));  // read through a staging buffer
    read_into_gpu_from(t, bb);
  }
  end_run();
  slot.kv_tokens = kv_tokens + whole * block_tokens;
  slot.cpu_tokens = cpu_tokens;
  if (host_raw > 0) slot.host_read_bytes = crossing_bytes(static_cast<TierId>(pageable), layer, host_raw);
}

int LayerPipeline::pageable_tier() const {
  return s_.weights && !s_.weights->plan().pin_cache ? s_.weights->homes().dram_tier : -1;
}

double LayerPipeline::predict_for(uint32_t step1, uint32_t layer, uint32_t s, uint32_t n1) {
  pred_.clear();
  s_.pol.prefetch->predict(SelectInput{step1, layer, s, n1, nullptr, nullptr}, t_, pred_);
  const int pageable = pageable_tier();
  double pageable_raw = 0;
  for (uint32_t i : pred_) {
    if (i >= n1) continue;
    const BlockId b = t_.id(s, layer, i);
    // A prediction reads the block from the tier it is in (prefetch_up).
    const bool from_pageable = pageable >= 0 && t_.tier(b) == static_cast<TierId>(pageable);
    if (kv_.prefetch_up(b, layer) && from_pageable) pageable_raw += kv_.data_bytes(b);
  }
  return pageable_raw;
}

// The new token's KV of one layer goes into the sequence's last block;
// written down if that block does not live on the GPU.
void LayerPipeline::append(uint64_t k) {
  const uint32_t L = s_.model.layers;
  const uint32_t step = static_cast<uint32_t>(k / L), layer = static_cast<uint32_t>(k % L);
  const uint32_t token = s_.ctx + step;
  const double tok_bytes = static_cast<double>(s_.model.kv_bytes_per_token_layer());
  for (uint32_t s = 0; s < s_.batch; ++s) {
    kv_.write_kv(t_.id(s, layer, token / s_.bt), layer, tok_bytes);
  }
  flush(nullptr);
}

// MatKV overlaps loading the next request's precomputed KV with this
// request's decode. The next batch has this one's shape; its KV goes from the
// lowest tier to the tier above it (the GPU if there is none), layer by
// layer, on a queue of its own, so it contends with decode traffic on shared
// links but never waits behind it. Where it lands is a staging reservation:
// it is not placed in the block table.
void LayerPipeline::load_next_request() {
  const size_t nt = t_.tiers.size();
  const size_t src = s_.tier_dev[nt - 1];
  const bool to_gpu = !(nt >= 2 && s_.tier_dev[nt - 2] != src);
  const size_t dst = to_gpu ? s_.gpu_dev : s_.tier_dev[nt - 2];
  if (src == dst) return;
  c_.next_dst_dev = dst;
  auto loader = std::make_shared<Stream>("next request " + s_.hw.devices[src].name + "->" + s_.hw.devices[dst].name,
                                         platform_, board_, timeline_);
  // A CPU codec on the flash tier decompresses each layer in host memory as
  // it lands, on a queue of its own (so layer l+1 reads while l decompresses);
  // what then crosses to the GPU is uncompressed.
  std::shared_ptr<Stream> codec;
  const double ctx_blocks = (s_.ctx + s_.bt - 1) / s_.bt;
  JobId last = kNoJob;
  for (uint32_t l = 0; l < s_.model.layers; ++l) {
    const CompressionSpec& c = s_.codec[(nt - 1) * s_.model.layers + l];
    const double raw = s_.batch * ctx_blocks * static_cast<double>(t_.block_bytes);
    const double bytes = raw * c.stored_fraction();
    const bool host_decompress = !to_gpu && !c.on_gpu && c.decompress_Bps > 0 && c.stored_fraction() < 1.0 &&
                                 s_.fraction(nt - 2, l) >= 1.0;
    last = board_.create();
    loader->submit(TransferJob{last, src, dst, bytes, {}, -1, 0, "next-request load"});
    if (host_decompress) {
      if (!codec) codec = std::make_shared<Stream>("next request decompress", platform_, board_, timeline_);
      const JobId d = board_.create();
      codec->submit(TransferJob{d, 0, 0, 0, {last}, s_.cpu_dev, raw / c.decompress_Bps, "decompress"});
      c_.cpu_codec_s += raw / c.decompress_Bps;
      last = d;
    }
    c_.next_load_bytes += bytes;
    c_.next_copy_bytes += host_decompress ? raw : bytes;
  }
  loader->start();
  loader->stop();  // ends once its queue is drained
  if (codec) {
    codec->start();
    codec->stop();
  }
  start_actor(platform_, "next request", [this, loader, codec, last] {
    board_.wait(last);
    c_.next_load_end = sim_now();
  });
}

// Adaptive prefetch reads, once a step ends, how busy the GPU was over it
// and the utilization (bytes / (bandwidth x time)) of the links fetches into
// the GPU cross.
void LayerPipeline::start_depth_adaptation() {
  step_t0_ = c_.decode_start;
  gpu_busy_t0_ = c_.gpu_busy_s;
  fetch_links_.clear();
  for (size_t d : s_.tier_dev)
    if (d != s_.gpu_dev)
      for (uint32_t i : platform_.route(d, s_.gpu_dev).stats)
        if (std::find(fetch_links_.begin(), fetch_links_.end(), i) == fetch_links_.end()) fetch_links_.push_back(i);
  link_bytes_t0_.assign(platform_.stats().size(), 0.0);
}

void LayerPipeline::adapt_depth() {
  const double now = sim_now(), dt = now - step_t0_;
  double link_busy = 0;
  auto& st = platform_.stats();
  for (uint32_t i : fetch_links_) {
    if (dt > 0 && st[i].bandwidth_Bps > 0)
      link_busy = std::max(link_busy, (st[i].bytes - link_bytes_t0_[i]) / (st[i].bandwidth_Bps * dt));
    link_bytes_t0_[i] = st[i].bytes;
  }
  depth_ = std::min<uint32_t>(
      s_.pol.prefetch->adapt_depth(dt > 0 ? (c_.gpu_busy_s - gpu_busy_t0_) / dt : 0.0, std::min(1.0, link_busy)), 64);
  step_t0_ = now;
  gpu_busy_t0_ = c_.gpu_busy_s;
}

// Decode layer computation k: its kernel, or under policies.weights its GPU
// batches sharing the weight load `weights_job`.
void LayerPipeline::compute_layer(Slot& slot, uint64_t k, JobId weights_job) {
  const int64_t step = static_cast<int64_t>(k / s_.model.layers);
  const uint32_t layer = static_cast<uint32_t>(k % s_.model.layers);
  if (offload_) {
    offload_->run_layer(slot, k, weights_job, [&](double seconds) { compute(seconds, "decode", step, layer, slot.kv_blocks); });
    return;
  }
  // The embedding's rows of the step's tokens before the first layer, the head after the last.
  const double ends = (layer == 0 ? embedding_kernel_s(s_, KernelPhase::Decode, s_.batch) : 0.0) +
                      (layer + 1 == s_.model.layers ? head_kernel_s(s_, KernelPhase::Decode, s_.batch) : 0.0);
  compute(decode_kernel_s(s_, s_.batch, static_cast<double>(slot.kv_tokens)) + ends + slot.extra_gpu_s, "decode", step,
          layer, slot.kv_blocks);
}

void LayerPipeline::drive() {
  Progress progress("decode", s_.steps, "steps");
  if (offload_) offload_->set_iterations((s_.prefill_compute ? s_.model.layers : 0) + uint64_t(s_.steps) * s_.model.layers);
  prefill();
  c_.prefill_end = sim_now();
  c_.decode_start = c_.prefill_end;
  c_.gpu_busy_at_decode = c_.gpu_busy_s;
  c_.link_busy_at_decode = link_busy_now(platform_, c_.decode_start);
  c_.work_at_decode = platform_.work_s(), c_.link_bytes_at_decode = link_bytes_now(platform_);
  if (s_.overlap_next_load) load_next_request();
  const uint64_t N = uint64_t(s_.steps) * s_.model.layers;
  ring_.assign(65, Slot{});  // room for the deepest prefetch a policy may ask for (64)
  depth_ = std::min<uint32_t>(s_.pol.prefetch->depth(), 64);
  uint64_t next = 0;
  start_depth_adaptation();
  for (uint64_t k = 0; k < N; ++k) {
    if (k % s_.model.layers == 0 && k > 0) adapt_depth();
    kv_.pin_from(k + 1);
    // This layer's weights (and, with overlap, the next layer's) are issued
    // before the next layer's KV is selected: FlexGen loads layer l+1's
    // weights as layer l starts, ahead of the cache loads of its GPU batches.
    const JobId weights_job = offload_ ? offload_->issue_weights(static_cast<uint32_t>(k % s_.model.layers),
                                                                 static_cast<int32_t>(k / s_.model.layers))
                                       : kNoJob;
    // With pageable KV the thread that launches the kernels copies the next
    // layer's KV before launching this one, and FlexGen synchronises every
    // stream at the end of each iteration: this layer's KV has arrived
    // before that copy starts. (With pinned KV the order changes nothing.)
    if (s_.weights && !s_.weights->plan().pin_cache) {
      while (next < N && next <= k) select(next++);
      for (JobId j : ring_[k % ring_.size()].waits) board_.wait(j);
    }
    while (next < N && next <= k + depth_) select(next++);
    Slot& slot = ring_[k % ring_.size()];
    for (JobId j : slot.waits) board_.wait(j);
    // Staging buffers in use while this layer computes: its own KV read
    // through the GPU and that of the layers fetched ahead of it.
    double staged = 0;
    for (uint64_t j = k; j < next; ++j) staged += ring_[j % ring_.size()].staged_bytes;
    note_staging(staged);
    if (check_) check_->before_attention(static_cast<uint32_t>(k / s_.model.layers), static_cast<uint32_t>(k % s_.model.layers), slot.on_gpu);
    if (scoring_) scoring_->report(slot);
    compute_layer(slot, k, weights_job);
    append(k);
    if (k % s_.model.layers == s_.model.layers - 1) {
      c_.step_end.push_back(sim_now());
      progress.update(static_cast<double>(c_.step_end.size()));
      if (k + 1 == N) c_.link_busy_after_decode = link_busy_now(platform_, c_.step_end.back());
      kv_.background_demotion();
      flush(nullptr);
      if (check_) check_->after_step(static_cast<uint32_t>(k / s_.model.layers));
    }
  }
  tp_.stop();
}

// ---- serving (serving.kv "tiered") ----

void LayerPipeline::select_iteration(uint64_t index, uint32_t layer, const std::vector<IterationSeq>& seqs) {
  const uint64_t k = clock_base_ + layer;
  kv_.begin_layer(k + 1, static_cast<uint32_t>(index), layer, sim_now());
  Slot& slot = open_slot(k);
  slot.seq_tokens.clear();
  sel_.clear();
  for (const IterationSeq& q : seqs) {
    // Decode reads its blocks and the one the new token goes into, which
    // exists from now (as in decode); a prefill chunk reads the KV before it.
    uint32_t n = (q.past + s_.bt - 1) / s_.bt;
    if (!q.prefill) {
      n = q.past / s_.bt + 1;
      const BlockId nb = kv_.block(q.seq, layer, n - 1);
      if (t_.tier(nb) == kNotCreated) kv_.allocate(nb, n);
    }
    if (q.cached_tokens) load_cached(q, layer);
    const AttentionRecord* rec = nullptr;
    if (!q.prefill && q.attention) {
      // A recomputed request's prefill produced a token its decode did not:
      // the records of steps it skipped are passed over.
      bool more = q.attention->next(iter_rec_);
      while (more && iter_rec_.step < q.step) more = q.attention->next(iter_rec_);
      if (!more || iter_rec_.step != q.step || iter_rec_.layer != layer)
        throw std::logic_error("serving.attention: sequence " + std::to_string(q.seq) + " has no record of step " +
                               std::to_string(q.step) + ", layer " + std::to_string(layer));
      rec = &iter_rec_;
    }
    const size_t before = sel_.size();
    if (n > 0) use_blocks(q.step, layer, q.seq, n, rec, q.prefill);
    slot.seq_tokens.push_back(uint64_t(sel_.size() - before) * s_.bt);
  }
  fetch_selected(slot, layer);
  if (check_) note_on_gpu(slot);
  // Predictions for each sequence's next step of this layer ride behind the
  // demand fetches (host memory is pinned in serving: nothing to copy).
  if (s_.gpu_tier)
    for (const IterationSeq& q : seqs)
      if (!q.prefill && q.predict) predict_for(q.step + 1, layer, q.seq, (q.past + 1) / s_.bt + 1);
  kv_.take_room_waits(slot.waits);
  flush(&slot);
  slot.staged_bytes = tp_.take_staged_bytes();
  slot.kv_blocks = sel_.size();
}

// Each block's tokens come from the cache tiers in the order the cached
// tokens were found; a block that spans two tiers is read from both, the
// second read after the first.
void LayerPipeline::load_cached(const IterationSeq& q, uint32_t layer) {
  const double tok_bytes = static_cast<double>(s_.kv_unit_bytes_per_token());  // a block-table layer's
  const std::vector<uint32_t>& from = *q.cached_tokens;
  const uint32_t n = (q.past + s_.bt - 1) / s_.bt, end = (q.past + q.tokens + s_.bt - 1) / s_.bt;
  size_t u = 0;
  uint32_t left = from.empty() ? 0 : from[0];  // tokens still to come from tier u
  kv_.defer_budget(true);
  for (uint32_t i = 0; i < n; ++i) {
    const BlockId b = kv_.block(q.seq, layer, i);
    if (t_.tier(b) == kNotCreated) kv_.allocate(b, end);
    uint32_t tokens = std::min(q.past, (i + 1) * s_.bt) - i * s_.bt;
    JobId after = q.cached_after;
    while (tokens > 0 && u < from.size()) {
      if (left == 0) {
        if (++u < from.size()) left = from[u];
        continue;
      }
      const uint32_t k = std::min(tokens, left);
      const JobId j = kv_.load_cached(b, static_cast<TierId>(q.cache_tier0 + u), layer, double(k) * tok_bytes, after);
      if (j != kNoJob) after = j;
      tokens -= k;
      left -= k;
    }
  }
  kv_.defer_budget(false);
  kv_.enforce_budget(q.seq, layer);
}

// What the layer computed goes into the blocks: a decode token into its
// sequence's last block; a prefill chunk into the blocks it fills, new ones
// placed (and written down, whole, where placement puts them below the GPU)
// with the chunk's budget applied once all of it has arrived.
void LayerPipeline::append_iteration(uint32_t layer, const std::vector<IterationSeq>& seqs) {
  const double tok_bytes = static_cast<double>(s_.kv_unit_bytes_per_token());  // a block-table layer's
  std::vector<PrefillOutput::StagedWrites> staged;
  auto write_into = [&](BlockId b, double bytes) { kv_.write_kv(b, layer, bytes); };
  for (const IterationSeq& q : seqs) {
    if (!q.prefill) {
      write_into(t_.id(q.seq, layer, q.past / s_.bt), tok_bytes);
      continue;
    }
    const uint32_t first = q.past / s_.bt, end = (q.past + q.tokens + s_.bt - 1) / s_.bt;
    PrefillOutput::StagedWrites out;  // the chunk's new blocks written below, from GPU memory
    kv_.defer_budget(true);
    for (uint32_t i = first; i < end; ++i) {
      const BlockId b = kv_.block(q.seq, layer, i);
      if (t_.tier(b) != kNotCreated) {  // the block the previous chunk left part-filled
        const uint32_t lo = std::max(q.past, i * s_.bt), hi = std::min(q.past + q.tokens, (i + 1) * s_.bt);
        write_into(b, double(hi - lo) * tok_bytes);
        continue;
      }
      // The prompt's own attention is what its blocks have been used for so
      // far (as in the single-batch engine's prefill).
      if (const std::vector<float>* pm = q.attention ? q.attention->prompt(0, layer) : nullptr)
        if (i < pm->size()) kv_.seed_prompt(b, (*pm)[i]);
      const TierId t = kv_.allocate(b, end);
      if (t == kDropped || (s_.gpu_tier && t == 0)) continue;
      const JobId j = kv_.write_output(b, layer);
      if (out.jobs.empty() || out.jobs.back() != j) out.jobs.push_back(j);
      out.bytes += kv_.data_bytes(b);
    }
    kv_.defer_budget(false);
    kv_.enforce_budget(q.seq, layer);
    staged.push_back(std::move(out));
  }
  flush(nullptr);
  if (s_.kv_representative) rep_.staged = staged;  // layer l's are these, as layer l's jobs
  // Held in GPU memory until written (measured; serving does not hold prefill back for it).
  for (PrefillOutput::StagedWrites& w : staged) output_.note(std::move(w));
  staged.clear();
}

// One serving iteration, layer by layer: each layer's selection `depth`
// layers ahead of its kernel, its new KV after it. With one representative
// layer (serving.kv_layers) the loop is the same; only where a layer selects
// and appends differs (select_layer, append_layer).
void LayerPipeline::run_iteration(uint64_t index, const std::vector<IterationSeq>& seqs, bool more_after) {
  const uint32_t L = s_.model.layers;
  shape_.clear();
  for (const IterationSeq& q : seqs) shape_.push_back(KernelSeq{q.past, q.tokens, q.prefill, q.ends_prompt});
  const PassEnds ends = iteration_ends_s(s_, shape_);
  const std::vector<KernelSeq>& shape = shape_;
  const double restore_s = weight_restore_s(s_);
  if (ring_.empty()) ring_.assign(65, Slot{});
  if (s_.kv_all_layers) {
    run_iteration_whole_blocks(index, seqs, restore_s, ends);
    return;
  }
  const bool rep = s_.kv_representative;
  depth_ = std::min<uint32_t>(s_.pol.prefetch->depth(), 64);
  if (rep) begin_representative();
  uint32_t next = 0;
  for (uint32_t l = 0; l < L; ++l) {
    const uint64_t k = clock_base_ + l;
    // A representative layer's blocks stay pinned for the whole iteration
    // (begin_representative): they stand for every layer's.
    if (!rep) kv_.pin_from(k + 1);
    JobId weights = kNoJob;
    if (s_.weights) {
      // The next layer's load is issued now, across iterations too while requests remain.
      auto st = [this](size_t a, size_t b) -> Stream& { return tp_.stream(a, b); };
      weights = s_.weights->issue(l, static_cast<int32_t>(index), l + 1 < L || more_after, board_, st);
    }
    while (next < L && next <= l + depth_) select_layer(index, next++, seqs);
    Slot& slot = ring_[k % ring_.size()];
    for (JobId j : slot.waits) board_.wait(j);
    double staged = 0;
    for (uint64_t j = k; j < clock_base_ + next; ++j) staged += ring_[j % ring_.size()].staged_bytes;
    represent_gpu(next, l);
    note_staging(staged);
    if (s_.weights) s_.weights->await(weights, board_);
    // The checker's table holds the layers the store holds: layer 0 alone with a representative layer.
    if (check_) check_->before_attention(static_cast<uint32_t>(index), rep ? 0 : l, slot.on_gpu);
    // As in the single-batch prefill: the rooms the last layer's new blocks took must be free first.
    output_.wait_rooms();
    const double end_s = (l == 0 ? ends.first_s : 0.0) + (l + 1 == L ? ends.last_s : 0.0);
    compute(iteration_kernel_s(s_, s_.bt, shape, &slot.seq_tokens) + restore_s + end_s + slot.extra_gpu_s, "iteration",
            static_cast<int64_t>(index), l, slot.kv_blocks);
    represent_gpu(next, l + 1);
    append_layer(l, seqs);
    output_.take_room_waits();
  }
  if (rep) output_.represent_gpu_blocks(0);
  output_.wait_rooms();
  clock_base_ += L;
  if (rep) note_representative_exactness();
  end_iteration(index, seqs);
  if (rep) forget_done_layer_jobs();
}

void LayerPipeline::select_layer(uint64_t index, uint32_t layer, const std::vector<IterationSeq>& seqs) {
  if (!s_.kv_representative) {
    select_iteration(index, layer, seqs);
    return;
  }
  if (layer > 0) {
    reissue_select(layer);
    return;
  }
  rep_.select_waits.clear();
  tp_.record(true);
  select_iteration(index, 0, seqs);
  tp_.record(false);
  tp_.take_issued(rep_.select_log);
  resolve_log(rep_.select_log, rep_.select_asked);
  rep_.select_wait_srcs.clear();
  for (JobId j : rep_.select_waits) {
    const JobSource src = source_of(j);
    if (!settled(src)) rep_.select_wait_srcs.push_back(src);
  }
  const Slot& slot = ring_[clock_base_ % ring_.size()];
  rep_.seq_tokens = slot.seq_tokens;
  rep_.kv_blocks = slot.kv_blocks;
  rep_.gpu_selected = s_.gpu_tier ? t_.tiers[0].occupied_blocks() : 0;
  rep_.gpu_appended = rep_.gpu_selected;
}

void LayerPipeline::append_layer(uint32_t layer, const std::vector<IterationSeq>& seqs) {
  if (!s_.kv_representative) {
    append_iteration(layer, seqs);
    return;
  }
  if (layer > 0) {
    reissue_append(layer);
    return;
  }
  tp_.record(true);
  append_iteration(0, seqs);
  tp_.record(false);
  tp_.take_issued(rep_.append_log);
  resolve_log(rep_.append_log, rep_.append_asked);
  rep_.gpu_appended = s_.gpu_tier ? t_.tiers[0].occupied_blocks() : 0;
  rep_appended_ = true;
}

void LayerPipeline::end_iteration(uint64_t index, const std::vector<IterationSeq>& seqs) {
  kv_.background_demotion();
  flush(nullptr);
  if (check_) {
    std::vector<uint32_t> created(t_.batch, 0);  // every other sequence's blocks may be anything it kept
    for (const IterationSeq& q : seqs) created[q.seq] = (q.past + q.tokens + s_.bt - 1) / s_.bt;
    check_->after_step(static_cast<uint32_t>(index), &created);
  }
}

// serving.kv_unit "all_layers": the block table's one layer holds every
// model layer's KV of its tokens. Before layer 0's kernel each sequence's
// blocks are selected once (dense), room is made and what is below the GPU
// is fetched whole, as vLLM swaps in before it executes; layer 0's kernel
// waits for it and the kernels of the other layers follow on the GPU
// stream, each timed as the per-layer mode times it. The new KV of every
// layer (a decode token, a prefill chunk) goes into its blocks once, after
// the last layer, with all layers' bytes, and prefill's new blocks are
// placed once.
void LayerPipeline::run_iteration_whole_blocks(uint64_t index, const std::vector<IterationSeq>& seqs, double restore_s,
                                               const PassEnds& ends) {
  const uint32_t L = s_.model.layers;
  const uint64_t k = clock_base_;
  kv_.pin_from(k + 1);
  select_iteration(index, 0, seqs);
  Slot& slot = ring_[k % ring_.size()];
  for (JobId j : slot.waits) board_.wait(j);
  note_staging(slot.staged_bytes);
  if (check_) check_->before_attention(static_cast<uint32_t>(index), 0, slot.on_gpu);
  output_.wait_rooms();
  // Each layer's kernel reads the same blocks (dense): one cost, L kernels;
  // what the fetch's GPU codec costs goes to the first.
  const double kernel_s = iteration_kernel_s(s_, s_.bt, shape_, &slot.seq_tokens) + restore_s;
  if (coarsen_) {
    // Nothing is loaded into layers 1..L-1 and nothing waits between them:
    // one activity of the kernels' summed time (the same end, up to the
    // rounding of adding the kernels before adding them to the clock).
    double total = kernel_s + ends.first_s + slot.extra_gpu_s;
    for (uint32_t l = 1; l < L; ++l) total += kernel_s;
    total += ends.last_s;
    compute(total, "iteration", static_cast<int64_t>(index), 0, slot.kv_blocks, L);
  } else {
    for (uint32_t l = 0; l < L; ++l)
      compute(kernel_s + (l == 0 ? ends.first_s + slot.extra_gpu_s : 0.0) + (l + 1 == L ? ends.last_s : 0.0), "iteration",
              static_cast<int64_t>(index), l, slot.kv_blocks);
  }
  append_iteration(0, seqs);
  output_.take_room_waits();
  output_.wait_rooms();
  clock_base_ += 1;
  end_iteration(index, seqs);
}

void LayerPipeline::release(uint32_t seq) { kv_.release_sequence(seq); }

// serving.kv_layers "representative": the iteration of run_iteration, layer
// by layer at the same points, but only layer 0 selects, fetches and appends
// in the block table (which holds layer 0's blocks). Its flushes' batches
// (per endpoint pair: bytes, stored bytes, codec work, pieces, what each was
// asked to wait for) are issued again as layer l's where the full run
// issues layer l's: its selection `depth` layers ahead of compute, its
// append after its kernel, each job waiting for layer l's own jobs (layer
// 0's mapped to layer l's), each kernel for its own layer's fetches. Where
// every layer decides alike this is the full run's timeline; what could make
// layers decide differently is noted in rep_why_.
void LayerPipeline::begin_representative() {
  rep_.gpu_start = s_.gpu_tier ? t_.tiers[0].occupied_blocks() : 0;
  rep_.gpu_selected = rep_.gpu_appended = rep_.gpu_start;
  rep_appended_ = false;
  kv_.pin_from(clock_base_ + 1);
}

// What layer 0's store answered by time, or decided because a tier (an Lth
// of it) filled, may not be what every layer's would have.
void LayerPipeline::note_representative_exactness() {
  if (!rep_why_.empty()) return;
  if (c_.demoted_blocks || c_.dropped_blocks || c_.copies_dropped || c_.dropped_accesses)
    rep_why_ = "blocks left a tier (demoted, dropped or copies dropped): in the full run every layer's blocks share "
               "each tier and its eviction order";
  for (size_t t = 0; t < t_.tiers.size() && rep_why_.empty(); ++t)
    if (c_.peak_blocks[t] >= t_.tiers[t].capacity_blocks)
      rep_why_ = "tier " + t_.tiers[t].name + " filled its Lth share (" + std::to_string(t_.tiers[t].capacity_blocks) +
                 " blocks of one layer): in the full run layers share the whole of it";
}

// Jobs no layer can wait for any longer (each layer's done) leave the map.
void LayerPipeline::forget_done_layer_jobs() {
  for (auto it = layer_jobs_.begin(); it != layer_jobs_.end();) {
    bool done = board_.done(it->first);
    for (JobId j : it->second) done = done && board_.done(j);
    it = done ? layer_jobs_.erase(it) : std::next(it);
  }
}

// The GPU tier's blocks in the full run while `selected` layers have been
// selected and `appended` appended: every layer's at the start, and what
// layer 0's selection and append took (its decode blocks, promotions,
// predictions; its prefill output kept on the GPU) once for each layer that
// has done them. The block table holds layer 0's: the rest are the other
// layers' (during layer 0's append its own new blocks count as it takes them).
void LayerPipeline::represent_gpu(uint32_t selected, uint32_t appended) {
  if (!s_.kv_representative || !s_.gpu_tier) return;
  const double L = s_.model.layers, start = double(rep_.gpu_start);
  const double sel = double(rep_.gpu_selected) - start;
  const double app = rep_appended_ ? double(rep_.gpu_appended) - double(rep_.gpu_selected) : 0.0;
  output_.represent_gpu_blocks((L - 1) * start + double(selected - 1) * sel + double(appended > 0 ? appended - 1 : 0) * app);
}

JobId LayerPipeline::layer_job(JobId j, uint32_t layer) const { return source_of(j).job_of(layer); }

void LayerPipeline::add_layer_jobs(uint32_t layer, const std::vector<std::pair<JobId, JobId>>& ids) {
  for (const auto& [j0, jl] : ids) {
    std::vector<JobId>& v = layer_jobs_[j0];
    if (v.size() + 1 != layer) throw std::logic_error("representative layer: layer " + std::to_string(layer) + " issued out of order");
    v.push_back(jl);
  }
}

// Where layer l's job for layer 0's job j will be found, looked up once an
// iteration: each layer's reissue then reads it without a lookup. A job of
// either of this iteration's logs gets its entry now (empty until layer 1
// issues it), so that the other log's batches can name it. A job that no
// layer has an entry for and that is done stays done: it is passed over
// once here rather than at every layer (most of what blocks last waited for).
LayerPipeline::JobSource LayerPipeline::source_of(JobId j) const {
  JobSource src;
  src.self = j;
  if (j == kNoJob) return src;
  const auto it = layer_jobs_.find(j);
  if (it != layer_jobs_.end()) src.of_layers = &it->second;
  return src;
}

JobId LayerPipeline::JobSource::job_of(uint32_t layer) const {
  if (!of_layers) return self;
  if (of_layers->size() < layer) throw std::logic_error("representative layer: job of layer " + std::to_string(layer) + " not issued yet");
  return (*of_layers)[layer - 1];
}

void LayerPipeline::resolve_log(const std::vector<TransferPlanner::Issued>& log, std::vector<AskedSource>& into) {
  for (const TransferPlanner::Issued& is : log) layer_jobs_[is.batch.id];  // this log's own jobs, mapped as issued
  into.clear();
  for (size_t i = 0; i < log.size(); ++i)
    for (JobId j : log[i].batch.asked) {
      AskedSource a;
      a.batch = static_cast<uint32_t>(i);
      // A batch of this log: its new job where the log is issued again.
      for (size_t k = 0; k < log.size() && a.in_log == UINT32_MAX; ++k)
        if (log[k].batch.id == j) a.in_log = static_cast<uint32_t>(k);
      if (a.in_log == UINT32_MAX) {
        a.src = source_of(j);
        if (settled(a.src)) continue;
      }
      into.push_back(a);
    }
}

const std::vector<TransferPlanner::Asked>& LayerPipeline::asked_for(const std::vector<AskedSource>& srcs, uint32_t layer) {
  asked_now_.clear();
  for (const AskedSource& a : srcs) {
    TransferPlanner::Asked x;
    x.batch = a.batch;
    x.in_log = a.in_log;
    if (a.in_log == UINT32_MAX) x.job = a.src.job_of(layer);
    asked_now_.push_back(x);
  }
  return asked_now_;
}

// Layer l's selection: layer 0's waits and batches, as layer l's.
void LayerPipeline::reissue_select(uint32_t layer) {
  const uint64_t k = clock_base_ + layer;
  Slot& slot = open_slot(k);
  const Slot& first = ring_[clock_base_ % ring_.size()];
  slot.seq_tokens = rep_.seq_tokens;
  slot.on_gpu = first.on_gpu;
  kv_.sample_occupancy(sim_now());
  rep_ids_.clear();
  const size_t mark = slot.waits.size();
  tp_.reissue(rep_.select_log, asked_for(rep_.select_asked, layer), &slot.waits, &slot.extra_gpu_s, rep_ids_);
  add_layer_jobs(layer, rep_ids_);
  // Layer 0's waits as layer l's, once layer l's batches have their jobs: a
  // block of the GPU may wait for a job its own selection issued (a read
  // from the prefix cache), which is layer l's new one. Ahead of the
  // batches' own, in the order layer 0 waits.
  rep_waits_.clear();
  for (const JobSource& src : rep_.select_wait_srcs) {
    const JobId m = src.job_of(layer);
    if (!board_.done(m)) rep_waits_.push_back(m);
  }
  slot.waits.insert(slot.waits.begin() + static_cast<std::ptrdiff_t>(mark), rep_waits_.begin(), rep_waits_.end());
  slot.staged_bytes = tp_.take_staged_bytes();
  slot.kv_blocks = rep_.kv_blocks;
}

// Layer l's new KV: layer 0's writes as layer l's, and its prefill output
// held in GPU memory until those writes land.
void LayerPipeline::reissue_append(uint32_t layer) {
  kv_.sample_occupancy(sim_now());
  rep_ids_.clear();
  tp_.reissue(rep_.append_log, asked_for(rep_.append_asked, layer), nullptr, nullptr, rep_ids_);
  add_layer_jobs(layer, rep_ids_);
  for (const PrefillOutput::StagedWrites& w : rep_.staged) {
    PrefillOutput::StagedWrites m;
    m.bytes = w.bytes;
    for (JobId j : w.jobs) m.jobs.push_back(layer_job(j, layer));
    output_.note(std::move(m));
  }
}

}  // namespace kvtier
