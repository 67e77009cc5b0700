// Decode-side GPU kernels measured against what the engine assumes
// (docs/calibration.md, "GPU kernels"): a paged decode-attention kernel, the
// HillInfer scoring kernel (Q.K^T only, INT8 and INT4 keys) with a top-k
// selection, and a copy running next to a memory-bound kernel. Plain C++
// declarations of what gpu_kernels.cu implements; results use probes.h's
// Sample / ProbeResult.
#pragma once

#include <cstddef>
#include <vector>

#include "cuda_validate/probes.h"

namespace kvtier::cal {

struct PagedShape {
  int kv_heads = 8, head_dim = 128, block_tokens = 16;
};

// FP16 decode attention over `batch` sequences of `context` tokens each,
// K and V gathered through a block table from a pool of blocks in random
// order (PagedAttention's layout): one sample per context length in
// `contexts`, bytes = KV bytes read. Sizes whose pool would exceed
// `max_bytes` are left out.
ProbeResult probe_paged_attention(const PagedShape& shape, int batch, const std::vector<size_t>& contexts,
                                  size_t max_bytes, const Settings& s);

// Scores of one INT8 query against N keys of head dim 128 stored at `bits`
// (8 or 4), dp4a; bytes = key bytes. With topk_fraction > 0 the time
// includes selecting the best fraction of the scores (CUB radix sort of
// (score, index) pairs, descending).
ProbeResult probe_scoring(int bits, double topk_fraction, const std::vector<size_t>& key_bytes, const Settings& s);

// A pinned host-to-device copy of `copy_bytes` started together with a
// memory-bound kernel reading each of `kernel_bytes`: per sample, times_us is
// the kernel's completion and times_b_us the copy's (label "together"), and
// a solo sample of each follows (labels "kernel_solo", "copy_solo").
ProbeResult probe_copy_kernel_interference(size_t copy_bytes, const std::vector<size_t>& kernel_bytes,
                                           const Settings& s);

}  // namespace kvtier::cal
