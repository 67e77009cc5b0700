#include <algorithm>
#include <cmath>
#include <set>

#include "fixture.h"

using namespace kvtier;
using kvtier::test::make;
using kvtier::test::Table;

namespace {
SelectInput input(uint32_t n, uint32_t step = 0, uint32_t layer = 0, uint32_t seq = 0) {
  SelectInput in;
  in.n_blocks = n;
  in.step = step;
  in.layer = layer;
  in.seq = seq;
  return in;
}
}  // namespace

TEST_CASE("evaluation exact and trace") {
  Table T(1, 1, 8, {8});
  std::vector<uint32_t> out, tb{1, 5};
  std::vector<float> tm{0.5f, 0.5f};
  SelectInput in = input(6);
  in.trace_blocks = &tb;
  in.trace_mass = &tm;
  make<EvaluationPolicy>("exact")->select(in, T.t, out);
  CHECK(out == std::vector<uint32_t>{0, 1, 2, 3, 4, 5});
  out.clear();
  make<EvaluationPolicy>("trace")->select(in, T.t, out);
  CHECK(out == tb);
  CHECK(make<EvaluationPolicy>("exact")->scoring() == nullptr);
}

TEST_CASE("evaluation topk: keeps the top-k by mass history plus sinks and window") {
  Table T(1, 2, 16, {16});
  auto e = make<EvaluationPolicy>(json{{"name", "topk"}, {"budget", 5}, {"budget_unit", "blocks"}, {"sinks", 1}, {"recent", 1}, {"last_weight", 1.0}});
  e->setup(T.t);
  float last[12] = {0.f, 0.1f, 0.9f, 0.2f, 0.05f, 0.7f, 0.3f, 0.8f, 0.0f, 0.1f, 0.2f, 0.0f};
  for (uint32_t i = 0; i < 12; ++i)
    if (last[i] > 0) T.use(nullptr, T.t.id(0, 1, i), last[i]);
  std::vector<uint32_t> out;
  e->select(input(12, 0, 1), T.t, out);
  CHECK(out == std::vector<uint32_t>{0, 2, 5, 7, 11});  // sink 0, window 11, top-3 by mass: 2, 7, 5
}

TEST_CASE("evaluation topk: the estimate mixes the last mass and the mean per use") {
  Table T(1, 1, 8, {8});
  auto e = make<EvaluationPolicy>(json{{"name", "topk"}, {"budget", 1}, {"budget_unit", "blocks"}, {"sinks", 0}, {"recent", 0}, {"last_weight", 0.0}});
  e->setup(T.t);
  // Block 1: mean 0.5, last 0.1; block 2: mean 0.3, last 0.3.
  T.use(nullptr, 1, 0.9f);
  T.use(nullptr, 1, 0.1f);
  T.use(nullptr, 2, 0.3f);
  std::vector<uint32_t> out;
  e->select(input(4), T.t, out);
  CHECK(out == std::vector<uint32_t>{1});
  auto last = make<EvaluationPolicy>(json{{"name", "topk"}, {"budget", 1}, {"budget_unit", "blocks"}, {"sinks", 0}, {"recent", 0}, {"last_weight", 1.0}});
  last->setup(T.t);
  out.clear();
  last->select(input(4), T.t, out);
  CHECK(out == std::vector<uint32_t>{2});
}

TEST_CASE("evaluation topk: a fractional budget and more sinks/window than budget") {
  Table T(1, 1, 100, {100});
  auto e = make<EvaluationPolicy>(json{{"name", "topk"}, {"budget", 0.1}, {"sinks", 4}, {"recent", 4}});
  e->setup(T.t);
  std::vector<uint32_t> out;
  e->select(input(100), T.t, out);
  CHECK(out.size() == 10);
  CHECK(std::is_sorted(out.begin(), out.end()));
  out.clear();
  e->select(input(20), T.t, out);  // k = 2 < 8 fixed: sinks and window only
  CHECK(out == std::vector<uint32_t>{0, 1, 2, 3, 16, 17, 18, 19});
  out.clear();
  e->select(input(3), T.t, out);  // overlapping sinks and window
  CHECK(out == std::vector<uint32_t>{0, 1, 2});
}

TEST_CASE("evaluation quest: noise 0 is top-k on the true mass; noise perturbs reproducibly and only upwards") {
  Table T(1, 1, 64, {64});
  std::vector<uint32_t> tb;
  std::vector<float> tm;
  for (uint32_t i = 0; i < 40; ++i) {
    tb.push_back(i);
    tm.push_back(i == 7 || i == 20 || i == 30 ? 0.2f : 0.4f / 37.f);
  }
  SelectInput in = input(40, 3, 0, 0);
  in.trace_blocks = &tb;
  in.trace_mass = &tm;
  auto oracle = make<EvaluationPolicy>(json{{"name", "quest"}, {"budget", 4}, {"budget_unit", "blocks"}, {"noise", 0.0}});
  oracle->setup(T.t);
  std::vector<uint32_t> out;
  oracle->select(in, T.t, out);
  CHECK(out == std::vector<uint32_t>{7, 20, 30, 39});
  auto noisy = make<EvaluationPolicy>(json{{"name", "quest"}, {"budget", 4}, {"budget_unit", "blocks"}, {"noise", 1.0}, {"seed", 3}});
  noisy->setup(T.t);
  std::vector<uint32_t> a, b;
  noisy->select(in, T.t, a);
  noisy->select(in, T.t, b);
  CHECK(a == b);
  // A small noise keeps the heavy blocks (0.2 is 8x the uniform mass).
  CHECK(std::set<uint32_t>(a.begin(), a.end()).count(20) == 1);
  // Huge noise: selection is close to random, the heavy ones mostly lost.
  auto wild = make<EvaluationPolicy>(json{{"name", "quest"}, {"budget", 4}, {"budget_unit", "blocks"}, {"noise", 1000.0}});
  wild->setup(T.t);
  int heavy = 0;
  for (uint32_t s = 0; s < 50; ++s) {
    std::vector<uint32_t> o;
    in.step = s;
    wild->select(in, T.t, o);
    for (uint32_t x : o) heavy += x == 7 || x == 20 || x == 30;
  }
  CHECK(heavy < 40);  // the oracle would pick 150
}

TEST_CASE("evaluation app: closed-form beta equalises T_cpu and T_fpga within 1%") {
  auto e = make<EvaluationPolicy>(json{{"name", "app"}, {"score_bits", 16}});
  ScoringSplit* s = e->scoring();
  REQUIRE(s != nullptr);
  double M = 4e9;
  ScoringPlan p = s->plan(M);
  CHECK(p.bytes_cpu + p.bytes_fpga == Approx(M));
  CHECK(std::fabs(p.t_cpu - p.t_fpga) <= 0.01 * std::max(p.t_cpu, p.t_fpga));
  // Check against the formula with the defaults.
  double a_c = 1 / 20e9 + 0.2 / 25e9, a_s = 1 / 2e9 + 0.2 / 3.5e9;
  CHECK(p.beta == Approx(a_s / (a_c + a_s)));
  CHECK(p.t_cpu == Approx(p.bytes_cpu * a_c));
  CHECK(s->beta() == Approx(p.beta));
}

TEST_CASE("evaluation app: M_c never exceeds the host budget M_0") {
  auto e = make<EvaluationPolicy>(json{{"name", "app"}, {"host_budget_GB", 1.0}, {"score_bits", 16}});
  ScoringPlan p = e->scoring()->plan(4e9);
  CHECK(p.bytes_cpu <= 1e9 * (1 + 1e-12));
  CHECK(p.bytes_cpu == Approx(1e9));
  CHECK(p.bytes_fpga == Approx(3e9));
  CHECK(p.beta == Approx(0.25));
  CHECK(p.t_fpga > p.t_cpu);  // the FPGA side now takes longer
  ScoringPlan small = e->scoring()->plan(0.5e9);  // under the budget: unconstrained
  CHECK(std::fabs(small.t_cpu - small.t_fpga) <= 0.01 * small.t_cpu);
}

TEST_CASE("evaluation app: fixed beta and rebalancing from measured times") {
  auto fixed = make<EvaluationPolicy>(json{{"name", "app"}, {"split", "fixed"}, {"beta", 0.3}, {"score_bits", 16}});
  ScoringPlan p = fixed->scoring()->plan(1e9);
  CHECK(p.beta == Approx(0.3));
  CHECK(p.bytes_cpu == Approx(0.3e9));
  fixed->scoring()->report(10.0, 0.001);
  CHECK(fixed->scoring()->beta() == Approx(0.3));

  auto reb = make<EvaluationPolicy>(json{{"name", "app"}, {"split", "rebalance"}, {"gain", 0.5}, {"score_bits", 16}});
  ScoringSplit* s = reb->scoring();
  double beta0 = s->beta();
  // The machine's CPU turns out 4x slower per byte than modelled: the
  // measured optimum is a_s / (4 a_c + a_s); beta converges there.
  double a_c = 1 / 20e9 + 0.2 / 25e9, a_s = 1 / 2e9 + 0.2 / 3.5e9;
  double target = a_s / (4 * a_c + a_s);
  for (int i = 0; i < 30; ++i) {
    ScoringPlan q = s->plan(1e9);
    s->report(q.bytes_cpu * 4 * a_c, q.bytes_fpga * a_s);
  }
  CHECK(s->beta() < beta0);
  CHECK(s->beta() == Approx(target).epsilon(1e-3));
}

TEST_CASE("evaluation app: selection is the history top-k") {
  Table T(1, 1, 16, {16});
  auto e = make<EvaluationPolicy>(json{{"name", "app"}, {"budget", 3}, {"budget_unit", "blocks"}, {"sinks", 1}, {"recent", 1}});
  e->setup(T.t);
  T.use(nullptr, 4, 0.9f);
  T.use(nullptr, 6, 0.2f);
  std::vector<uint32_t> out;
  e->select(input(10), T.t, out);
  CHECK(out == std::vector<uint32_t>{0, 4, 9});
}

TEST_CASE("evaluation app: INT8 scoring reads half the FP16 key bytes, and beta still equalises the sides") {
  auto e = make<EvaluationPolicy>(json{{"name", "app"}, {"score_bits", 8}});
  const double M = 1e9;  // FP16 key bytes
  ScoringPlan p = e->scoring()->plan(M);
  CHECK(p.bytes_cpu + p.bytes_fpga == Approx(M / 2));
  CHECK(p.t_cpu == Approx(p.t_fpga).epsilon(0.01));
}
