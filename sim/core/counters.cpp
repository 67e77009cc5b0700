#include "sim/core/counters.h"

#include <algorithm>
#include <cmath>

namespace kvtier {

double nearest_rank(const std::vector<double>& sorted, double q) {
  // The smallest value with at least q of the samples at or below it.
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace kvtier
