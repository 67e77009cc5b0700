// History top-k: load the k blocks with the highest importance estimate, plus
// the attention sinks and the recent window. The estimate uses only what a
// real system could know: the block's attention-mass history in BlockTable,
//   score = last_weight * last_mass + (1 - last_weight) * mass / access_count
// (0 for a block never used). Sinks and window count towards k but are kept
// even past it.
//
// Limitation (shared with H2O-like policies): a block never loaded never
// gets a mass, so it is only chosen again through the window or the sinks;
// the recall metric shows the cost.
#pragma once

#include "policies/common.h"
#include "policies/policy.h"

namespace kvtier {

// Also the selection half of APP (evaluation/app.cpp), which adds where the
// scoring runs.
class TopkEvaluation : public EvaluationPolicy {
 public:
  static ParamList params() {
    ParamList p = Budget::params(0.2, "blocks loaded per (step, layer, seq), sinks and window included");
    p.push_back(integer("sinks", 1, "first blocks always loaded (attention sinks)", 0));
    p.push_back(integer("recent", 2, "newest blocks always loaded", 0));
    p.push_back(num("last_weight", 0.5, "weight of the last use's mass vs the mean mass per use in the estimate", 0.0, 1.0));
    return p;
  }
  explicit TopkEvaluation(const json& p)
      : budget_(Budget::from(p)),
        sinks_(uint32_t(get_int(p, "sinks"))),
        recent_(uint32_t(get_int(p, "recent"))),
        w_(float(get_num(p, "last_weight"))) {}

  void setup(const BlockTable& table) override {
    score_.assign(table.blocks_per_seq_layer, 0.f);
    scratch_.assign(table.blocks_per_seq_layer, 0);
  }
  void select(const SelectInput& in, const BlockTable& table, std::vector<uint32_t>& out) override {
    const uint32_t g = in.seq * table.layers + in.layer;
    for (uint32_t i = 0; i < in.n_blocks; ++i) score_[i] = history_score(table, table.block_at(g, i), w_);
    select_top_k(score_.data(), in.n_blocks, budget_.blocks(in.n_blocks), sinks_, recent_, scratch_, out);
  }

 protected:
  Budget budget_;
  uint32_t sinks_, recent_;
  float w_;
  std::vector<float> score_;
  std::vector<uint32_t> scratch_;
};

}  // namespace kvtier
