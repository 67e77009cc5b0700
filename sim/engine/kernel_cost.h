// The GPU's kernel times: one roofline per layer kernel, for every shape the
// engines run (a prefill over whole prompts, MatKV's query tokens over a
// loaded prompt, a decode step, a serving iteration's mix of prefill chunks
// and decode tokens). Every place that times a GPU kernel asks here, so a
// calibrated curve or a per-phase rate changes all of them at once.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/engine_setup.h"

namespace kvtier {

enum class KernelPhase { Prefill, Decode };

// A layer's GPU work: its GEMMs (`gemm_flops` through `weight_bytes` of
// weights) and its attention (`attn_flops` over `kv_bytes` of KV). One
// roofline over the whole layer, compute-bound on FLOPs or memory-bound on
// the bytes it reads, through the GPU model so that a calibrated
// attention_us curve (cuda_validate's kv_read probe) replaces
// bytes/bandwidth: launch + max(flops/F, bytes/B) without a curve. Where the
// GPU gives rates per kernel shape and phase (models/device.h KernelRates),
// GEMMs and attention are two rooflines one after the other.
double kernel_s(const EngineSetup& s, KernelPhase phase, double gemm_flops, double attn_flops, double weight_bytes,
                double kv_bytes);

// Prefill of `seqs` prompts of `prompt_tokens` each: the weights once, every
// prompt token through them, causal attention over T^2/2 pairs.
double prefill_kernel_s(const EngineSetup& s, double prompt_tokens, double seqs);
// MatKV's query tokens of `seqs` sequences over a loaded prompt of `past` tokens.
double query_kernel_s(const EngineSetup& s, double query_tokens, double past, double seqs);
// A decode step of `seqs` sequences whose attention reads `kv_tokens` tokens of KV in all.
double decode_kernel_s(const EngineSetup& s, double seqs, double kv_tokens);

// One sequence of a serving iteration: `tokens` computed after `past`.
struct KernelSeq {
  uint32_t past = 0, tokens = 0;
  bool prefill = false;
  bool ends_prompt = false;  // a prefill chunk that ends its prompt: it samples the first token
};
// One layer's kernel for a serving iteration: every token through the
// weights once; attention of each decode token over its sequence's pages
// (whole blocks of `block_tokens`, as paged attention reads them) and of
// each prefill chunk over what precedes it, causally. `read` (KV in tiers):
// per sequence, the tokens of KV its attention reads, fewer where a budget
// dropped blocks.
double iteration_kernel_s(const EngineSetup& s, uint32_t block_tokens, const std::vector<KernelSeq>& seqs,
                          const std::vector<uint64_t>* read = nullptr);

// Outside the layers (model.vocab_size; 0 without it): the embedding's
// lookup of `tokens` input tokens' rows before the first layer, and the LM
// head over `sampled` tokens (the last of each prompt, each decode token)
// after the last, reading its whole matrix once per pass. Each is a kernel
// of the same roofline as a layer's.
double embedding_kernel_s(const EngineSetup& s, KernelPhase phase, double tokens);
double head_kernel_s(const EngineSetup& s, KernelPhase phase, double sampled);
// A serving iteration's: the first layer's extra (the embedding) and the
// last's (the head, over its decode tokens and the chunks that end a prompt).
struct PassEnds {
  double first_s = 0, last_s = 0;
};
PassEnds iteration_ends_s(const EngineSetup& s, const std::vector<KernelSeq>& seqs);

// Compressed weights (policies.weights compress_weights) are restored on
// the GPU before every use of a layer's weights: that pass's time for one
// layer (0 without compressed weights).
double weight_restore_s(const EngineSetup& s);

}  // namespace kvtier
