#include "models/llm.h"

#include <cstdio>

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
      // Caps above any published vocabulary (Gemma's 256000).
      integer("vocab_size", 0,
              "vocabulary (tokens; Hugging Face config.json vocab_size): an embedding of vocab x d (one row read per input "
              "token) and an LM head of d x vocab (2 d vocab FLOPs per sampled token, its matrix read once per forward "
              "pass) outside the layers, d = heads x head_dim; the layers hold the rest of params_B. 0 = not modelled: "
              "every parameter in the layers",
              0, 1 << 24),
      boolean("tied_embeddings", false,
              "the LM head is the embedding's matrix (Hugging Face tie_word_embeddings): no parameters of its own, its "
              "FLOPs and its read remain"),
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
  s.vocab = static_cast<uint32_t>(get_int(m, "vocab_size"));
  s.tied = m["tied_embeddings"].get<bool>();
  if (s.layer_params() <= 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, " (%.4g B parameters of vocab_size x heads x head_dim) leave none of params_B %.4g for the layers",
                  (s.embedding_params() + s.head_params()) / 1e9, s.params / 1e9);
    throw ConfigError(where + ".vocab_size: the embedding" + std::string(s.tied ? "" : " and the LM head") + buf);
  }
  return s;
}

LlmSpec LlmSpec::stage(uint32_t stage_layers, bool first, bool last) const {
  LlmSpec s = *this;
  s.layers = stage_layers;
  s.has_embedding = first && has_embedding;
  s.has_head = last && has_head;
  // Parameters as the stage's own spec subtracts them again, so that its
  // layers hold exactly their share of this spec's.
  s.params = layer_params() * double(stage_layers) / double(layers) + s.embedding_params() + s.head_params();
  return s;
}

}  // namespace kvtier
