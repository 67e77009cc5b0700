#include "sim/engine/scoring.h"

#include <algorithm>
#include <string>

#include "sim/platform/platform.h"
#include "sim/platform/sim_clock.h"

namespace kvtier {

AppScoring::AppScoring(EngineSetup& s, EngineCounters& c, const KvStore& kv, TransferPlanner& planner, JobBoard& board)
    : s_(s), c_(c), kv_(kv), t_(kv.table()), tp_(planner), board_(board) {}

// The devices that score and where each tier's keys are scored, the
// scoring rates f_c and f_s, and the copy of the keys in the FPGA's memory.
void AppScoring::bind(EngineSetup& s, const BlockTable& table, const std::string& policy) {
  if (s.cpu_dev < 0 || s.fpga_dev < 0)
    throw ConfigError("policies.evaluation: '" + policy +
                      "' splits scoring between a CPU and an FPGA; hardware.devices needs a device of kind cpu and one of "
                      "kind ku15p");
  if (const ThermalParams* tp = fpga_thermal(*s.hw.devices[static_cast<size_t>(s.fpga_dev)].model))
    s.thermal = std::make_unique<ThermalModel>(*tp);
  // Keys are scored where they live: each tier below the GPU must be host
  // memory (the CPU scores it) or the SmartSSD next to the FPGA.
  for (size_t t = 0; t < s.tier_dev.size(); ++t) {
    const size_t d = s.tier_dev[t];
    if (d == s.gpu_dev) continue;
    const DeviceModel& dm = *s.hw.devices[d].model;
    if (s.hw.devices[d].kind == "smartssd" && s.ssd_dev < 0) s.ssd_dev = static_cast<int>(d);
    else if (dm.role() == DeviceRole::Memory && s.host_mem_dev < 0) s.host_mem_dev = static_cast<int>(d);
    else
      throw ConfigError("policies.evaluation: '" + policy +
                        "' scores keys where they live, host memory on the CPU and a SmartSSD on its FPGA; tier '" +
                        s.hw.tiers[t] + "' (kind " + s.hw.devices[d].kind + ") has no scorer");
  }
  const int bits = s.pol.eval->scoring()->bits();
  s.rates.f_c = s.hw.devices[static_cast<size_t>(s.cpu_dev)].model->scoring_Bps(bits);
  if (s.host_mem_dev >= 0)  // q.K is one multiply per key byte: the CPU is capped by its memory
    s.rates.f_c = std::min(s.rates.f_c, s.hw.devices[static_cast<size_t>(s.host_mem_dev)].model->read_Bps());
  s.fpga_compute_Bps = s.hw.devices[static_cast<size_t>(s.fpga_dev)].model->scoring_Bps(bits);
  s.rates.f_s = s.fpga_compute_Bps;
  const ScoringSplit& sc = *s.pol.eval->scoring();
  if (sc.key_copy_in_fpga_memory()) {
    const FpgaMemory* m = fpga_memory(*s.hw.devices[static_cast<size_t>(s.fpga_dev)].model);
    if (!m || !(m->bytes > 0))
      throw ConfigError("policies.evaluation.key_copy: 'fpga_dram' needs memory on the FPGA; hardware.devices." +
                        s.hw.devices[static_cast<size_t>(s.fpga_dev)].name + ".dram_GB is 0");
    s.fpga_mem = *m;
    for (size_t t = 0; t < s.tier_dev.size(); ++t)
      if (static_cast<int>(s.tier_dev[t]) == s.ssd_dev) s.key_copy_tier = static_cast<int>(t);
  }
  // The keys of one block are its key half at the scoring precision, read
  // as one request of that size (a separate copy, contiguous per block).
  const double key_slice = static_cast<double>(table.block_bytes) / 2.0 * bits / 16.0;
  if (s.key_copy_tier >= 0) {
    // The closed form's f_s takes the copy as fitting: the FPGA then reads
    // its keys from its memory.
    s.rates.f_s = std::min(s.rates.f_s, s.fpga_mem.Bps);
  } else if (s.ssd_dev >= 0) {  // the FPGA streams keys off its NAND: capped by that path at key-slice requests
    const DeviceModel& ssd = *s.hw.devices[static_cast<size_t>(s.ssd_dev)].model;
    s.rates.f_s = std::min(s.rates.f_s, ssd.read_Bps() * ssd.read_efficiency(key_slice, 1));
  }
  if (sc.attends_in_storage()) bind_storage_attention(s);
  if (s.rates.f_c <= 0 || s.rates.f_s <= 0)
    throw ConfigError("hardware.devices: the cpu and ku15p devices must score keys (scoring rate 0 at " +
                      std::to_string(bits) + " bits)");
}

// Near-storage attention: the SmartSSD's FPGA attends the drive's blocks
// with the kernel the policy loads into it, over the FP16 KV as stored, with
// the query of the layer being computed. The query exists only when the
// layer runs, so the selection must not run ahead of it (prefetch depth 0).
void AppScoring::bind_storage_attention(EngineSetup& s) {
  const DeviceEntry& fd = s.hw.devices[static_cast<size_t>(s.fpga_dev)];
  if (!fpga_kernel(*fd.model))
    throw ConfigError("hardware.devices." + fd.name + ".kind: near_storage attention runs on a ku15p FPGA, not a " +
                      fd.kind);
  if (s.model.dtype_bytes != 2)
    throw ConfigError("model.dtype_bytes: near_storage attention's kernel reads FP16 KV; expected 2, got " +
                      std::to_string(s.model.dtype_bytes));
  for (size_t t = 0; t < s.tier_dev.size(); ++t)
    if (static_cast<int>(s.tier_dev[t]) == s.ssd_dev) s.storage_attention_tier = static_cast<int>(t);
  if (s.storage_attention_tier < 0)
    throw ConfigError("hardware.tiers: near_storage attention attends the blocks of a SmartSSD tier; there is none");
  if (s.pol.prefetch->depth() > 0 || s.pol.prefetch->adapts_depth())
    throw ConfigError("policies.prefetch: near_storage attention needs each layer's query before the drive attends "
                      "its blocks, so selection cannot run ahead; expected depth 0 (\"none\")");
  s.fpga_attention_Bps = s.pol.eval->scoring()->attention_Bps();
}

// B_c, B_s of the closed form once the platform exists, and the device
// pairs the scoring devices exchange keys, queries and outputs over.
void AppScoring::configure(EngineSetup& s, Platform& platform, std::vector<std::pair<size_t, size_t>>& pairs) {
  const size_t gpu = s.gpu_dev, fpga = static_cast<size_t>(s.fpga_dev);
  const size_t host = static_cast<size_t>(s.host_mem_dev), ssd = static_cast<size_t>(s.ssd_dev);
  // B_c, B_s of the closed form: the paths the selected KV takes to the GPU.
  if (s.host_mem_dev >= 0) {
    pairs.emplace_back(host, fpga);
    s.rates.b_c = platform.route(host, gpu).bottleneck_Bps;
  }
  if (s.storage_attention_tier >= 0) {  // the query to the drive's FPGA, its partial output back
    pairs.emplace_back(gpu, fpga);
    pairs.emplace_back(fpga, gpu);
  }
  if (s.ssd_dev >= 0) {
    pairs.emplace_back(ssd, fpga);
    if (s.host_mem_dev >= 0) pairs.emplace_back(ssd, host);
    s.rates.b_s = platform.route(ssd, gpu).bottleneck_Bps;
  }
  if (s.rates.b_c <= 0) s.rates.b_c = s.rates.b_s > 0 ? s.rates.b_s : 1.0;
  if (s.rates.b_s <= 0) s.rates.b_s = s.rates.b_c;
  s.pol.eval->scoring()->configure(s.rates);
}

// APP: this layer's keys are scored where they live: the CPU scores those
// in host memory, the FPGA those on its SmartSSD (its NAND read is a
// transfer, so it contends with the SmartSSD's other traffic), the GPU those
// in its hot pool (a memory-bound pass added to the layer's kernel). Keys a
// split wants scored on the other side are moved there first. The layer's
// fetches wait for all of it.
void AppScoring::score(LayerSlot& slot, uint32_t step, uint32_t layer, uint32_t n, std::vector<BlockId>& sel) {
  ScoringSplit* sc = s_.pol.eval->scoring();
  if (sc->attends_in_storage()) {
    attend_in_storage(slot, step, layer, sel);
    return;
  }
  if (!sc->scores_at(step)) return;
  const double kb = static_cast<double>(t_.block_bytes) / 2.0 * sc->bits() / 16.0;  // key bytes scored per block
  double cpu_b = 0, fpga_b = 0, gpu_b = 0;
  for (uint32_t s = 0; s < s_.batch; ++s)
    for (uint32_t i = 0; i < n; ++i) {
      const TierId t = t_.tier(t_.id(s, layer, i));
      if (t >= t_.tiers.size()) continue;
      if (s_.gpu_tier && t == 0) gpu_b += kb;
      else if (static_cast<int>(s_.tier_dev[t]) == s_.ssd_dev) fpga_b += kb;
      else cpu_b += kb;
    }
  if (cpu_b + fpga_b + gpu_b == 0) return;
  const ScoringPlan p = sc->plan(cpu_b, fpga_b);
  slot.extra_gpu_s += gpu_b / s_.gpu_mem_Bps;
  const size_t c = static_cast<size_t>(s_.cpu_dev), f = static_cast<size_t>(s_.fpga_dev);
  const size_t ssd = static_cast<size_t>(s_.ssd_dev), host = static_cast<size_t>(s_.host_mem_dev);
  JobId to_cpu = kNoJob, to_fpga = kNoJob;
  if (p.moved_to_cpu > 0) {
    to_cpu = board_.create();
    tp_.stream(ssd, host).submit(TransferJob{to_cpu, ssd, host, p.moved_to_cpu, {}, -1, 0, "key move"});
    slot.waits.push_back(to_cpu);
  }
  if (p.moved_to_fpga > 0) {
    to_fpga = board_.create();
    tp_.stream(host, f).submit(TransferJob{to_fpga, host, f, p.moved_to_fpga, {}, -1, 0, "key move"});
    slot.waits.push_back(to_fpga);
  }
  // Keys the FPGA scores that are on its drive (the rest was moved to it):
  // from NAND, or as far as the copy in its memory holds them, from there.
  const double on_drive = p.bytes_fpga - p.moved_to_fpga;
  const double from_mem = on_drive * key_copy_fit(kb);
  const double nand = on_drive - from_mem;
  double fpga_s = fpga_kernel_s(p.bytes_fpga / s_.fpga_compute_Bps);
  slot.score_cpu = board_.create();
  slot.score_fpga = board_.create();
  std::vector<JobId> cdeps, fdeps;
  add_dep(cdeps, to_cpu);
  add_dep(fdeps, to_fpga);
  tp_.stream(c, c).submit(TransferJob{slot.score_cpu, 0, 0, 0, std::move(cdeps), s_.cpu_dev, p.bytes_cpu / s_.rates.f_c, "score"});
  // The FPGA streams keys from its NAND while it computes: read and compute overlap.
  // From its own memory the kernel is bound by the slower of its datapath
  // and that memory's bandwidth.
  fpga_s = std::max(fpga_s, s_.fpga_mem.read_s(from_mem));
  tp_.stream(f, f).submit(TransferJob{slot.score_fpga, 0, 0, 0, std::move(fdeps), s_.fpga_dev, fpga_s, "score"});
  if (nand > 0) {
    slot.score_read = board_.create();
    // Each block's keys are a slice of their own (key half x bits/16), read
    // as one request of that size, not of the FP16 block.
    TransferJob read{slot.score_read, ssd, f, nand, {}, -1, 0, "key read"};
    read.request_bytes = kb;
    tp_.stream(ssd, f).submit(std::move(read));
    slot.waits.push_back(slot.score_read);
  }
  c_.key_bytes_read_nand += nand;
  c_.key_bytes_read_fpga_memory += from_mem;
  slot.score_move_cpu = to_cpu;
  c_.beta_sum += p.beta;
  ++c_.scored_layers;
  c_.key_bytes_scored_cpu += p.bytes_cpu;
  c_.key_bytes_scored_fpga += p.bytes_fpga;
  c_.key_bytes_scored_gpu += gpu_b;
  c_.key_bytes_moved += p.moved_to_cpu + p.moved_to_fpga;
  slot.waits.push_back(slot.score_cpu);
  slot.waits.push_back(slot.score_fpga);
}

// The FPGA's kernel for `nominal_s` at its nominal clock, at the clock its
// temperature gives now (thermal throttling), and the temperature after it.
double AppScoring::fpga_kernel_s(double nominal_s) {
  double fpga_s = nominal_s;
  if (s_.thermal && fpga_s > 0) {
    const double now = sim_now();
    const double dt = std::max(0.0, now - thermal_t_);
    const bool was = s_.thermal->throttled();
    s_.thermal->advance(dt, 0.0);  // idle since the last burst
    if (was) c_.throttled_s += dt;
    fpga_s *= s_.thermal->params().nominal_clock_MHz / s_.thermal->clock_MHz();
    if (s_.thermal->throttled()) c_.throttled_s += fpga_s;
    s_.thermal->advance(fpga_s, 1.0);
    thermal_t_ = now + fpga_s;
    c_.thermal_peak_C = std::max(c_.thermal_peak_C, s_.thermal->temperature_C());
  }
  return fpga_s;
}

// Near-storage attention: the blocks of this layer that live on the
// SmartSSD leave the selection (they never cross PCIe; their attention
// mass was counted as used: attention is exact). The layer's query goes to
// the FPGA, which reads their K and V (from its memory as far as the copy
// there holds them, key_copy_fit, the rest off NAND at block-sized
// requests, both streamed while it computes), attends them at its
// full-attention kernel's rate and sends back the partial output with its
// softmax normaliser (the running max and sum, FP32, per head) so the GPU
// can merge it with its own part. The GPU's kernel waits for that output.
// The layer runs its kernel after the drive's part instead of beside it:
// the GPU's own attention over its few blocks is not overlapped.
void AppScoring::attend_in_storage(LayerSlot& slot, uint32_t step, uint32_t layer, std::vector<BlockId>& sel) {
  const TierId st = static_cast<TierId>(s_.storage_attention_tier);
  double kv_b = 0;
  std::vector<JobId> writes;  // the drive's blocks still being written (the FPGA reads them after)
  size_t w = 0;
  for (BlockId b : sel) {
    if (t_.tier(b) != st) {
      sel[w++] = b;
      continue;
    }
    kv_b += kv_.data_bytes(b);
    c_.storage_attention_tokens += kv_.held_tokens(b);
    ++c_.hits[st];
    if (!board_.done(kv_.pending(b))) add_dep(writes, kv_.pending(b));
  }
  sel.resize(w);
  if (kv_b == 0) return;
  const double from_mem = kv_b * key_copy_fit(static_cast<double>(t_.block_bytes));
  const double nand = kv_b - from_mem;
  const double heads = static_cast<double>(s_.batch) * s_.model.heads;
  const double q_bytes = heads * s_.model.head_dim * 2.0;
  const double out_bytes = heads * (s_.model.head_dim * 2.0 + 2 * 4.0);
  const size_t gpu = s_.gpu_dev, f = static_cast<size_t>(s_.fpga_dev), ssd = static_cast<size_t>(s_.ssd_dev);
  auto job = [&](size_t from, size_t to, double bytes, std::vector<JobId> deps, int exec_on, double sec, const char* label) {
    TransferJob j{board_.create(), from, to, bytes, std::move(deps), exec_on, sec, label};
    j.step = static_cast<int32_t>(step);
    j.layer = static_cast<int32_t>(layer);
    const JobId id = j.id;
    tp_.stream(exec_on >= 0 ? f : from, exec_on >= 0 ? f : to).submit(std::move(j));
    return id;
  };
  const JobId q = job(gpu, f, q_bytes, {}, -1, 0, "query");
  JobId read = kNoJob;
  if (nand > 0) read = job(ssd, f, nand, writes, -1, 0, "kv read");
  // The device's thermal clock belongs to its scoring kernel; no throttling
  // of the attention kernel is reported, so it runs at its own clock.
  const double fpga_s = std::max(kv_b / s_.fpga_attention_Bps, s_.fpga_mem.read_s(from_mem));
  writes.push_back(q);
  const JobId attn = job(0, 0, 0, std::move(writes), s_.fpga_dev, fpga_s, "attention");
  std::vector<JobId> done{attn};
  add_dep(done, read);
  const JobId out = job(f, gpu, out_bytes, std::move(done), -1, 0, "attention output");
  slot.waits.push_back(out);
  c_.fpga_score_s += fpga_s;
  c_.storage_attention_kv_bytes += kv_b;
  c_.key_bytes_read_nand += nand;
  c_.key_bytes_read_fpga_memory += from_mem;
  c_.storage_attention_pcie_bytes += q_bytes + out_bytes;
  ++c_.scored_layers;
}

// The copy in the FPGA's memory (key_copy fpga_dram) of what the FPGA reads
// of every block the SmartSSD holds, copies below a block read up included
// (APP: the block's score_bits keys; near-storage attention: its FP16 K and
// V, `key_bytes_per_block` then being the block's bytes), as far as it fits. Scoring reads all of a layer's keys and every
// layer is scored alike, so which blocks fit does not change the time: the
// copy is taken to hold the same share of each layer's blocks, capacity /
// (the drive's blocks x key bytes per block), and the rest is read from
// NAND. Blocks written to the drive since the last scoring (demotions,
// prefill output) brought their keys in with their write: the FPGA is the
// drive's PCIe switch, so it sees the write pass and no extra PCIe traffic
// is needed; their bytes are counted. Returns the share held, 0 with the
// copy on NAND.
double AppScoring::key_copy_fit(double key_bytes_per_block) {
  if (s_.key_copy_tier < 0) return 0.0;
  const size_t t = static_cast<size_t>(s_.key_copy_tier);
  const double keys = static_cast<double>(t_.tiers[t].used_blocks) * key_bytes_per_block;
  const double fit = keys > s_.fpga_mem.bytes ? s_.fpga_mem.bytes / keys : 1.0;
  const double written = c_.wear[t].host_bytes_written();
  c_.key_copy_bytes_written +=
      (written - c_.key_copy_seen_written) * key_bytes_per_block / static_cast<double>(t_.block_bytes) * fit;
  c_.key_copy_seen_written = written;
  c_.key_copy_peak_bytes = std::max(c_.key_copy_peak_bytes, std::min(keys, s_.fpga_mem.bytes));
  c_.key_copy_min_fit = std::min(c_.key_copy_min_fit, fit);
  return fit;
}

// Once a scored layer's kernel may start: how long each side took (the CPU
// with its key moves, the FPGA with its NAND read), for the policy's split
// of the next layers and the run's busy and idle times.
void AppScoring::report(const LayerSlot& slot) {
  if (slot.score_cpu == kNoJob) return;
  const double tc = board_.duration(slot.score_cpu) +
                    (slot.score_move_cpu != kNoJob ? board_.duration(slot.score_move_cpu) : 0.0);
  const double tf = std::max(board_.duration(slot.score_fpga),
                             slot.score_read != kNoJob ? board_.duration(slot.score_read) : 0.0);
  s_.pol.eval->scoring()->report(tc, tf);
  c_.cpu_score_s += tc;
  c_.fpga_score_s += tf;
  c_.cpu_idle_s += std::max(0.0, tf - tc);
  c_.fpga_idle_s += std::max(0.0, tc - tf);
}

}  // namespace kvtier
