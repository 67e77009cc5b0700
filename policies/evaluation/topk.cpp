// History top-k; the class is in topk.h so that APP can reuse its selection.
#include "policies/evaluation/topk.h"

namespace kvtier {

KVTIER_REGISTER(EvaluationPolicy, TopkEvaluation, "topk",
                "load the top-k blocks by attention-mass history, plus sinks and the recent window");

}  // namespace kvtier
