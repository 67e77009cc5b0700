#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>

#include "tests/traces/request_files.h"
#include "traces/request_synthetic.h"

using namespace kvtier;

namespace {

std::vector<Request> generate(json p) {
  SyntheticRequests g(p, "gen");
  std::vector<Request> out;
  Request r;
  while (g.next(r)) out.push_back(r);
  return out;
}

json base() {
  return json{{"requests", 400},
              {"seed", 3},
              {"arrival", {{"kind", "poisson"}, {"rate_per_s", 4.0}}},
              {"input", {{"kind", "constant"}, {"mean", 1000}}},
              {"output", {{"kind", "constant"}, {"mean", 100}}}};
}

}  // namespace

TEST_CASE("synthetic requests: same parameters and seed give the same stream, another seed another") {
  auto a = generate(base()), b = generate(base());
  json p = base();
  p["seed"] = 4;
  auto c = generate(p);
  REQUIRE(a.size() == 400);
  bool same = true, differ = false;
  for (size_t i = 0; i < a.size(); ++i) {
    same = same && a[i].arrival_s == b[i].arrival_s && a[i].blocks == b[i].blocks;
    differ = differ || a[i].arrival_s != c[i].arrival_s;
  }
  CHECK(same);
  CHECK(differ);
}

TEST_CASE("synthetic requests: Poisson arrivals at the given rate, in order") {
  json p = base();
  p["requests"] = 4000;
  auto v = generate(p);
  for (size_t i = 1; i < v.size(); ++i) REQUIRE(v[i].arrival_s >= v[i - 1].arrival_s);
  double rate = double(v.size() - 1) / (v.back().arrival_s - v.front().arrival_s);
  CHECK(rate == Approx(4.0).epsilon(0.05));
}

TEST_CASE("synthetic requests: gamma arrivals are burstier with a larger cv") {
  auto cv_of = [](double cv) {
    json p = base();
    p["requests"] = 5000;
    p["arrival"] = {{"kind", "gamma"}, {"rate_per_s", 4.0}, {"cv", cv}};
    auto v = generate(p);
    std::vector<double> gaps;
    for (size_t i = 1; i < v.size(); ++i) gaps.push_back(v[i].arrival_s - v[i - 1].arrival_s);
    double m = 0, s = 0;
    for (double g : gaps) m += g;
    m /= double(gaps.size());
    for (double g : gaps) s += (g - m) * (g - m);
    return std::sqrt(s / double(gaps.size())) / m;
  };
  CHECK(cv_of(1.0) == Approx(1.0).epsilon(0.08));
  CHECK(cv_of(3.0) == Approx(3.0).epsilon(0.15));
}

TEST_CASE("synthetic requests: replayed arrival times, scaled") {
  std::string tr = kvtier::test::request_file(
      "times.csv",
      "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:00.0,5,1\n2023-11-16 18:17:02.0,5,1\n"
      "2023-11-16 18:17:03.0,5,1\n");
  json p = base();
  p["arrival"] = {{"kind", "replay"}, {"trace", tr}, {"time_scale", 0.5}};
  auto v = generate(p);
  REQUIRE(v.size() == 3);  // the trace ends first
  CHECK(v[0].arrival_s == 0.0);
  CHECK(v[1].arrival_s == Approx(1.0));
  CHECK(v[2].arrival_s == Approx(1.5));
}

TEST_CASE("synthetic requests: later turns share the earlier turns' full blocks") {
  json p = base();
  p["sessions"] = {{"turns_mean", 4.0}, {"think_s", 5.0}};
  auto v = generate(p);
  std::map<uint64_t, std::vector<const Request*>> by_session;
  for (const auto& r : v) by_session[r.session].push_back(&r);
  size_t multi = 0;
  for (const auto& [s, turns] : by_session) {
    for (size_t k = 1; k < turns.size(); ++k) {
      const Request& a = *turns[k - 1];
      const Request& b = *turns[k];
      // The prompt grows by the previous answer and a new input ...
      REQUIRE(b.input_tokens == a.input_tokens + a.output_tokens + 1000);
      // ... and every full block of the previous prompt is the same block.
      uint32_t full = a.input_tokens / 512;
      for (uint32_t j = 0; j < full; ++j) REQUIRE(b.blocks[j] == a.blocks[j]);
      // The previous prompt's partial last block is not reused.
      if (a.input_tokens % 512) REQUIRE(b.blocks[full] != a.blocks[full]);
      REQUIRE(b.blocks.size() == (b.input_tokens + 511) / 512);
      ++multi;
    }
  }
  CHECK(multi > 100);
  CHECK(by_session.size() < v.size());
}

TEST_CASE("synthetic requests: RAG chunks keep their block ids across requests, popular chunks recur") {
  json p = base();
  p["requests"] = 2000;
  p["rag"] = {{"fraction", 1.0},  {"corpus_chunks", 1000}, {"chunk_tokens", 1024},
              {"chunks_per_request", 3}, {"zipf_alpha", 1.0}, {"question", {{"kind", "constant"}, {"mean", 50}}}};
  auto v = generate(p);
  std::map<uint64_t, int> uses;
  for (const auto& r : v) {
    REQUIRE(r.input_tokens == 3 * 1024 + 50);
    REQUIRE(r.blocks.size() == 3 * 2 + 1);
    std::set<uint64_t> distinct(r.blocks.begin(), r.blocks.end());
    REQUIRE(distinct.size() == r.blocks.size());  // distinct chunks
    for (size_t j = 0; j < 6; ++j) ++uses[r.blocks[j]];
  }
  // Zipf(1) over 1000 chunks: the top chunk is in about 3 x 1/H(1000) = 40% of requests.
  int top = 0;
  for (const auto& [b, n] : uses) top = std::max(top, n);
  CHECK(double(top) / 2000.0 == Approx(0.4).margin(0.06));
}

TEST_CASE("synthetic requests: invalid parameters name where") {
  json p = base();
  p["rag"] = {{"fraction", 0.5}, {"chunk_tokens", 1000}};
  CHECK_THROWS_WITH(SyntheticRequests(p, "gen"), Catch::Contains("gen.rag.chunk_tokens") &&
                                                     Catch::Contains("not a multiple of block_tokens"));
  json q = base();
  q["arrival"] = {{"kind", "weibull"}};
  CHECK_THROWS_WITH(SyntheticRequests(q, "gen"), Catch::Contains("gen.arrival.kind"));
  json r = base();
  r["inputs"] = json::object();
  CHECK_THROWS_WITH(SyntheticRequests(r, "gen"), Catch::Contains("inputs"));
}
