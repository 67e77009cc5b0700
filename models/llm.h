// The shape of an LLM as far as KV memory and decode compute are concerned.
#pragma once

#include <cstdint>
#include <string>

#include "models/param.h"

namespace kvtier {

struct LlmSpec {
  std::string name;
  uint32_t layers = 0;
  uint32_t max_context = 0;  // tokens (prompt + output); 0 = not given
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t dtype_bytes = 2;
  double params = 0;  // parameter count
  // Bits per weight element: the weight dtype is separate from the KV dtype
  // (FP16 weights with FP16 KV, INT8 or FP8 weights with FP16 KV, ...). 0
  // (weight_dtype "same"): as many bits as a KV element.
  uint32_t weight_bits = 0;
  std::string weight_dtype = "same";
  // The vocabulary: an embedding matrix (vocab x d, a lookup of one row per
  // input token) and an LM head (d x vocab, 2 d vocab FLOPs per sampled
  // token, its matrix read once per forward pass). 0: not modelled, every
  // parameter in the layers. `tied`: the head is the embedding's matrix (no
  // parameters of its own; its FLOPs and its read remain).
  uint32_t vocab = 0;
  bool tied = false;
  // Which ends of the model this spec holds: a pipeline stage holds the
  // embedding (the first) or the head (the last), or neither.
  bool has_embedding = true, has_head = true;

  double weight_elem_bytes() const { return weight_bits ? weight_bits / 8.0 : double(dtype_bytes); }
  // Parameters of the embedding and of the head this spec holds. A tied head
  // shares the embedding's matrix only where both are held (a pipeline's
  // last stage keeps its own copy, as Megatron-LM does).
  double embedding_params() const { return has_embedding ? double(vocab) * model_dim() : 0.0; }
  double head_params() const { return has_head && !(tied && has_embedding) ? double(vocab) * model_dim() : 0.0; }
  // Parameters of all the transformer layers together.
  double layer_params() const { return params - embedding_params() - head_params(); }

  // K and V of one token in one layer: 2 x kv_heads x head_dim x dtype.
  uint64_t kv_bytes_per_token_layer() const { return 2ull * kv_heads * head_dim * dtype_bytes; }
  uint64_t kv_bytes_per_token() const { return kv_bytes_per_token_layer() * layers; }
  double weight_bytes() const { return params * weight_elem_bytes(); }
  double weight_bytes_per_layer() const { return layer_params() * weight_elem_bytes() / layers; }
  // A layer costs about 2 FLOPs per parameter per token.
  double weight_flops_per_token_layer() const { return 2.0 * layer_params() / layers; }
  // The head's matrix (read whole by every sampling pass, tied or not) and
  // its FLOPs per sampled token; the embedding's bytes per input token.
  double head_read_bytes() const { return has_head ? double(vocab) * model_dim() * weight_elem_bytes() : 0.0; }
  double head_flops_per_token() const { return has_head ? 2.0 * double(vocab) * model_dim() : 0.0; }
  double embedding_bytes_per_token() const { return has_embedding && vocab ? model_dim() * weight_elem_bytes() : 0.0; }
  uint32_t model_dim() const { return heads * head_dim; }
  // A pipeline stage of `stage_layers` of the layers: the embedding if it
  // is the first stage, the head if the last (its own copy of a tied head
  // unless it is also the first).
  LlmSpec stage(uint32_t stage_layers, bool first, bool last) const;
};

ParamList llm_params();
// Bits of one weight element of `dtype` (fp16/bf16 16, fp8/int8 8, int4 4); 0 for "same".
uint32_t weight_dtype_bits(const std::string& dtype);
LlmSpec parse_llm(json& m, const std::string& where);

}  // namespace kvtier
