// Trace statistics on hand-made records, and the fit of the patterns
// generator: fitted parameters recover the generating ones, and a trace
// generated from a fit has the statistics of the trace it was fitted to.
#include <catch2/catch.hpp>

#include "traces/attention_fit.h"
#include "traces/attention_stats.h"
#include "traces/synthetic_patterns.h"

using namespace kvtier;

namespace {
// A source of hand-made records: one layer, one sequence.
class Fixed : public AttentionSource {
 public:
  Fixed(uint32_t ctx_blocks, std::vector<std::vector<float>> dense) : dense_(std::move(dense)) {
    h_.layers = 1;
    h_.steps = static_cast<uint32_t>(dense_.size());
    h_.block_tokens = 10;
    h_.context_tokens = ctx_blocks * 10 - 1;  // step s has ctx_blocks blocks while s < 1
  }
  const AttentionHeader& header() const override { return h_; }
  bool next(AttentionRecord& r) override {
    if (i_ >= dense_.size()) return false;
    r.step = static_cast<uint32_t>(i_);
    r.layer = 0;
    r.blocks.clear();
    r.mass.clear();
    for (uint32_t b = 0; b < dense_[i_].size(); ++b)
      if (dense_[i_][b] > 0) {
        r.blocks.push_back(b);
        r.mass.push_back(dense_[i_][b]);
      }
    ++i_;
    return true;
  }

 private:
  AttentionHeader h_;
  std::vector<std::vector<float>> dense_;
  size_t i_ = 0;
};
}  // namespace

TEST_CASE("stats: concentration, sink, window, heavy set, reuse and spans of known records") {
  // Step 0: 10 blocks; step 1: 11 blocks (context 99 tokens in 10-token blocks).
  std::vector<float> a(10, 0.f), b(11, 0.f);
  a[0] = 0.1f;
  a[3] = 0.4f;
  a[4] = 0.3f;
  a[9] = 0.2f;
  b[0] = 0.1f;
  b[3] = 0.5f;
  b[7] = 0.2f;
  b[10] = 0.2f;
  Fixed src(10, {a, b});
  StatsOptions o;
  o.coverage = 0.85;
  json s = attention_stats(src, o);
  const json& d = s["decode"];
  CHECK(d["records"] == 2);
  // Top 1% and 5% are one block; top 20% two blocks of 10, three of 11.
  CHECK(d["top_1pct"].get<double>() == Approx((0.4 + 0.5) / 2));
  CHECK(d["top_20pct"].get<double>() == Approx((0.7 + 0.9) / 2));
  CHECK(d["sink"].get<double>() == Approx(0.1));
  CHECK(d["window"].get<double>() == Approx(0.2));
  // Heavy sets at 85%: {3,4,9} (0.9) and {3,7,10} (0.9).
  CHECK(d["heavy_fraction"].get<double>() == Approx((3.0 / 10 + 3.0 / 11) / 2));
  CHECK(d["reuse"].get<double>() == Approx(1.0 / 3));
  CHECK(d["spans_per_record"].get<double>() == Approx((2 + 3) / 2.0));
  CHECK(d["heavy_in_spans"].get<double>() == Approx((2.0 / 3 + 0) / 2));
}

TEST_CASE("fit: recovers the generating parameters") {
  json p = {{"sink_mass", json::array({0.3, 0.1})},
            {"window_blocks", 1},
            {"window_mass", 0.2},
            {"heavy_fraction", 0.08},
            {"zipf_s", 1.0},
            {"drift", 0.1},
            {"span_blocks", 1.0}};
  json pj = p;
  pj["jitter"] = 0.25;
  PatternAttention g(p, "t", 4, 8192, 150, 32, 2, 11);
  AttentionFitOptions o;
  o.coverage = 0.999;  // the whole heavy set: no background to leave out here
  json f = fit_patterns(g, o, "generated");
  CHECK(f["kind"] == "patterns");
  CHECK(f["sink_mass"][0].get<double>() == Approx(0.3).margin(1e-4));
  CHECK(f["sink_mass"][3].get<double>() == Approx(0.1).margin(1e-4));
  CHECK(f["window_mass"][1].get<double>() == Approx(0.2).margin(1e-4));
  CHECK(f["heavy_fraction"][2].get<double>() == Approx(0.08).margin(0.015));
  CHECK(f["zipf_s"][0].get<double>() == Approx(1.0).margin(0.1));
  CHECK(f["drift"].get<double>() == Approx(0.1).margin(0.03));
  CHECK(f["span_blocks"].get<double>() < 1.5);
  CHECK(f["jitter"].get<double>() == 0.0);
  CHECK_THAT(f["source"].get<std::string>(), Catch::Contains("generated"));
  PatternAttention gj(pj, "t", 4, 8192, 150, 32, 2, 11);
  CHECK(fit_patterns(gj, o)["jitter"].get<double>() == Approx(0.25).margin(0.03));
}

TEST_CASE("fit: recovers bursts") {
  json p = {{"sink_mass", 0.1}, {"window_blocks", 1}, {"window_mass", 0.2}, {"heavy_fraction", 0.05},
            {"zipf_s", 0.5}, {"drift", 0.0}, {"burst_rate", 0.05}, {"burst_blocks", 4}, {"burst_steps", 8},
            {"burst_mass", 0.3}};
  PatternAttention g(p, "t", 4, 4096, 300, 16, 2, 13);
  AttentionFitOptions o;
  o.coverage = 0.999;
  json f = fit_patterns(g, o);
  CHECK(f["burst_rate"].get<double>() == Approx(0.05).margin(0.015));
  CHECK(f["burst_blocks"] == 4);
  CHECK(f["burst_steps"] == 8);
  CHECK(f["burst_mass"].get<double>() == Approx(0.3).margin(0.03));
  json none = {{"burst_rate", 0.0}, {"drift", 0.0}, {"jitter", 0.0}};
  PatternAttention q(none, "t", 2, 4096, 100, 16, 1, 13);
  CHECK(fit_patterns(q)["burst_rate"].get<double>() == 0.0);
}

TEST_CASE("fit: a trace generated from the fit has the statistics of the trace fitted") {
  json p = {{"sink_mass", 0.05}, {"window_blocks", 1}, {"window_mass", json::array({0.5, 0.2})}, {"heavy_fraction", json::array({0.3, 0.1})},
            {"zipf_s", 1.3}, {"background_mass", 0.1}, {"span_blocks", 3.0}, {"drift", 0.2}};
  auto stats = [](json params, uint64_t seed) {
    PatternAttention g(params, "t", 3, 4096, 120, 16, 2, seed);
    return attention_stats(g, StatsOptions{});
  };
  json fitted;
  {
    json q = p;
    PatternAttention g(q, "t", 3, 4096, 120, 16, 2, 5);
    fitted = fit_patterns(g);
  }
  json a = stats(p, 5), b = stats(fitted, 6);
  for (const char* k : {"top_1pct", "top_5pct", "top_20pct", "sink", "window", "heavy_fraction", "reuse"})
    CHECK(b["decode"][k].get<double>() == Approx(a["decode"][k].get<double>()).margin(0.05));
  // The fitted parameters are a valid config for the generator.
  json again = fitted;
  CHECK_NOTHROW(PatternAttention(again, "workload.trace", 7, 10000, 3, 64, 1, 1));
}

TEST_CASE("fit: recovers recency from the mass profile before the window") {
  json p = {{"sink_mass", 0.05}, {"window_blocks", 1}, {"window_mass", 0.3}, {"recent_blocks", 6},
            {"recent_mass", json::array({0.4, 0.2})}, {"recent_decay", 0.6}, {"heavy_fraction", 0.05},
            {"zipf_s", 1.0}, {"drift", 0.05}};
  auto gen = [&]() {
    json q = p;
    return PatternAttention(q, "t", 3, 4096, 80, 16, 2, 21);
  };
  PatternAttention g1 = gen();
  const RecencyProfile prof = recency_profile(g1, 1, 1);
  REQUIRE(prof.share.size() == 3);
  CHECK(prof.share[0][0] > 0.4 * 0.4);  // distance 1: the largest share
  PatternAttention g2 = gen();
  AttentionFitOptions o;
  o.recency = &prof;
  json f = fit_patterns(g2, o);
  INFO("block " << prof.block[0] << " " << prof.block[1] << " " << prof.block[2] << " d6 " << prof.share[0][5] << " "
                << prof.share[1][5] << " " << prof.share[2][5] << " d7 " << prof.share[0][6] << " " << prof.share[1][6]
                << " " << prof.share[2][6]);
  CHECK(f["recent_blocks"] == 6);
  CHECK(f["recent_mass"][0].get<double>() == Approx(0.4).margin(0.02));
  CHECK(f["recent_mass"][2].get<double>() == Approx(0.2).margin(0.02));
  CHECK(f["recent_decay"][1].get<double>() == Approx(0.6).margin(0.05));
  // Heavy hitters are measured before the recent blocks, as generated.
  CHECK(f["heavy_fraction"][1].get<double>() == Approx(0.05).margin(0.02));
  // Without a profile the fit has no recency (and is what it was).
  PatternAttention g3 = gen();
  CHECK_FALSE(fit_patterns(g3)["recent_blocks"].is_number());
}
