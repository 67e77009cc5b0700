// Quest (Tang et al., ICML 2024): per page (here: per block), an upper bound
// of the query's attention score computed from the page's element-wise
// min/max of K; load the top-k pages by bound.
//
// Approximation: the simulator has no keys, only the trace's attention mass.
// We model the bound as the true mass plus a non-negative error,
//   bound_i = mass_i + noise * |N(0,1)| / n_blocks,
// seeded per (seed, step, layer, seq, block) so runs are reproducible. The
// error is in units of the uniform mass 1/n: noise 0 is an oracle top-k on
// the true mass; larger noise lets light blocks displace heavy ones, as a
// loose min/max bound does. The real bound is over the score before the
// softmax and correlates with, but is not, the mass; calibrate `noise` to a
// measured Quest recall if it matters. Without a trace the estimate falls
// back to the block's last mass (BlockTable::last_mass).
#include <cmath>

#include "policies/common.h"
#include "policies/policy.h"

namespace kvtier {

class QuestEvaluation : public EvaluationPolicy {
 public:
  static ParamList params() {
    ParamList p = Budget::params(0.2, "pages (blocks) loaded per (step, layer, seq), window included");
    p.push_back(integer("sinks", 0, "first blocks always loaded", 0));
    p.push_back(integer("recent", 1, "newest blocks always loaded (Quest always keeps the current page)", 0));
    p.push_back(num("noise", 1.0, "overestimate of the bound: scale of a half-normal error, in units of 1/n_blocks", 0.0));
    p.push_back(integer("seed", 1, "seed of the bound error", 0));
    return p;
  }
  explicit QuestEvaluation(const json& p)
      : budget_(Budget::from(p)),
        sinks_(uint32_t(get_int(p, "sinks"))),
        recent_(uint32_t(get_int(p, "recent"))),
        noise_(get_num(p, "noise")),
        seed_(uint64_t(get_int(p, "seed"))) {}

  void setup(const BlockTable& table) override {
    score_.assign(table.blocks_per_seq_layer, 0.f);
    scratch_.assign(table.blocks_per_seq_layer, 0);
  }
  void select(const SelectInput& in, const BlockTable& table, std::vector<uint32_t>& out) override {
    uint32_t n = in.n_blocks;
    if (in.trace_blocks && in.trace_mass) {
      for (uint32_t i = 0; i < n; ++i) score_[i] = 0.f;
      const auto& tb = *in.trace_blocks;
      const auto& tm = *in.trace_mass;
      for (size_t j = 0; j < tb.size() && j < tm.size(); ++j)
        if (tb[j] < n) score_[tb[j]] += tm[j];
    } else {
      const uint32_t g = in.seq * table.layers + in.layer;
      for (uint32_t i = 0; i < n; ++i) score_[i] = table.last_mass[table.block_at(g, i)];
    }
    if (noise_ > 0 && n > 0) {
      uint64_t key = seed_ * 0x100000001b3ULL ^ (uint64_t(in.step) << 40) ^ (uint64_t(in.layer) << 24) ^ (uint64_t(in.seq) << 12);
      double scale = noise_ / double(n);
      for (uint32_t i = 0; i < n; ++i) {
        uint64_t k = key * 31 + i;
        double u1 = hash_unit(k), u2 = hash_unit(k ^ 0x5bd1e995ULL);
        double z = std::sqrt(-2.0 * std::log(u1)) * std::fabs(std::cos(6.283185307179586 * u2));
        score_[i] += float(scale * z);
      }
    }
    select_top_k(score_.data(), n, budget_.blocks(n), sinks_, recent_, scratch_, out);
  }

 private:
  Budget budget_;
  uint32_t sinks_, recent_;
  double noise_;
  uint64_t seed_;
  std::vector<float> score_;
  std::vector<uint32_t> scratch_;
};
KVTIER_REGISTER(EvaluationPolicy, QuestEvaluation, "quest",
                "Quest: top-k pages by a per-page upper bound, modelled as the true mass plus seeded overestimate");

}  // namespace kvtier
