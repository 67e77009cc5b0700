#include "models/llm.h"

namespace kvtier {

uint32_t weight_dtype_bits(const std::string& dtype) {
  if (dtype == "fp16" || dtype == "bf16") return 16;
  if (dtype == "fp8" || dtype == "int8") return 8;
  if (dtype == "int4") return 4;
  return 0;  // "same"
}

ParamList llm_params() {
  return {
      str("name", "unnamed", "model name"),
      // Caps far above any published model (Llama-3.1-405B: 126 layers, 128
      // heads of 128), so that a typo is an error, not an hour-long run.
      integer("layers", nullptr, "transformer layers", 1, 4096),
      integer("heads", nullptr, "attention (query) heads", 1, 4096),
      integer("kv_heads", 0, "KV heads (GQA/MQA); 0 = same as heads", 0, 4096),
      integer("head_dim", nullptr, "dimension per head", 1, 65536),
      integer("dtype_bytes", 2, "bytes per KV element (2 = FP16/BF16)", 1, 8),
      positive("params_B", nullptr, "parameter count in billions (weights and per-token FLOPs)"),
      integer("max_context_tokens", 0,
              "longest sequence (prompt + output) the model was trained for; serving rejects a request past it, "
              "a single-batch run too unless workload.past_trained_context is true (as long-context papers ran). "
              "0 = not given (unchecked)",
              0, 1 << 30),
      str("weight_dtype", "same", "weight element type, separate from the KV's dtype_bytes; same = as many bytes as a KV element",
          {"same", "fp16", "bf16", "fp8", "int8", "int4"}),
  };
}

LlmSpec parse_llm(json& m, const std::string& where) {
  resolve_params(m, llm_params(), where);
  LlmSpec s;
  s.name = m["name"].get<std::string>();
  s.layers = static_cast<uint32_t>(get_int(m, "layers"));
  s.heads = static_cast<uint32_t>(get_int(m, "heads"));
  s.kv_heads = static_cast<uint32_t>(get_int(m, "kv_heads"));
  if (s.kv_heads == 0) s.kv_heads = s.heads;
  if (s.kv_heads > s.heads) throw ConfigError(where + ".kv_heads: more KV heads than heads");
  s.head_dim = static_cast<uint32_t>(get_int(m, "head_dim"));
  s.dtype_bytes = static_cast<uint32_t>(get_int(m, "dtype_bytes"));
  s.params = get_num(m, "params_B") * 1e9;
  s.max_context = static_cast<uint32_t>(get_int(m, "max_context_tokens"));
  s.weight_dtype = m["weight_dtype"].get<std::string>();
  s.weight_bits = weight_dtype_bits(s.weight_dtype);
  return s;
}

}  // namespace kvtier
