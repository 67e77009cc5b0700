// Trace oracle: read exactly the blocks the attention trace says were used.
#include "policies/policy.h"

namespace kvtier {

class TraceEvaluation : public EvaluationPolicy {
 public:
  static ParamList params() { return {}; }
  explicit TraceEvaluation(const json&) {}
  void select(const SelectInput& in, const BlockTable&, std::vector<uint32_t>& out) override {
    if (in.trace_blocks) out.insert(out.end(), in.trace_blocks->begin(), in.trace_blocks->end());
  }
};
KVTIER_REGISTER(EvaluationPolicy, TraceEvaluation, "trace", "read the blocks the attention trace used (sparse oracle)");

}  // namespace kvtier
