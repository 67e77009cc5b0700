#include "fixture.h"
#include "models/compression.h"

using namespace kvtier;
using kvtier::test::make;

TEST_CASE("compression none: ratio 1 everywhere") {
  auto c = make<CompressionPolicy>("none");
  CHECK(c->spec(2, 5).stored_fraction() == 1.0);
  CHECK(c->stored_bytes(1, 0, 1000.0) == 1000.0);
  CHECK(c->compress_s(1, 0, 1e9) == 0.0);
}

TEST_CASE("compression zstd: below the GPU only, figures from the codec table, seed ratio by config") {
  auto c = make<CompressionPolicy>("zstd");
  CHECK(c->spec(0, 0).stored_fraction() == 1.0);
  CHECK(c->spec(0, 0).compress_Bps == 0.0);
  CompressionSpec s = c->spec(2, 3);
  const Codec& z = find_codec("zstd", "test");
  CHECK(s.key_ratio == Approx(z.ratio));
  CHECK(s.compress_Bps == Approx(4 * z.compress_Bps));  // 4 threads
  CHECK_FALSE(s.on_gpu);
  auto aios = make<CompressionPolicy>(json{{"name", "zstd"}, {"ratio", 2.5}, {"threads", 1}, {"compress_GBps", 1.0}});
  CHECK(aios->spec(1, 0).stored_fraction() == Approx(0.4));  // "60% less data"
  CHECK(aios->stored_bytes(1, 0, 1000.0) == Approx(400.0));
  CHECK(aios->compress_s(1, 0, 2e9) == Approx(2.0));
  CHECK_THROWS_AS(make<CompressionPolicy>(json{{"name", "zstd"}, {"ratio", 0.4}}), ConfigError);
}

TEST_CASE("compression zstd/lz4 where gpu: nvCOMP figures for the whole GPU, no CPU threads; bad where is a config error") {
  const Codec& z = find_codec("zstd", "test");
  const Codec& l = find_codec("lz4", "test");
  REQUIRE(z.gpu_decompress_Bps > 0);
  REQUIRE(l.gpu_decompress_Bps > 0);
  auto g = make<CompressionPolicy>(json{{"name", "zstd"}, {"where", "gpu"}, {"threads", 16}});
  CompressionSpec s = g->spec(1, 0);
  CHECK(s.on_gpu);
  CHECK(s.threads == 0);
  CHECK(s.decompress_Bps == Approx(z.gpu_decompress_Bps));  // threads do not multiply a GPU's rate
  CHECK(s.compress_Bps == Approx(z.gpu_compress_Bps));
  auto l4 = make<CompressionPolicy>(json{{"name", "lz4"}, {"where", "gpu"}, {"decompress_GBps", 7.0}});
  CHECK(l4->spec(1, 0).decompress_Bps == Approx(7e9));
  CHECK(l4->spec(1, 0).compress_Bps == Approx(l.gpu_compress_Bps));
  // On the CPU: per-thread rates times threads, and the threads travel with the spec.
  CompressionSpec c = make<CompressionPolicy>(json{{"name", "zstd"}, {"threads", 8}})->spec(1, 0);
  CHECK_FALSE(c.on_gpu);
  CHECK(c.threads == 8);
  CHECK(c.decompress_Bps == Approx(8 * z.decompress_Bps));
  CHECK_THROWS_AS(make<CompressionPolicy>(json{{"name", "zstd"}, {"where", "fpga"}}), ConfigError);
}

TEST_CASE("compression quant: key bits per layer range (HiFC default)") {
  auto c = make<CompressionPolicy>(json{{"name", "quant"}, {"group", 0}});  // bare bits/16
  // Layers 1-8 (index 0-7): 8-bit keys, FP16 values.
  CHECK(1 / c->spec(0, 0).key_ratio == Approx(0.5));
  CHECK(1 / c->spec(0, 7).key_ratio == Approx(0.5));
  CHECK(c->spec(0, 7).value_ratio == 1.0);
  CHECK(c->spec(0, 7).stored_fraction() == Approx(0.75));
  // Layers 9-24: 4 bit.
  CHECK(1 / c->spec(1, 8).key_ratio == Approx(0.25));
  CHECK(1 / c->spec(2, 23).key_ratio == Approx(0.25));
  CHECK(c->spec(2, 23).stored_fraction() == Approx(0.625));
  // Layers 25-32 and beyond: FP16, no kernel.
  CHECK(c->spec(2, 24).key_ratio == 1.0);
  CHECK(c->spec(2, 39).key_ratio == 1.0);
  CHECK(c->spec(2, 39).compress_Bps == 0.0);
  CHECK(c->spec(2, 3).on_gpu);
  // Default group 64: scale and zero point overhead as models/compression.h.
  auto g = make<CompressionPolicy>("quant");
  CHECK(g->spec(0, 0).key_ratio == Approx(quantized_ratio(8, 64)));
  CHECK(g->spec(0, 10).key_ratio == Approx(16.0 / 4.5));
}

TEST_CASE("compression quant: custom ranges, values, tiers; bad ranges are config errors") {
  json cfg = {{"name", "quant"},
              {"ranges", json::array({json{{"from_layer", 1}, {"to_layer", 40}, {"bits", 4}}})},
              {"value_bits", 8},
              {"group", 0},
              {"from_tier", 1}};
  auto c = make<CompressionPolicy>(cfg);
  CHECK(c->spec(0, 10).stored_fraction() == 1.0);
  CHECK(1 / c->spec(1, 39).key_ratio == Approx(0.25));
  CHECK(1 / c->spec(1, 39).value_ratio == Approx(0.5));
  CHECK(c->stored_bytes(1, 0, 1600.0) == Approx(600.0));
  CHECK_THROWS_AS(make<CompressionPolicy>(json{{"name", "quant"}, {"ranges", json::array({json{{"from_layer", 3}, {"to_layer", 2}, {"bits", 4}}})}}),
                  ConfigError);
  CHECK_THROWS_AS(make<CompressionPolicy>(json{{"name", "quant"}, {"ranges", json::array({json{{"from_layer", 1}, {"to_layer", 2}, {"bits", 32}}})}}),
                  ConfigError);
  CHECK_THROWS_AS(make<CompressionPolicy>(json{{"name", "quant"}, {"ranges", json::array({json{{"layers", 1}}})}}), ConfigError);
}
