#include "models/power/device_price.h"

namespace kvtier {

ParamList device_price_params() {
  return {
      num("usd", 0.0, "purchase price, US dollars (0 = not bought; see usd_per_hour)", 0),
      positive("amortization_years", 3.0, "years the purchase price is spread over"),
      num("usd_per_hour", 0.0, "cloud price per hour, US dollars (0 = not rented)", 0),
      boolean("bundled", false,
              "paid within another device's price (a SmartSSD's FPGA in the card's, a cloud instance's parts in the "
              "instance's); its power is paid like that device's"),
  };
}

DevicePrice parse_device_price(json& price, const std::string& where) {
  if (price.is_null()) price = json::object();
  if (!price.is_object()) throw ConfigError(where + ": expected an object {usd, amortization_years, usd_per_hour}");
  resolve_params(price, device_price_params(), where);
  DevicePrice p;
  p.usd = get_num(price, "usd");
  p.amortization_years = get_num(price, "amortization_years");
  p.usd_per_hour = get_num(price, "usd_per_hour");
  p.bundled = price["bundled"].get<bool>();
  if (p.bundled && (p.usd > 0 || p.usd_per_hour > 0))
    throw ConfigError(where + ".bundled: a device paid within another's price has no price of its own");
  if (p.usd > 0 && p.usd_per_hour > 0)
    throw ConfigError(where + ": give usd (bought) or usd_per_hour (rented), not both");
  return p;
}

}  // namespace kvtier
