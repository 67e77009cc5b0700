// A real tiered decode pipeline on the host, the measured counterpart of a
// kvtier run with tiers [DRAM cache, disk]: a model's KV blocks live in a
// file read and written with O_DIRECT through io_uring; a DRAM cache of a
// fixed number of blocks keeps recently used ones (LRU); attention runs on
// the CPU (cpu_attention.h) over the blocks an attention trace selects, step
// by step and layer by layer. With prefetch depth d, the reads for layers
// l+1..l+d are submitted before layer l computes, so they overlap it.
//
// It follows the engine's rules so that the two can be compared block for
// block: the prompt's blocks are placed layer by layer into the cache, the
// oldest leaving for the file (prefill "none", placement "top", eviction
// "lru"), so decode starts with the last layers' blocks cached and dirty; a
// block read from the file keeps its copy there (evicting it again writes
// nothing), a dirty one is written back when evicted; a block selected for a
// layer not yet computed is never evicted; the new token's KV goes into the
// block that receives it (in the cache, or written to the file where it is).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_validate/cpu_attention.h"
#include "models/param.h"

namespace kvtier::host {

struct PipelineConfig {
  AttentionShape shape;
  int layers = 4;
  int context_tokens = 4096;
  int decode_steps = 16;
  size_t cache_blocks = 64;
  int prefetch_depth = 1;   // layers fetched ahead of the one computing; 0 = on demand
  std::string dir;          // where the KV file goes ("" = a new temporary directory)
  std::string trace;        // attention trace, JSON lines (docs/formats.md)
};

struct PipelineResult {
  std::vector<double> step_s;  // wall time of each decode step
  double total_s = 0;
  double compute_s = 0;        // attention kernels, wall time
  double compute_cpu_s = 0;    // the same, CPU time of the thread: below compute_s when others took the core
  // CPU time that other processes used during the run, as a share of every
  // CPU's wall time (/proc/stat user + nice + system less this process's
  // own): how much of the machine other tenants took.
  double others_cpu_share = 0;
  double wait_s = 0;           // waiting for reads before a layer could compute
  uint64_t accesses = 0, hits = 0, reads = 0, writes = 0;
  double bytes_read = 0, bytes_written = 0;
  json storage;                // the file system, O_DIRECT, page-cache check
};

// Throws std::runtime_error (file system without O_DIRECT included, with the
// reason) or kvtier::ConfigError (a malformed trace or config).
PipelineResult run_pipeline(const PipelineConfig& c);

}  // namespace kvtier::host
