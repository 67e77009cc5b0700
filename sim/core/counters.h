// What a run counts while it goes, written by the KV store, the transfer
// planner and the layer pipeline; sim/engine/engine_metrics.h reports the
// metrics made of it.
#pragma once

#include <cstdint>
#include <vector>

#include "models/flash_wear.h"
#include "policies/policy.h"

namespace kvtier {

struct EngineCounters {
  // Time.
  double decode_start = 0, prefill_end = 0, gpu_busy_s = 0;
  // A tensor-parallel instance's all-reduces: the time its iterations waited
  // on them and the bytes summed (each all-reduce's input, one rank's).
  double allreduce_s = 0, allreduce_bytes = 0;
  // When decode starts: the GPU's busy time so far, and each link's (platform.stats() order).
  double gpu_busy_at_decode = 0;
  std::vector<double> link_busy_at_decode, link_busy_after_decode;  // and when its last step ends
  // When decode starts, each device's work and each link's bytes: the prefill phase's energy.
  std::vector<double> work_at_decode, link_bytes_at_decode;
  std::vector<double> step_end;  // decode step end times (seconds)
  // Attention.
  double total_mass = 0, used_mass = 0;
  uint64_t accesses = 0, dropped_accesses = 0;
  std::vector<uint64_t> hits;  // per tier, and the GPU as endpoint n
  // Block moves.
  uint64_t dropped_blocks = 0, demoted_blocks = 0, promoted_blocks = 0;
  uint64_t written_back_blocks = 0, copies_dropped = 0;
  std::vector<uint64_t> peak_blocks;  // per tier
  // Bytes.
  double ssd_bytes_written = 0, fetched_bytes = 0;
  double staging_peak_bytes = 0;  // most KV in GPU staging buffers at once
  double gpu_kv_and_staging_peak_bytes = 0;  // most GPU memory staging and the GPU tier's KV took together
  double prefill_staging_peak_bytes = 0;  // most prompt KV held on the GPU until its write below landed
  double prefill_write_wait_s = 0;        // prefill kernels held back for want of room for their output
  double cpu_codec_s = 0;  // CPU (de)compression work submitted: seconds of its threads alone on the cores they get
  std::vector<FlashWear> wear;  // per tier (storage tiers only matter)
  PrefetchStats prefetch;
  // APP scoring.
  double beta_sum = 0, cpu_score_s = 0, fpga_score_s = 0, cpu_idle_s = 0, fpga_idle_s = 0;
  uint64_t scored_layers = 0;
  double key_bytes_scored_cpu = 0, key_bytes_scored_fpga = 0, key_bytes_scored_gpu = 0, key_bytes_moved = 0;
  double thermal_peak_C = 0, throttled_s = 0;
  // The FPGA's reads of the SmartSSD's keys for scoring: from its NAND, and
  // (key_copy fpga_dram) from the copy in its memory; that copy's most bytes
  // held, the bytes written into it, its least share of the keys that fit,
  // and the SmartSSD's host bytes written when it was last brought up to date.
  double key_bytes_read_nand = 0, key_bytes_read_fpga_memory = 0;
  // Near-storage attention: tokens and KV bytes the drive's FPGA attended,
  // and the query and output bytes that crossed PCIe for it.
  double storage_attention_tokens = 0, storage_attention_kv_bytes = 0, storage_attention_pcie_bytes = 0;
  double key_copy_peak_bytes = 0, key_copy_bytes_written = 0, key_copy_min_fit = 1, key_copy_seen_written = 0;
  // MatKV's next request, loaded while this one decodes.
  double next_load_end = -1, next_load_bytes = 0;
  double next_copy_bytes = 0;  // what then crosses to the GPU (uncompressed where the CPU decompressed it)
  size_t next_dst_dev = 0;
};

// The nearest-rank q-quantile of non-empty, sorted samples.
double nearest_rank(const std::vector<double>& sorted, double q);

}  // namespace kvtier
