// What a device costs to have, per hour: its purchase price spread over its
// amortisation years, or a cloud price per hour (a whole instance's price
// can sit on one device, the others priced 0). Electricity is charged on the
// energy of purchased devices only: a cloud price already pays for power.
#pragma once

#include "models/param.h"

namespace kvtier {

constexpr double kHoursPerYear = 8766;  // 365.25 days

struct DevicePrice {
  double usd = 0;               // purchase price; 0 = not bought
  double amortization_years = 3;
  double usd_per_hour = 0;      // cloud price; 0 = not rented
  bool bundled = false;         // paid within another device's price (a card's part, an instance's device)
  bool priced() const { return usd > 0 || usd_per_hour > 0 || bundled; }
  // Capital (or rent) per hour of use.
  double capital_usd_per_hour() const { return usd_per_hour + (usd > 0 ? usd / (amortization_years * kHoursPerYear) : 0.0); }
};

ParamList device_price_params();
// Validates `price` (at `where`; created when null, defaults filled in place).
DevicePrice parse_device_price(json& price, const std::string& where);

}  // namespace kvtier
