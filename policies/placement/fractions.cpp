// FlexGen's KV placement (cache_gpu / cache_cpu / cache_disk percentages):
// fixed shares of the batch's KV per tier, whatever is used when. FlexGen's
// mixed device splits each cache tensor along its batch x head dimension;
// here whole sequences go to a tier, the first percent[0] of the batch to
// tier 0 and so on, so each sequence's blocks stay together. Blocks do not
// move afterwards unless a tier overflows (the eviction policy then demotes).
#include <cmath>
#include <string>
#include <vector>

#include "policies/policy.h"

namespace kvtier {

class FractionsPlacement : public PlacementPolicy {
 public:
  static ParamList params() {
    return {any("percent", json::array({100}),
                "share of the KV per tier, percent, fastest tier first (one entry per hardware tier; adds up to 100)",
                ParamType::Array)};
  }
  explicit FractionsPlacement(const json& p) {
    const json& a = p.at("percent");
    double sum = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_number() || a[i].get<double>() < 0)
        throw ConfigError("policies.placement.percent[" + std::to_string(i) + "]: expected a number >= 0, got " + a[i].dump());
      percent_.push_back(a[i].get<double>());
      sum += percent_.back();
    }
    if (percent_.empty() || std::fabs(sum - 100.0) > 1e-9)
      throw ConfigError("policies.placement.percent: the shares add up to " + std::to_string(sum) + "; expected 100");
  }
  void setup(const BlockTable& table) override {
    if (percent_.size() != table.tiers.size())
      throw ConfigError("policies.placement.percent: " + std::to_string(percent_.size()) + " shares for " +
                        std::to_string(table.tiers.size()) + " tiers (hardware.tiers); expected one per tier");
    batch_ = table.batch;
    // A share that does not fit its tier is a configuration error, not an
    // overflow for eviction to sort out: FlexGen sizes its tensors up front.
    std::vector<uint64_t> seqs(percent_.size(), 0);
    for (uint32_t s = 0; s < table.batch; ++s) ++seqs[tier_of_seq(s)];
    for (size_t t = 0; t < percent_.size(); ++t) {
      const uint64_t need = seqs[t] * table.layers * uint64_t(table.blocks_per_seq_layer);
      if (need > table.tiers[t].capacity_blocks)
        throw ConfigError("policies.placement.percent[" + std::to_string(t) + "]: " + std::to_string(need) +
                          " KV blocks of " + std::to_string(seqs[t]) + " sequences do not fit tier '" + table.tiers[t].name +
                          "' (" + std::to_string(table.tiers[t].capacity_blocks) + " blocks after any weights)");
    }
  }
  TierId place(BlockId b, const BlockTable& table) override { return tier_of_seq(table.seq_of(b)); }

 private:
  TierId tier_of_seq(uint32_t seq) const {
    // The middle of sequence seq on [0, 100): the tier whose share covers it.
    const double x = (double(seq) + 0.5) / double(batch_ ? batch_ : 1) * 100.0;
    double acc = 0;
    for (size_t t = 0; t < percent_.size(); ++t) {
      acc += percent_[t];
      if (x < acc) return TierId(t);
    }
    return TierId(percent_.size() - 1);
  }

  std::vector<double> percent_;
  uint32_t batch_ = 1;
};
KVTIER_REGISTER(PlacementPolicy, FractionsPlacement, "fractions",
                "fixed shares of the KV per tier (FlexGen's cache percentages), by sequence");

}  // namespace kvtier
