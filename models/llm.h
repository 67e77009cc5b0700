// The shape of an LLM as far as KV memory and decode compute are concerned.
#pragma once

#include <cstdint>
#include <string>

#include "models/param.h"

namespace kvtier {

struct LlmSpec {
  std::string name;
  uint32_t layers = 0;
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t dtype_bytes = 2;
  double params = 0;  // parameter count

  // K and V of one token in one layer: 2 x kv_heads x head_dim x dtype.
  uint64_t kv_bytes_per_token_layer() const { return 2ull * kv_heads * head_dim * dtype_bytes; }
  uint64_t kv_bytes_per_token() const { return kv_bytes_per_token_layer() * layers; }
  double weight_bytes() const { return params * dtype_bytes; }
  double weight_bytes_per_layer() const { return weight_bytes() / layers; }
  // A forward pass costs about 2 FLOPs per parameter per token.
  double weight_flops_per_token_layer() const { return 2.0 * params / layers; }
  uint32_t model_dim() const { return heads * head_dim; }
};

ParamList llm_params();
LlmSpec parse_llm(json& m, const std::string& where);

}  // namespace kvtier
