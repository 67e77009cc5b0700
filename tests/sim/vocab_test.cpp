// The embedding and the LM head (model.vocab_size, tied_embeddings): their
// parameters come out of the layers', the head runs once per pass over the
// sampled tokens, the embedding reads a row per input token; without a
// vocabulary every parameter stays in the layers, as before.
#include <catch2/catch.hpp>

#include <fstream>

#include "sim/engine/kernel_cost.h"
#include "sim_fixture.h"

using namespace kvtier;

namespace {

json gpu_json() {
  return json{{"kind", "gpu"}, {"capacity_GB", 80}, {"reserved_GB", 0}, {"memory_GBps", 1000},
              {"fp16_TFLOPS", 100}, {"launch_overhead_us", 0}};
}

json preset(const std::string& name) {
  std::ifstream f(std::string(KVTIER_SOURCE_DIR) + "/configs/models/" + name + ".json");
  REQUIRE(f.good());
  json m = json::parse(f);
  m.erase("source");
  return m;
}

EngineSetup setup(json model) {
  json hw{{"devices", {{"gpu", gpu_json()}}}, {"links", json::object()}, {"gpu", "gpu"}, {"tiers", {"gpu"}}};
  EngineSetup s;
  s.hw = parse_hardware(hw, "hardware");
  s.model = parse_llm(model, "model");
  s.bind_gpu();
  return s;
}

// The roofline written out for this GPU (no launch overhead, no curve).
double roofline(double flops, double bytes) { return std::max(flops / 100e12, bytes / 1000e9); }

}  // namespace

TEST_CASE("vocab: without a vocabulary every parameter is in the layers, exactly as before") {
  json m = preset("opt-6.7b");
  m["vocab_size"] = 0;
  const EngineSetup s = setup(m);
  const LlmSpec& o = s.model;
  CHECK(o.weight_bytes_per_layer() == 6.7e9 * 2 / 32);
  CHECK(o.weight_flops_per_token_layer() == 2.0 * 6.7e9 / 32);
  // A decode step of 8 sequences reading 8 x 1024 tokens: the old spread's kernel, layer for layer, and nothing else.
  const double tokens = 8 * 1024.0;
  const double old = roofline(2.0 * 6.7e9 / 32 * 8 + 4 * tokens * 4096, 6.7e9 * 2 / 32 + tokens * o.kv_bytes_per_token_layer());
  CHECK(decode_kernel_s(s, 8, tokens) == Approx(old).epsilon(1e-12));
  CHECK(head_kernel_s(s, KernelPhase::Decode, 8) == 0);
  CHECK(embedding_kernel_s(s, KernelPhase::Decode, 8) == 0);
  const PassEnds e = iteration_ends_s(s, {KernelSeq{0, 100, true, true}, KernelSeq{50, 1, false}});
  CHECK(e.first_s == 0);
  CHECK(e.last_s == 0);
}

TEST_CASE("vocab: the layers hold what the embedding and the head leave; decode is layers plus the head") {
  const EngineSetup s = setup(preset("llama-3-8b"));  // 128256 tokens, untied, d 4096
  const LlmSpec& m = s.model;
  const double V = 128256, d = 4096, emb = V * d;
  REQUIRE(m.vocab == 128256);
  REQUIRE_FALSE(m.tied);
  CHECK(m.embedding_params() == emb);
  CHECK(m.head_params() == emb);
  CHECK(m.weight_bytes_per_layer() == Approx((8e9 - 2 * emb) * 2 / 32).epsilon(1e-12));
  CHECK(m.weight_flops_per_token_layer() == Approx(2 * (8e9 - 2 * emb) / 32).epsilon(1e-12));
  CHECK(m.weight_bytes() == Approx(16e9).epsilon(1e-12));  // every parameter is still a weight

  // A decode step of 4 sequences over 4 x 2048 tokens: 32 layers, then the
  // head over 4 tokens (its whole matrix read once), the embedding's 4 rows.
  const double tokens = 4 * 2048.0;
  const double layer = roofline(m.weight_flops_per_token_layer() * 4 + 4 * tokens * 4096,
                                m.weight_bytes_per_layer() + tokens * m.kv_bytes_per_token_layer());
  CHECK(decode_kernel_s(s, 4, tokens) == Approx(layer).epsilon(1e-12));
  const double head = roofline(2 * d * V * 4, V * d * 2), embed = roofline(0, 4 * d * 2);
  CHECK(head_kernel_s(s, KernelPhase::Decode, 4) == Approx(head).epsilon(1e-12));
  CHECK(embedding_kernel_s(s, KernelPhase::Decode, 4) == Approx(embed).epsilon(1e-12));
  std::vector<KernelSeq> step(4, KernelSeq{2047, 1, false});
  const PassEnds e = iteration_ends_s(s, step);
  CHECK(e.first_s == Approx(embed).epsilon(1e-12));
  CHECK(e.last_s == Approx(head).epsilon(1e-12));
}

TEST_CASE("vocab: prefill charges the head once per prompt, in the chunk that ends it") {
  const EngineSetup s = setup(preset("llama-3-8b"));
  const double V = 128256, d = 4096;
  // Two prompts, one in its last chunk, one in a chunk before its last: one sampled token.
  const PassEnds chunks = iteration_ends_s(s, {KernelSeq{0, 512, true, true}, KernelSeq{0, 512, true, false}});
  CHECK(chunks.last_s == Approx(roofline(2 * d * V * 1, V * d * 2)).epsilon(1e-12));
  CHECK(chunks.first_s == Approx(roofline(0, 1024 * d * 2)).epsilon(1e-12));
  // A prefill of 3 whole prompts of 1000 tokens: the layers' GEMMs without
  // the head's FLOPs per prompt token (they are in the 3 sampled tokens only).
  const double gemm_per_layer = s.model.weight_flops_per_token_layer() * 3000;
  const double total_gemm = 32 * gemm_per_layer + 2 * d * V * 3;
  CHECK(total_gemm < 2 * 8e9 * 3000);  // the old spread charged every parameter to every token
  const PassEnds none = iteration_ends_s(s, {KernelSeq{0, 512, true, false}});
  CHECK(none.last_s == 0);
}

TEST_CASE("vocab: a tied head has no weights of its own but the same FLOPs and read") {
  json untied = preset("opt-6.7b");
  untied["tied_embeddings"] = false;
  json tied = preset("opt-6.7b");
  REQUIRE(tied["tied_embeddings"] == true);
  const double V = 50272, d = 4096;
  // The same layers: the untied model has one more vocab x d matrix.
  untied["params_B"] = 6.7 + V * d / 1e9;
  const EngineSetup u = setup(untied), t = setup(tied);
  CHECK(u.model.weight_bytes_per_layer() == Approx(t.model.weight_bytes_per_layer()).epsilon(1e-12));
  CHECK(u.model.weight_bytes() - t.model.weight_bytes() == Approx(V * d * 2).epsilon(1e-9));
  CHECK(head_kernel_s(u, KernelPhase::Decode, 16) == Approx(head_kernel_s(t, KernelPhase::Decode, 16)).epsilon(1e-12));
  CHECK(u.model.head_flops_per_token() == t.model.head_flops_per_token());
}

TEST_CASE("vocab: an embedding and head as large as the model is an error naming model.vocab_size") {
  json m = preset("llama-3-8b");
  m["params_B"] = 1.0;  // 2 x 128256 x 4096 = 1.05 B
  CHECK_THROWS_WITH(parse_llm(m, "model"), Catch::Contains("model.vocab_size"));
  m["tied_embeddings"] = true;  // 0.53 B leave the layers some
  CHECK_NOTHROW(parse_llm(m, "model"));
}

TEST_CASE("vocab: pipeline stages hold the embedding first and the head last; tensor ranks a tp-th of both") {
  const LlmSpec whole = setup(preset("llama-3-8b")).model;
  const double emb = 128256.0 * 4096;
  const LlmSpec first = whole.stage(16, true, false), last = whole.stage(16, false, true);
  CHECK(first.embedding_params() == emb);
  CHECK(first.head_params() == 0);
  CHECK(first.head_flops_per_token() == 0);
  CHECK(last.embedding_params() == 0);
  CHECK(last.head_params() == emb);
  CHECK(last.embedding_bytes_per_token() == 0);
  CHECK(first.weight_bytes_per_layer() == Approx(whole.weight_bytes_per_layer()).epsilon(1e-12));
  CHECK(last.weight_bytes_per_layer() == Approx(whole.weight_bytes_per_layer()).epsilon(1e-12));
  CHECK(first.params + last.params == Approx(whole.params).epsilon(1e-12));
  // A tied head on a last stage apart from the embedding is its own copy (Megatron-LM's).
  const LlmSpec opt = setup(preset("opt-6.7b")).model;
  CHECK(opt.head_params() == 0);
  CHECK(opt.stage(16, false, true).head_params() == 50272.0 * 4096);
  CHECK(opt.stage(16, true, true).head_params() == 0);
  // One of 4 tensor-parallel ranks (a quarter of the heads and parameters, as cluster.tp writes its spec).
  json r = preset("llama-3-8b");
  r["heads"] = 8;
  r["kv_heads"] = 2;
  r["params_B"] = 2.0;
  const LlmSpec rank = setup(r).model;
  CHECK(rank.embedding_params() == emb / 4);
  CHECK(rank.head_params() == emb / 4);
  CHECK(rank.head_flops_per_token() == Approx(whole.head_flops_per_token() / 4).epsilon(1e-12));
  CHECK(rank.weight_bytes_per_layer() == Approx(whole.weight_bytes_per_layer() / 4).epsilon(1e-12));
}

TEST_CASE("vocab: a larger vocabulary over the same layers never makes a pass faster") {
  double prev_decode = 0, prev_prefill = 0;
  for (int V : {0, 1000, 32000, 128256, 256000}) {
    json m = preset("llama-3-8b");
    m["vocab_size"] = V;
    m["params_B"] = 7.0 + 2.0 * V * 4096 / 1e9;  // 7 B in the layers, whatever the vocabulary
    const EngineSetup s = setup(m);
    CAPTURE(V);
    std::vector<KernelSeq> step(8, KernelSeq{1000, 1, false});
    const PassEnds e = iteration_ends_s(s, step);
    const double decode = 32 * iteration_kernel_s(s, 16, step) + e.first_s + e.last_s;
    std::vector<KernelSeq> prompts(2, KernelSeq{0, 2048, true, true});
    const PassEnds p = iteration_ends_s(s, prompts);
    const double prefill = 32 * iteration_kernel_s(s, 16, prompts) + p.first_s + p.last_s;
    CHECK(decode >= prev_decode);
    CHECK(prefill >= prev_prefill);
    prev_decode = decode;
    prev_prefill = prefill;
  }
}
