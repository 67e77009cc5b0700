// Exact attention: every block that exists is read every step.
#include "policies/policy.h"

namespace kvtier {

class ExactEvaluation : public EvaluationPolicy {
 public:
  static ParamList params() { return {}; }
  explicit ExactEvaluation(const json&) {}
  void select(const SelectInput& in, const BlockTable&, std::vector<uint32_t>& out) override {
    for (uint32_t i = 0; i < in.n_blocks; ++i) out.push_back(i);
  }
  bool reads_attention() const override { return false; }
  bool dense() const override { return true; }
};
KVTIER_REGISTER(EvaluationPolicy, ExactEvaluation, "exact", "read every block every step (dense attention)");

}  // namespace kvtier
