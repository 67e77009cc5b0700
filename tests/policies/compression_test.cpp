#include "fixture.h"

using namespace kvtier;
using kvtier::test::make;

TEST_CASE("compression none: ratio 1 everywhere") {
  auto c = make<CompressionPolicy>("none");
  CHECK(c->spec(2, 5).ratio() == 1.0);
  CHECK(c->stored_bytes(1, 0, 1000.0) == 1000.0);
}

TEST_CASE("compression zstd: 60% less data below the GPU by default") {
  auto c = make<CompressionPolicy>("zstd");
  CHECK(c->spec(0, 0).ratio() == 1.0);
  CHECK(c->spec(0, 0).compress_Bps == 0.0);
  CompressionSpec s = c->spec(2, 3);
  CHECK(s.ratio() == Approx(0.4));
  CHECK(s.compress_Bps == Approx(2e9));
  CHECK(s.decompress_Bps == Approx(6e9));
  CHECK_FALSE(s.on_gpu);
}

TEST_CASE("compression quant: key bits per layer range (HiFC default)") {
  auto c = make<CompressionPolicy>("quant");
  // Layers 1-8 (index 0-7): 8-bit keys, FP16 values.
  CHECK(c->spec(0, 0).key_ratio == Approx(0.5));
  CHECK(c->spec(0, 7).key_ratio == Approx(0.5));
  CHECK(c->spec(0, 7).value_ratio == 1.0);
  CHECK(c->spec(0, 7).ratio() == Approx(0.75));
  // Layers 9-24: 4 bit.
  CHECK(c->spec(1, 8).key_ratio == Approx(0.25));
  CHECK(c->spec(2, 23).key_ratio == Approx(0.25));
  CHECK(c->spec(2, 23).ratio() == Approx(0.625));
  // Layers 25-32 and beyond: FP16.
  CHECK(c->spec(2, 24).key_ratio == 1.0);
  CHECK(c->spec(2, 39).key_ratio == 1.0);
  CHECK(c->spec(2, 3).on_gpu);
}

TEST_CASE("compression quant: custom ranges, values, tiers; bad ranges are config errors") {
  json cfg = {{"name", "quant"},
              {"ranges", json::array({json{{"from_layer", 1}, {"to_layer", 40}, {"bits", 4}}})},
              {"value_bits", 8},
              {"from_tier", 1}};
  auto c = make<CompressionPolicy>(cfg);
  CHECK(c->spec(0, 10).ratio() == 1.0);
  CHECK(c->spec(1, 39).key_ratio == Approx(0.25));
  CHECK(c->spec(1, 39).value_ratio == Approx(0.5));
  CHECK(c->stored_bytes(1, 0, 1600.0) == Approx(600.0));
  CHECK_THROWS_AS(make<CompressionPolicy>(json{{"name", "quant"}, {"ranges", json::array({json{{"from_layer", 3}, {"to_layer", 2}, {"bits", 4}}})}}),
                  ConfigError);
  CHECK_THROWS_AS(make<CompressionPolicy>(json{{"name", "quant"}, {"ranges", json::array({json{{"from_layer", 1}, {"to_layer", 2}, {"bits", 32}}})}}),
                  ConfigError);
  CHECK_THROWS_AS(make<CompressionPolicy>(json{{"name", "quant"}, {"ranges", json::array({json{{"layers", 1}}})}}), ConfigError);
}
