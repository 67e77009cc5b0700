#include "models/flash_wear.h"

#include <limits>

namespace kvtier {

double FlashWear::years_to_wear_out(double host_Bps) const {
  if (!(rated_ > 0) || !(host_Bps > 0)) return std::numeric_limits<double>::infinity();
  double left = rated_ - nand_bytes_written();
  if (left <= 0) return 0;
  return left / (host_Bps * waf_) / (365.25 * 86400.0);
}

}  // namespace kvtier
