#include "sim/engine/engine_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sim/engine/energy_metrics.h"
#include "sim/engine/kernel_cost.h"
#include "sim/kv/kv_store.h"
#include "sim/platform/platform.h"
#include "sim/platform/weight_stream.h"

namespace kvtier {

namespace {
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return nearest_rank(v, q);
}
}  // namespace

json link_metrics(Platform& platform, double end) {
  json links = json::object();
  for (const auto& st : platform.stats()) {
    json& lj = links[st.name];
    lj["bytes"] = st.bytes;
    lj["busy_fraction"] = end > 0 ? st.busy_s / end : 0.0;  // occupancy: some transfer active
    lj["utilization"] = end > 0 && st.bandwidth_Bps > 0 ? st.bytes / (st.bandwidth_Bps * end) : 0.0;
  }
  return links;
}

std::vector<double> link_busy_now(Platform& platform, double now) {
  std::vector<double> out;
  for (const auto& st : platform.stats()) out.push_back(st.busy_s + (st.active > 0 ? now - st.busy_since : 0.0));
  return out;
}

json kv_counter_metrics(const EngineCounters& c, uint64_t block_bytes) {
  return {{"block_accesses", c.accesses},        {"fetched_bytes", c.fetched_bytes},
          {"blocks_promoted", c.promoted_blocks}, {"blocks_demoted", c.demoted_blocks},
          {"blocks_dropped", c.dropped_blocks},   {"blocks_written_back", c.written_back_blocks},
          {"gpu_staging_peak_bytes", c.staging_peak_bytes},
          {"prefill_staging_peak_bytes", c.prefill_staging_peak_bytes},
          {"kv_block_bytes", block_bytes}};
}

namespace {
// Time: the decode steps (TPOT and tokens/s over the measured steps, after
// workload.warmup_steps), TTFT, and the GPU's compute stream.
void time_metrics(json& m, const EngineSetup& s, const EngineCounters& c, double end) {
  std::vector<double> all, lat;
  double prev = c.decode_start;
  for (double e : c.step_end) {
    all.push_back(e - prev);
    prev = e;
  }
  if (all.size() > s.warmup) lat.assign(all.begin() + s.warmup, all.end());
  auto mean = [](const std::vector<double>& v, size_t from) {
    return v.size() > from ? std::accumulate(v.begin() + static_cast<long>(from), v.end(), 0.0) / double(v.size() - from) : 0.0;
  };
  const double measured_s = std::accumulate(lat.begin(), lat.end(), 0.0);
  const double decode_s = c.step_end.empty() ? 0 : c.step_end.back() - c.decode_start;
  m["simulated_time_s"] = end;
  m["decode_time_s"] = decode_s;
  m["decode_tokens_per_s"] = measured_s > 0 ? double(s.batch) * double(lat.size()) / measured_s : 0.0;
  m["mean_step_latency_s"] = mean(lat, 0);
  m["p50_step_latency_s"] = percentile(lat, 0.50);
  m["p99_step_latency_s"] = percentile(lat, 0.99);
  m["first_step_latency_s"] = all.empty() ? 0.0 : all.front();
  m["all_steps_mean_latency_s"] = mean(all, 0);
  // Steady state: the second half of the measured steps, once start-up
  // effects (write-back of the prompt, cold caches) have drained.
  m["steady_step_latency_s"] = mean(lat, lat.size() / 2);
  m["warmup_steps"] = s.warmup;
  // TTFT: the first token comes out of prefill; without simulated prefill it
  // is the first decode step.
  m["ttft_s"] = s.prefill_compute || s.prefill_load ? c.prefill_end : (all.empty() ? 0.0 : all.front());
  // The GPU's compute stream over decode, and apart over prefill (TTFT).
  m["gpu_busy_fraction"] = decode_s > 0 ? std::min(1.0, (c.gpu_busy_s - c.gpu_busy_at_decode) / decode_s) : 0.0;
  m["prefill_gpu_busy_fraction"] = c.prefill_end > 0 ? std::min(1.0, c.gpu_busy_at_decode / c.prefill_end) : 0.0;
}

// Attention and block moves, bytes, and staging.
void block_metrics(json& m, const EngineSetup& s, EngineCounters& c, const KvStore& kv) {
  const BlockTable& table = kv.table();
  m["cpu_codec_s"] = c.cpu_codec_s;
  m["prefill_write_wait_s"] = c.prefill_write_wait_s;
  // Attention recall is a mass, and needs a trace; block counts have their own name.
  if (s.trace) m["attention_recall"] = c.total_mass > 0 ? c.used_mass / c.total_mass : 1.0;
  m["block_recall"] = c.accesses ? 1.0 - double(c.dropped_accesses) / double(c.accesses) : 1.0;
  m["dropped_rate"] = c.accesses ? double(c.dropped_accesses) / double(c.accesses) : 0.0;
  m["copies_dropped"] = c.copies_dropped;
  m.update(kv_counter_metrics(c, table.block_bytes));
  m["ssd_bytes_written"] = c.ssd_bytes_written;
  // Predictions still on the GPU, never used, are wasted too.
  c.prefetch.wasted_bytes += kv.unused_prefetch_bytes();
  m["prefetch"] = {{"prefetched_blocks", c.prefetch.prefetched_blocks}, {"used_blocks", c.prefetch.used_blocks},
                   {"accuracy", c.prefetch.accuracy()},                  {"coverage", c.prefetch.coverage()},
                   {"wasted_bytes", c.prefetch.wasted_bytes}};
}

// APP scoring, or near-storage attention: what the CPU and the FPGA did.
void scoring_metrics(json& m, const EngineSetup& s, const EngineCounters& c, double end) {
  // Where the FPGA's copy (keys for scoring, K and V for near-storage
  // attention) lives and what it read from where; `what` is "key" or "kv".
  auto fpga_copy = [&](json& a, const std::string& what) {
    a[what + "_bytes_read_nand"] = c.key_bytes_read_nand;
    a[what + "_copy"] = s.key_copy_tier >= 0 ? "fpga_dram" : "nand";
    if (s.key_copy_tier < 0) return;
    a[what + "_bytes_read_fpga_memory"] = c.key_bytes_read_fpga_memory;
    a[what + "_copy_peak_bytes"] = c.key_copy_peak_bytes;
    a[what + "_copy_bytes_written"] = c.key_copy_bytes_written;
    a[what + "_copy_min_fit"] = c.key_copy_min_fit;
    a["fpga_memory_bytes"] = s.fpga_mem.bytes;
  };
  if (s.storage_attention_tier >= 0) {
    // Near-storage attention: what the drive's FPGA did in place of the GPU.
    json a;
    a["fpga_attention_GBps"] = s.fpga_attention_Bps / 1e9;
    a["attended_layers"] = c.scored_layers;
    a["attended_tokens"] = c.storage_attention_tokens;
    a["kv_bytes_attended"] = c.storage_attention_kv_bytes;
    fpga_copy(a, "kv");
    a["pcie_bytes"] = c.storage_attention_pcie_bytes;
    a["fpga_busy_s"] = c.fpga_score_s;
    m["near_storage"] = a;
  } else if (s.pol.eval->scoring()) {
    json a;
    a["beta_mean"] = c.scored_layers ? c.beta_sum / double(c.scored_layers) : 0.0;
    a["f_c_GBps"] = s.rates.f_c / 1e9;
    a["f_s_GBps"] = s.rates.f_s / 1e9;
    a["fpga_compute_GBps"] = s.fpga_compute_Bps / 1e9;
    a["key_bytes_scored_cpu"] = c.key_bytes_scored_cpu;
    a["key_bytes_scored_fpga"] = c.key_bytes_scored_fpga;
    a["key_bytes_scored_gpu"] = c.key_bytes_scored_gpu;
    a["key_bytes_moved"] = c.key_bytes_moved;
    fpga_copy(a, "key");
    a["scored_layers"] = c.scored_layers;
    a["beta_final"] = s.pol.eval->scoring()->beta();
    a["cpu_busy_s"] = c.cpu_score_s;
    a["fpga_busy_s"] = c.fpga_score_s;
    a["cpu_idle_s"] = c.cpu_idle_s;
    a["fpga_idle_s"] = c.fpga_idle_s;
    if (s.thermal) {
      a["fpga_peak_temperature_C"] = c.thermal_peak_C;
      a["fpga_throttled_fraction"] = end > 0 ? std::min(1.0, c.throttled_s / end) : 0.0;
    }
    m["app"] = a;
  }
}

// MatKV's next request, loaded while this one decodes.
json next_request_metrics(const EngineSetup& s, const EngineCounters& c, Platform& platform) {
  // The next batch's first token: its KV load (overlapped with this
  // decode), then its query tokens through every layer on an idle GPU.
  const double decode_end = c.step_end.empty() ? c.prefill_end : c.step_end.back();
  const double q = s.query_tokens, T = s.ctx;
  double query_s = 0;
  for (uint32_t l = 0; l < s.model.layers; ++l) query_s += query_kernel_s(s, q, T, s.batch);
  query_s += embedding_kernel_s(s, KernelPhase::Prefill, q * s.batch) + head_kernel_s(s, KernelPhase::Prefill, s.batch);
  // Every hop counts: where the load stops short of the GPU (in the tier
  // above the flash), the next batch's KV still crosses to the GPU, on an
  // idle link once this decode is done.
  double copy_s = 0;
  if (c.next_dst_dev != s.gpu_dev && c.next_copy_bytes > 0) {
    const PlatformRoute& r = platform.route(c.next_dst_dev, s.gpu_dev);
    copy_s = r.latency_s + c.next_copy_bytes / (r.bottleneck_Bps * platform.bandwidth_factor(c.next_dst_dev, s.gpu_dev, c.next_copy_bytes));
  }
  return {{"load_end_s", c.next_load_end},
          {"load_hidden", c.next_load_end <= decode_end},
          {"copy_to_gpu_s", copy_s},
          {"ttft_s", std::max(0.0, c.next_load_end - decode_end) + copy_s + query_s}};
}

// Per tier: hits, peak and capacity, and a storage tier's wear.
json tier_metrics(const EngineSetup& s, const EngineCounters& c, const BlockTable& table, double end) {
  json tiers = json::object();
  for (size_t t = 0; t < table.tiers.size(); ++t) {
    json& tj = tiers[table.tiers[t].name];
    tj["hit_rate"] = c.accesses ? double(c.hits[t]) / double(c.accesses) : 0.0;
    tj["peak_bytes"] = double(c.peak_blocks[t]) * double(table.block_bytes);
    tj["capacity_bytes"] = double(table.tiers[t].capacity_blocks) * double(table.block_bytes);
    if (s.hw.devices[s.tier_dev[t]].model->is_storage()) {
      tj["nand_bytes_written"] = c.wear[t].nand_bytes_written();
      tj["endurance_used"] = c.wear[t].life_used();
      // A number, or absent where nothing was written (the drive never wears out).
      const double y = end > 0 ? c.wear[t].years_to_wear_out(c.wear[t].host_bytes_written() / end) : 0.0;
      if (std::isfinite(y) && y > 0) tj["years_to_wear_out"] = y;
    }
  }
  return tiers;
}

// Per link, with decode's share of each link's time: from the first decode
// step to the last step's end.
json decode_link_metrics(const EngineCounters& c, Platform& platform, double end) {
  json links = link_metrics(platform, end);
  if (!c.step_end.empty()) {
    // The snapshots follow platform.stats()' order (result.json's links are sorted by name).
    const double d = c.step_end.back() - c.decode_start;
    const auto& stats = platform.stats();
    for (size_t i = 0; i < stats.size() && i < c.link_busy_at_decode.size() && i < c.link_busy_after_decode.size(); ++i)
      links[stats[i].name]["decode_busy_fraction"] =
          d > 0 ? std::min(1.0, (c.link_busy_after_decode[i] - c.link_busy_at_decode[i]) / d) : 0.0;
  }
  return links;
}
}  // namespace

namespace {
// What the energy and cost metrics need besides the platform's counts:
// tokens out, the prefill phase apart (where the run has one), the FPGA's
// throttled time and the flash's wear.
EnergyRun energy_run(const EngineSetup& s, const EngineCounters& c, double end) {
  EnergyRun r;
  r.end_s = end;
  r.generated_tokens = double(s.batch) * double(c.step_end.size());
  if (s.prefill_compute || s.prefill_load) {
    r.prefill_end_s = c.decode_start;
    r.prefill_tokens = double(s.batch) * double(s.ctx);
    r.work_at_prefill_end = c.work_at_decode;
    r.bytes_at_prefill_end = c.link_bytes_at_decode;
  }
  r.throttled_s = c.throttled_s;
  for (size_t t = 0; t < s.tiers() && t < c.wear.size(); ++t)
    if (s.hw.devices[s.tier_dev[t]].model->is_storage()) r.wear.push_back({s.tier_dev[t], c.wear[t].life_used()});
  return r;
}
}  // namespace

// Names are the contract in docs/results.md.
json engine_metrics(const EngineSetup& s, EngineCounters& c, const KvStore& kv, Platform& platform, double end) {
  json m;
  time_metrics(m, s, c, end);
  block_metrics(m, s, c, kv);
  scoring_metrics(m, s, c, end);
  if (s.overlap_next_load) m["next_request"] = next_request_metrics(s, c, platform);
  if (s.weights) m["weights"] = s.weights->metrics();  // policies.weights: where they live, what streamed
  m["tiers"] = tier_metrics(s, c, kv.table(), end);
  m["links"] = decode_link_metrics(c, platform, end);
  m.update(energy_cost_metrics(s.hw, platform, energy_run(s, c, end)));
  return m;
}

}  // namespace kvtier
