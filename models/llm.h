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

  // K and V of one token in one layer: 2 x kv_heads x head_dim x dtype.
  uint64_t kv_bytes_per_token_layer() const { return 2ull * kv_heads * head_dim * dtype_bytes; }
  uint64_t kv_bytes_per_token() const { return kv_bytes_per_token_layer() * layers; }
  double weight_bytes() const { return params * (weight_bits ? weight_bits / 8.0 : double(dtype_bytes)); }
  double weight_bytes_per_layer() const { return weight_bytes() / layers; }
  // A forward pass costs about 2 FLOPs per parameter per token.
  double weight_flops_per_token_layer() const { return 2.0 * params / layers; }
  uint32_t model_dim() const { return heads * head_dim; }
};

ParamList llm_params();
// Bits of one weight element of `dtype` (fp16/bf16 16, fp8/int8 8, int4 4); 0 for "same".
uint32_t weight_dtype_bits(const std::string& dtype);
LlmSpec parse_llm(json& m, const std::string& where);

}  // namespace kvtier
