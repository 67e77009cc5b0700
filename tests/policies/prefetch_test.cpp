#include "fixture.h"

using namespace kvtier;
using kvtier::test::make;
using kvtier::test::Table;

namespace {
SelectInput at(uint32_t step, uint32_t n, const std::vector<uint32_t>* b = nullptr, const std::vector<float>* m = nullptr,
               uint32_t layer = 0) {
  SelectInput in;
  in.step = step;
  in.layer = layer;
  in.n_blocks = n;
  in.trace_blocks = b;
  in.trace_mass = m;
  return in;
}
}  // namespace

TEST_CASE("prefetch baselines: fixed depth, no prediction") {
  Table T(1, 1, 8, {8, 100});
  auto p = make<PrefetchPolicy>(json{{"name", "layer_ahead"}, {"depth", 2}});
  CHECK(p->depth() == 2);
  CHECK(p->adapt_depth(0.9, 0.1) == 2);
  std::vector<uint32_t> out;
  p->predict(at(0, 8), T.t, out);
  CHECK(out.empty());
  CHECK(make<PrefetchPolicy>("none")->depth() == 0);
}

TEST_CASE("prefetch hifc_hot_span: the hot span widened 10% before and 15% after") {
  Table T(1, 2, 1000, {100, 1000});
  auto p = make<PrefetchPolicy>("hifc_hot_span");
  p->setup(T.t);
  // Hot blocks over several steps span [100, 199]; the sink (0) and cold
  // blocks (mass below the mean) do not count.
  for (uint32_t s = 0; s < 4; ++s) {
    std::vector<uint32_t> b{0, 50, 100 + 20 * s, s == 3 ? 199 : 130 + 20 * s, 300, 400};
    std::vector<float> m{0.5f, 0.001f, 0.2f, 0.2f, 0.001f, 0.001f};
    p->observe(at(s, 900, &b, &m, 1), T.t);
  }
  std::vector<uint32_t> out;
  p->predict(at(4, 900, nullptr, nullptr, 1), T.t, out);
  REQUIRE(!out.empty());
  CHECK(out.front() == 90);  // 100 - 10% of 100
  CHECK(out.back() == 214);  // 199 + 15% of 100
  CHECK(out.size() == 125);
  out.clear();
  p->predict(at(4, 900, nullptr, nullptr, 0), T.t, out);  // another layer: nothing seen
  CHECK(out.empty());
}

TEST_CASE("prefetch hifc_hot_span: only the last 16 steps count, and the span is clamped") {
  Table T(1, 1, 100, {100, 1000});
  auto p = make<PrefetchPolicy>("hifc_hot_span");
  p->setup(T.t);
  std::vector<uint32_t> far{10, 11}, near{80, 89};
  p->observe(at(0, 90, &far), T.t);
  for (uint32_t s = 10; s < 12; ++s) p->observe(at(s, 90, &near), T.t);
  std::vector<uint32_t> out;
  p->predict(at(12, 90), T.t, out);  // steps 0..11 are within 16: span [10, 89]
  REQUIRE(!out.empty());
  CHECK(out.front() == 2);  // width 80: -8
  CHECK(out.back() == 89);  // +12, clamped to the last block
  for (uint32_t s = 12; s < 20; ++s) p->observe(at(s, 90, &near), T.t);
  out.clear();
  p->predict(at(20, 90), T.t, out);  // step 0 is 20 steps back: forgotten
  REQUIRE(!out.empty());
  CHECK(out.front() == 79);  // width 10: -1, +2 clamped to the last block (89)
  CHECK(out.back() == 89);
}

TEST_CASE("prefetch markov: predicts the most frequent successor") {
  Table T(1, 1, 16, {16, 100});
  auto p = make<PrefetchPolicy>("markov");
  p->setup(T.t);
  // Stream per step: 5 -> 7 twice, 5 -> 9 once.
  std::vector<uint32_t> s0{5, 7}, s1{5, 7}, s2{5, 9};
  p->observe(at(0, 16, &s0), T.t);
  p->observe(at(1, 16, &s1), T.t);
  p->observe(at(2, 16, &s2), T.t);
  std::vector<uint32_t> out;
  p->predict(at(3, 16), T.t, out);
  // Last step used {5, 9}: 5's top successor is 7; 9 has none yet.
  CHECK(out == std::vector<uint32_t>{7});
}

TEST_CASE("prefetch markov: the sliding window forgets old transitions") {
  Table T(1, 1, 16, {16, 100});
  auto p = make<PrefetchPolicy>(json{{"name", "markov"}, {"window", 4}, {"fanout", 1}});
  p->setup(T.t);
  std::vector<uint32_t> a{1, 2};
  for (uint32_t s = 0; s < 3; ++s) p->observe(at(s, 16, &a), T.t);  // 1->2 x3, 2->1 x2
  std::vector<uint32_t> b{1, 3};
  for (uint32_t s = 3; s < 5; ++s) p->observe(at(s, 16, &b), T.t);
  // Window of 4: 2->1, 1->3, 3->1, 1->3. 1's top successor is now 3.
  std::vector<uint32_t> out;
  p->predict(at(5, 16), T.t, out);
  CHECK(out == std::vector<uint32_t>{3, 1});
}

TEST_CASE("prefetch adaptive: min depth when the GPU is busy, max when the link is idle") {
  auto p = make<PrefetchPolicy>(json{{"name", "adaptive"}, {"min_depth", 1}, {"max_depth", 4}, {"initial_depth", 2}});
  CHECK(p->depth() == 2);
  CHECK(p->adapt_depth(0.5, 0.6) == 2);  // neither: keep
  CHECK(p->adapt_depth(0.8, 0.6) == 1);
  CHECK(p->depth() == 1);
  CHECK(p->adapt_depth(0.5, 0.3) == 4);
  CHECK(p->adapt_depth(0.5, 0.5) == 4);  // keep
  CHECK(p->adapt_depth(0.75, 0.1) == 1);  // GPU rule wins
  CHECK_THROWS_AS(make<PrefetchPolicy>(json{{"name", "adaptive"}, {"min_depth", 5}, {"max_depth", 4}}), ConfigError);
}

TEST_CASE("prefetch stats: accuracy and coverage") {
  PrefetchStats s;
  CHECK(s.accuracy() == 0.0);
  s.prefetched_blocks = 50;
  s.used_blocks = 46;
  s.needed_blocks = 100;
  s.covered_blocks = 46;
  CHECK(s.accuracy() == Approx(0.92));
  CHECK(s.coverage() == Approx(0.46));
}

TEST_CASE("prefetch markov and hifc_hot_span: a new sequence in a released one's place learns from nothing") {
  // What (seq 0, layer 0) taught the predictor goes with it: once its blocks
  // are released, a new sequence there gets the prediction of a (seq,
  // layer) never seen (seq 1), and learns again from its own steps.
  for (const char* name : {"markov", "hifc_hot_span"}) {
    DYNAMIC_SECTION(name) {
      Table T(2, 1, 100, {100, 1000});
      auto p = make<PrefetchPolicy>(name);
      p->setup(T.t);
      std::vector<uint32_t> a{0, 40, 41, 42}, c{0, 60, 61};
      std::vector<float> ma{0.1f, 0.3f, 0.3f, 0.3f}, mc{0.1f, 0.45f, 0.45f};
      for (uint32_t s = 0; s < 3; ++s) p->observe(at(s, 90, &a, &ma), T.t);
      std::vector<uint32_t> before;
      p->predict(at(3, 90), T.t, before);
      REQUIRE(!before.empty());
      for (uint32_t i = 0; i < 90; ++i) p->on_release(T.t.id(0, 0, i), T.t);
      std::vector<uint32_t> reused, fresh;
      SelectInput r = at(3, 90), f = at(3, 90);
      f.seq = 1;
      p->predict(r, T.t, reused);
      p->predict(f, T.t, fresh);
      CHECK(reused == fresh);
      CHECK(reused.empty());
      // The new sequence's own steps, in both places alike.
      for (uint32_t s = 3; s < 6; ++s) {
        SelectInput o0 = at(s, 90, &c, &mc), o1 = at(s, 90, &c, &mc);
        o1.seq = 1;
        p->observe(o0, T.t);
        p->observe(o1, T.t);
      }
      reused.clear();
      fresh.clear();
      r.step = f.step = 6;
      p->predict(r, T.t, reused);
      p->predict(f, T.t, fresh);
      CHECK(!reused.empty());
      CHECK(reused == fresh);
    }
  }
}
