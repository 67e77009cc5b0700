// The running endurance account of a flash device (HiFC's concern: KV swap
// writes a lot, and consumer drives are rated for a few hundred TB). The
// engine records host writes; the account turns them into wear through the
// write amplification and compares with the rated TBW.
#pragma once

#include "models/device.h"

namespace kvtier {

class FlashWear {
 public:
  FlashWear(double rated_endurance_bytes, double write_amplification)
      : rated_(rated_endurance_bytes), waf_(write_amplification) {}
  explicit FlashWear(const DeviceModel& d) : FlashWear(d.rated_endurance_bytes(), d.write_amplification()) {}

  void record_write(double host_bytes) { host_ += host_bytes; }
  double host_bytes_written() const { return host_; }
  double nand_bytes_written() const { return host_ * waf_; }
  // Share of the rated endurance consumed so far; 0 when the rating is unknown.
  double life_used() const { return rated_ > 0 ? nand_bytes_written() / rated_ : 0; }
  // Years until the rating is reached if the host keeps writing at
  // `host_Bps`; infinity when it does not write or the rating is unknown.
  double years_to_wear_out(double host_Bps) const;

 private:
  double rated_, waf_;
  double host_ = 0;
};

}  // namespace kvtier
