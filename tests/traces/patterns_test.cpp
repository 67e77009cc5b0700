// The patterns generator: every named pattern shows up in the trace's
// statistics as its parameters say.
#include <catch2/catch.hpp>
#include <cmath>

#include "traces/attention_stats.h"
#include "traces/synthetic_patterns.h"

using namespace kvtier;

namespace {
json stats_of(json p, uint32_t layers = 2, uint32_t steps = 200, uint32_t seqs = 1, uint32_t window = 2,
              uint64_t seed = 3) {
  PatternAttention g(p, "trace", layers, 4096, steps, 16, seqs, seed);
  StatsOptions o;
  o.window_blocks = window;
  return attention_stats(g, o);
}
}  // namespace

TEST_CASE("patterns: sinks and window take exactly their mass; every record sums to 1") {
  json p = {{"sink_mass", 0.15}, {"window_mass", 0.25}, {"background_mass", 0.05}};
  PatternAttention g(p, "trace", 3, 1000, 20, 16, 2, 1);
  AttentionRecord r;
  uint64_t n = 0;
  while (g.next(r)) {
    ++n;
    double total = 0;
    for (float m : r.mass) total += m;
    CHECK(total == Approx(1.0).epsilon(1e-5));
    CHECK(r.seq == (n - 1) % 2);
    CHECK(r.blocks.size() == g.header().blocks_at(r.step));  // background: every block listed
  }
  CHECK(n == 20 * 3 * 2);
  json s = stats_of({{"sink_mass", 0.15}, {"window_mass", 0.25}});
  CHECK(s["decode"]["sink"].get<double>() == Approx(0.15).epsilon(1e-4));
  CHECK(s["decode"]["window"].get<double>() == Approx(0.25).epsilon(1e-4));
}

TEST_CASE("patterns: heavy hitters follow heavy_fraction, a power law and per-layer values over depth") {
  json p = {{"heavy_fraction", json::array({0.2, 0.05})}, {"zipf_s", 0.0}, {"drift", 0.0}, {"sink_mass", 0.0},
            {"window_mass", 0.0}};
  json s = stats_of(p, 3, 20);
  // Context 4096 tokens in 16-token blocks: 256 blocks. Sinks and window are
  // listed too; coverage 0.9 takes most but not all of the heavy set.
  const double first = s["decode_per_layer"][0]["heavy_fraction"], last = s["decode_per_layer"][2]["heavy_fraction"];
  CHECK(first > 2.5 * last);
  CHECK(first < 0.2 + 3.0 / 256);
  CHECK(s["decode_per_layer"][1]["heavy_fraction"].get<double>() < first);
  // Steeper power law: more of the mass in the top 1%.
  json flat = stats_of({{"zipf_s", 0.2}, {"drift", 0.0}}), steep = stats_of({{"zipf_s", 2.5}, {"drift", 0.0}});
  CHECK(steep["decode"]["top_1pct"].get<double>() > flat["decode"]["top_1pct"].get<double>() + 0.1);
  CHECK(PatternAttention::at_depth(json::array({0.4, 0.0}), 1, 5) == Approx(0.3));
}

TEST_CASE("patterns: drift sets how much of the heavy set a step keeps") {
  for (double d : {0.0, 0.1, 0.3}) {
    json s = stats_of({{"drift", d}, {"sink_mass", 0.0}, {"window_mass", 0.0}, {"heavy_fraction", 0.1}});
    CHECK(s["decode"]["reuse"].get<double>() == Approx(1.0 - d).margin(0.04));
  }
}

TEST_CASE("patterns: spans of consecutive heavy blocks have mean length span_blocks") {
  json one = stats_of({{"span_blocks", 1.0}, {"zipf_s", 0.0}, {"heavy_fraction", 0.05}});
  json four = stats_of({{"span_blocks", 4.0}, {"zipf_s", 0.0}, {"heavy_fraction", 0.05}});
  CHECK(one["decode"]["heavy_in_spans"].get<double>() < 0.3);
  CHECK(four["decode"]["mean_span_blocks"].get<double>() > 2.5);
  CHECK(four["decode"]["mean_span_blocks"].get<double>() < 6.0);
  CHECK(four["decode"]["heavy_in_spans"].get<double>() > 0.7);
}

TEST_CASE("patterns: bursts put burst_mass on a distant span for burst_steps steps at rate burst_rate") {
  json p = {{"burst_rate", 0.1}, {"burst_steps", 8}, {"burst_blocks", 4}, {"burst_mass", 0.3}, {"sink_mass", 0.1},
            {"window_mass", 0.1}, {"heavy_fraction", 0.02}, {"drift", 0.0}};
  PatternAttention g(p, "trace", 4, 4096, 400, 16, 1, 9);
  AttentionRecord r;
  uint64_t records = 0, with_burst = 0;
  while (g.next(r)) {
    ++records;
    // Four adjacent blocks each holding at least burst_mass / 4: the burst.
    std::vector<double> m(g.header().blocks_at(r.step), 0.0);
    for (size_t i = 0; i < r.blocks.size(); ++i) m[r.blocks[i]] = r.mass[i];
    bool burst = false;
    for (size_t b = 1; b + 4 < m.size() - 2 && !burst; ++b)
      burst = m[b] >= 0.075 - 1e-6 && m[b + 1] >= 0.075 - 1e-6 && m[b + 2] >= 0.075 - 1e-6 && m[b + 3] >= 0.075 - 1e-6;
    with_burst += burst;
  }
  // A renewal process: bursts of 8 steps, then a geometric wait with mean (1 - r) / r.
  const double expect = 8.0 / (8.0 + 0.9 / 0.1);
  CHECK(static_cast<double>(with_burst) / records == Approx(expect).margin(0.1));
}

TEST_CASE("patterns: sequences draw independent patterns; the same seed gives the same trace") {
  json p = json::object(), q = json::object(), o = json::object();
  PatternAttention a(p, "t", 2, 2048, 5, 16, 2, 7), b(q, "t", 2, 2048, 5, 16, 2, 7), c(o, "t", 2, 2048, 5, 16, 2, 8);
  AttentionRecord ra, rb, rc;
  std::vector<std::vector<uint32_t>> by_seq[2];
  bool seed_differs = false;
  while (a.next(ra)) {
    REQUIRE(b.next(rb));
    REQUIRE(c.next(rc));
    CHECK(ra.blocks == rb.blocks);
    CHECK(ra.mass == rb.mass);
    seed_differs = seed_differs || ra.blocks != rc.blocks;
    by_seq[ra.seq].push_back(ra.blocks);
  }
  CHECK(seed_differs);
  CHECK(by_seq[0] != by_seq[1]);
  REQUIRE(a.prompt(1, 1) != nullptr);
  double total = 0;
  for (float m : *a.prompt(1, 1)) total += m;
  CHECK(total == Approx(1.0).epsilon(1e-5));
}

TEST_CASE("patterns: jitter varies each block's mass from step to step by its log-standard-deviation") {
  json p = {{"jitter", 0.3}, {"drift", 0.0}, {"sink_mass", 0.0}, {"window_mass", 0.0}, {"zipf_s", 0.0}};
  PatternAttention g(p, "trace", 1, 2048, 400, 16, 1, 4);
  AttentionRecord r;
  std::vector<double> prev(g.header().blocks_at(400), 0.0);
  double s = 0, s2 = 0, n = 0;
  while (g.next(r)) {
    for (size_t i = 0; i < r.blocks.size(); ++i) {
      const uint32_t b = r.blocks[i];
      if (prev[b] > 0 && r.step > 0) {
        const double d = std::log(r.mass[i] / prev[b]);
        s += d;
        s2 += d * d;
        n += 1;
      }
      prev[b] = r.mass[i];
    }
  }
  // Two independent factors: the log-ratio's standard deviation is jitter * sqrt 2.
  CHECK(std::sqrt(s2 / n - (s / n) * (s / n)) == Approx(0.3 * std::sqrt(2.0)).epsilon(0.05));
}

TEST_CASE("patterns: bad parameters name their key") {
  json p = {{"heavy_fraction", json::array({0.1, "x"})}};
  CHECK_THROWS_WITH(PatternAttention(p, "workload.trace", 2, 100, 2, 16, 1, 1),
                    Catch::Contains("workload.trace.heavy_fraction"));
  json q = {{"sink_mass", 0.6}, {"window_mass", 0.6}};
  CHECK_THROWS_WITH(PatternAttention(q, "workload.trace", 2, 100, 2, 16, 1, 1), Catch::Contains("exceed 1"));
  json r = {{"drfit", 0.1}};
  CHECK_THROWS_WITH(PatternAttention(r, "workload.trace", 2, 100, 2, 16, 1, 1), Catch::Contains("did you mean 'drift'"));
}

TEST_CASE("patterns: recent blocks before the window take recent_mass, falling by recent_decay with distance") {
  json p = {{"sink_mass", 0.1},    {"window_blocks", 1},  {"window_mass", 0.3},  {"recent_blocks", 4},
            {"recent_mass", 0.3},  {"recent_decay", 0.5}, {"heavy_fraction", 0.05}, {"drift", 0.0}};
  PatternAttention g(p, "trace", 2, 1024, 10, 16, 1, 7);
  AttentionRecord r;
  while (g.next(r)) {
    const uint32_t n = g.header().blocks_at(r.step);
    std::vector<double> m(n, 0.0);
    for (size_t i = 0; i < r.blocks.size(); ++i) m[r.blocks[i]] = r.mass[i];
    // Distances 1..4 before the newest block: 0.3 x (8, 4, 2, 1) / 15; heavy
    // spans land before them, so the shares are exact.
    for (uint32_t d = 1; d <= 4; ++d) CHECK(m[n - 1 - d] == Approx(0.3 * std::pow(0.5, d - 1) / 1.875).epsilon(1e-5));
    CHECK(m[n - 1] == Approx(0.3).epsilon(1e-5));
  }
  // Without recent blocks the parameters change nothing: the same records as before they existed.
  json a = {{"sink_mass", 0.1}, {"jitter", 0.3}}, b = {{"sink_mass", 0.1}, {"jitter", 0.3}, {"recent_mass", 0.4}};
  PatternAttention ga(a, "trace", 2, 1024, 5, 16, 2, 9), gb(b, "trace", 2, 1024, 5, 16, 2, 9);
  AttentionRecord ra, rb;
  while (ga.next(ra)) {
    REQUIRE(gb.next(rb));
    CHECK(ra.blocks == rb.blocks);
    CHECK(ra.mass == rb.mass);
  }
}
