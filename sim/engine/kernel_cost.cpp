#include "sim/engine/kernel_cost.h"

#include <algorithm>
#include <cmath>

#include "sim/platform/weight_stream.h"

namespace kvtier {

double kernel_s(const EngineSetup& s, KernelPhase phase, double gemm_flops, double attn_flops, double weight_bytes,
                double kv_bytes) {
  const DeviceModel::KernelRates& r = s.gpu_rates;
  if (!r.split())
    return std::max(s.gpu_launch_s + (gemm_flops + attn_flops) / s.gpu_flops, s.gpu_model->attention_s(weight_bytes + kv_bytes));
  const bool pre = phase == KernelPhase::Prefill;
  const double fg = (pre ? r.prefill_gemm : r.decode_gemm) > 0 ? (pre ? r.prefill_gemm : r.decode_gemm) : s.gpu_flops;
  const double fa =
      (pre ? r.prefill_attention : r.decode_attention) > 0 ? (pre ? r.prefill_attention : r.decode_attention) : s.gpu_flops;
  const double kv_read_s = std::max(0.0, s.gpu_model->attention_s(kv_bytes) - s.gpu_launch_s);
  return s.gpu_launch_s + std::max(gemm_flops / fg, weight_bytes / s.gpu_mem_Bps) + std::max(attn_flops / fa, kv_read_s);
}

double prefill_kernel_s(const EngineSetup& s, double T, double k) {
  const LlmSpec& m = s.model;
  const double gemm = m.weight_flops_per_token_layer() * T * k;
  const double attn = 2.0 * T * T * m.heads * m.head_dim * k;
  const double kv = T * k * m.kv_bytes_per_token_layer();
  return kernel_s(s, KernelPhase::Prefill, gemm, attn, m.weight_bytes_per_layer(), kv);
}

double query_kernel_s(const EngineSetup& s, double q, double T, double seqs) {
  const LlmSpec& m = s.model;
  const double gemm = m.weight_flops_per_token_layer() * q * seqs;
  const double attn = 4.0 * q * T * m.heads * m.head_dim * seqs;
  const double kv = T * seqs * m.kv_bytes_per_token_layer();
  return kernel_s(s, KernelPhase::Prefill, gemm, attn, m.weight_bytes_per_layer(), kv);
}

double decode_kernel_s(const EngineSetup& s, double seqs, double tokens) {
  const LlmSpec& m = s.model;
  const double kv_bytes = tokens * static_cast<double>(m.kv_bytes_per_token_layer());
  const double gemm = m.weight_flops_per_token_layer() * seqs;
  const double attn = 4.0 * tokens * m.heads * m.head_dim;
  return kernel_s(s, KernelPhase::Decode, gemm, attn, m.weight_bytes_per_layer(), kv_bytes);
}

double iteration_kernel_s(const EngineSetup& s, uint32_t block_tokens, const std::vector<KernelSeq>& seqs,
                          const std::vector<uint64_t>* read) {
  const LlmSpec& m = s.model;
  const double hd = double(m.heads) * m.head_dim, kvl = double(m.kv_bytes_per_token_layer());
  const double bt = block_tokens;
  double tokens = 0, attn = 0, kv = 0;
  bool prefill = false;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const KernelSeq& it = seqs[i];
    tokens += it.tokens;
    prefill = prefill || it.prefill;
    if (it.prefill) {
      const double k = it.tokens, past = read ? std::min(double(it.past), double((*read)[i])) : double(it.past);
      attn += 2.0 * k * (2.0 * past + k) * hd;
      kv += (past + k) * kvl;
    } else {
      const double pages = read ? double((*read)[i]) : std::ceil((double(it.past) + 1.0) / bt) * bt;
      attn += 4.0 * pages * hd;
      kv += pages * kvl;
    }
  }
  // An iteration with prompt tokens in it runs its GEMMs at the prefill rate
  // where the GPU gives rates per phase.
  return kernel_s(s, prefill ? KernelPhase::Prefill : KernelPhase::Decode, m.weight_flops_per_token_layer() * tokens, attn,
                  m.weight_bytes_per_layer(), kv);
}

double embedding_kernel_s(const EngineSetup& s, KernelPhase phase, double tokens) {
  const double bytes = s.model.embedding_bytes_per_token() * tokens;
  return bytes > 0 ? kernel_s(s, phase, 0.0, 0.0, bytes, 0.0) : 0.0;
}

double head_kernel_s(const EngineSetup& s, KernelPhase phase, double sampled) {
  if (s.model.vocab == 0 || !s.model.has_head || sampled <= 0) return 0.0;
  return kernel_s(s, phase, s.model.head_flops_per_token() * sampled, 0.0, s.model.head_read_bytes(), 0.0);
}

PassEnds iteration_ends_s(const EngineSetup& s, const std::vector<KernelSeq>& seqs) {
  PassEnds e;
  if (s.model.vocab == 0) return e;
  double tokens = 0, sampled = 0;
  bool prefill = false;
  for (const KernelSeq& q : seqs) {
    tokens += q.tokens;
    prefill = prefill || q.prefill;
    if (!q.prefill || q.ends_prompt) sampled += 1;
  }
  const KernelPhase phase = prefill ? KernelPhase::Prefill : KernelPhase::Decode;
  e.first_s = embedding_kernel_s(s, phase, tokens);
  e.last_s = head_kernel_s(s, phase, sampled);
  return e;
}

double weight_restore_s(const EngineSetup& s) {
  return s.weights && s.weights->plan().compress_weights
             ? s.weights->quant().decompress_s(s.model.weight_bytes_per_layer(), s.gpu_mem_Bps)
             : 0.0;
}

}  // namespace kvtier
