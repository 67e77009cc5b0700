// What the selection of one (step, layer) hands to the GPU's kernel: the
// jobs it waits for, the KV it reads and from where, the work added to it.
// Filled by the layer pipeline and the work beside it (APP scoring).
#pragma once

#include <cstdint>
#include <vector>

#include "policies/common.h"
#include "sim/core/job.h"

namespace kvtier {

struct LayerSlot {
  std::vector<JobId> waits;
  uint64_t kv_blocks = 0;
  uint64_t kv_tokens = 0;            // tokens those blocks hold (whole blocks unless transfer_unit is tokens)
  uint64_t cpu_tokens = 0;           // of those, attended on the CPU where they live (policies.weights.cpu_attention)
  double extra_gpu_s = 0;            // decompression on the GPU before attention
  double staged_bytes = 0;           // KV read into GPU staging buffers (not the GPU tier) for this layer
  double host_read_bytes = 0;        // of the KV read into the GPU, what comes from host memory (policies.weights)
  std::vector<BlockId> on_gpu;       // with invariants checked: the blocks attention uses that live on the GPU
  std::vector<uint64_t> seq_tokens;  // serving: per sequence of the iteration, the tokens its attention reads
  JobId score_cpu = kNoJob, score_fpga = kNoJob;  // APP scoring of this layer
  JobId score_read = kNoJob, score_move_cpu = kNoJob;  // the FPGA's NAND read; keys moved to the host
};

}  // namespace kvtier
