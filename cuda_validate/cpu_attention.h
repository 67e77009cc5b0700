// Decode attention on the CPU over KV blocks in DRAM: for every query head,
// scores q.k over the tokens of the given blocks, a softmax over them, and
// the weighted sum of the values (one pass, running maximum). A block holds
// block_tokens tokens, each its K then its V ([kv_heads][head_dim] each, IEEE
// half precision), so one token's KV of one layer is contiguous (a new
// token's KV is one aligned write); query head h reads KV head
// h / (heads / kv_heads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvtier::host {

struct AttentionShape {
  int heads = 8, kv_heads = 8, head_dim = 128, block_tokens = 64;
  size_t token_bytes() const { return size_t(2) * kv_heads * head_dim * 2; }
  size_t block_bytes() const { return token_bytes() * block_tokens; }
};

// q: heads x head_dim floats; blocks[i] has tokens[i] valid tokens;
// out: heads x head_dim floats.
void attend(const AttentionShape& s, const float* q, const uint16_t* const* blocks, const int* tokens, size_t n,
            float* out);

// Which implementation attend() uses on this CPU ("avx_f16c_fma" or "scalar").
std::string attention_isa();

float half_to_float(uint16_t h);

}  // namespace kvtier::host
