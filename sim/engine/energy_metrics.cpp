#include "sim/engine/energy_metrics.h"

#include <algorithm>
#include <cmath>

namespace kvtier {

std::vector<DeviceActivity> device_activity(const Hardware& hw, const std::vector<LinkStat>& stats,
                                            const std::vector<double>& link_bytes, const std::vector<double>& work_s,
                                            double run_s, double throttled_fraction) {
  std::vector<DeviceActivity> act(hw.devices.size());
  for (size_t d = 0; d < act.size(); ++d) {
    act[d].run_s = run_s;
    act[d].work_s = d < work_s.size() ? work_s[d] : 0.0;
    act[d].throttled_fraction = throttled_fraction;
  }
  for (size_t i = 0; i < stats.size() && i < link_bytes.size(); ++i) {
    const LinkStat& st = stats[i];
    const double b = link_bytes[i];
    if (st.device >= 0) {  // a device's media: its reads, its writes (a shared bus: both, under read)
      DeviceActivity& a = act[static_cast<size_t>(st.device)];
      (st.write ? a.write_bytes : a.read_bytes) += b;
    } else if (st.link >= 0 && !st.both) {  // a topology link: bytes through its ends' ports
      const LinkEntry& l = hw.links[static_cast<size_t>(st.link)];
      for (const std::string* end : {&l.a, &l.b})
        if (int e = hw.device_index(*end); e >= 0) act[static_cast<size_t>(e)].port_bytes += b;
    }
  }
  return act;
}

EnergyTotals integrate_energy(const Hardware& hw, const std::vector<LinkStat>& stats,
                              const std::vector<double>& link_bytes, const std::vector<double>& work_s, double run_s,
                              double throttled_fraction) {
  EnergyTotals t;
  const auto act = device_activity(hw, stats, link_bytes, work_s, run_s, throttled_fraction);
  for (size_t d = 0; d < act.size(); ++d) {
    t.devices.push_back(hw.devices[d].power->energy(act[d]));
    t.total_J += t.devices.back().total_J();
  }
  t.link_J.assign(stats.size(), 0.0);
  for (size_t i = 0; i < stats.size() && i < link_bytes.size(); ++i) {
    const LinkStat& st = stats[i];
    if (st.device >= 0 || st.link < 0 || st.both) continue;
    t.link_J[i] = link_bytes[i] * hw.links[static_cast<size_t>(st.link)].energy_J_per_byte;
    t.total_J += t.link_J[i];
  }
  return t;
}

std::vector<double> link_bytes_now(const Platform& platform) {
  std::vector<double> b;
  for (const auto& st : platform.stats()) b.push_back(st.bytes);
  return b;
}

namespace {
double per(double x, double n) { return n > 0 ? x / n : 0.0; }

json energy_json(const Hardware& hw, const std::vector<LinkStat>& stats, const EnergyTotals& t, const EnergyRun& r) {
  json e;
  e["total_J"] = t.total_J;
  e["mean_W"] = per(t.total_J, r.end_s);
  json devices = json::object();
  for (size_t d = 0; d < t.devices.size(); ++d) {
    const DeviceEnergy& de = t.devices[d];
    devices[hw.devices[d].name] = {{"J", de.total_J()},        {"idle_J", de.idle_J}, {"active_J", de.active_J},
                                   {"traffic_J", de.traffic_J}, {"mean_W", per(de.total_J(), r.end_s)}};
  }
  e["devices"] = devices;
  json links = json::object();
  for (size_t i = 0; i < stats.size(); ++i)
    if (stats[i].device < 0 && stats[i].link >= 0 && !stats[i].both) links[stats[i].name] = {{"J", t.link_J[i]}};
  e["links"] = links;
  e["J_per_generated_token"] = per(t.total_J, r.generated_tokens);
  if (r.requests > 0) e["J_per_request"] = per(t.total_J, r.requests);
  return e;
}

// Capital (or rent) per hour, electricity on what is not rented, and flash
// worn out faster than it is amortised.
json cost_json(const Hardware& hw, const EnergyTotals& t, const EnergyRun& r) {
  double capital = 0, bought_J = t.total_J, wear = 0, replacement = 0;
  bool any_bought = false, any_rented = false;
  json unpriced = json::array(), flash = json::object();
  for (size_t d = 0; d < hw.devices.size(); ++d) {
    const DevicePrice& p = hw.devices[d].price;
    capital += p.capital_usd_per_hour();
    any_bought = any_bought || p.usd > 0;
    any_rented = any_rented || p.usd_per_hour > 0;
    if (p.usd_per_hour > 0) bought_J -= t.devices[d].total_J();  // the rent pays its power
    if (!p.priced() && hw.devices[d].model->role() != DeviceRole::Switch) unpriced.push_back(hw.devices[d].name);
  }
  if (any_rented && !any_bought) bought_J = 0;  // a rented machine: the rent pays for all its power
  for (const EnergyRun::Wear& w : r.wear) {
    const DevicePrice& p = hw.devices[w.device].price;
    if (p.usd <= 0 || r.end_s <= 0) continue;
    // Drives worn out in `years`: one bought every `years`, not every amortization_years.
    const double run_usd = p.usd * w.life_used, hours = r.end_s / 3600;
    const double wear_per_hour = run_usd / hours, amort_per_hour = p.usd / (p.amortization_years * kHoursPerYear);
    wear += std::max(0.0, wear_per_hour - amort_per_hour);
    replacement += run_usd;
    flash[hw.devices[w.device].name] = {{"replacement_usd_per_million_tokens", per(run_usd, r.generated_tokens) * 1e6},
                                        {"replacement_usd_per_hour", wear_per_hour}};
  }
  const double electricity = per(bought_J, r.end_s) / 1000 * hw.electricity_usd_per_kWh;  // kW x $/kWh
  const double usd_per_hour = capital + electricity + wear;
  json c;
  c["usd_per_hour"] = usd_per_hour;
  c["capital_usd_per_hour"] = capital;
  c["electricity_usd_per_hour"] = electricity;
  c["flash_wear_usd_per_hour"] = wear;
  c["usd_per_million_tokens"] = per(usd_per_hour * r.end_s / 3600, r.generated_tokens) * 1e6;
  c["flash_replacement_usd_per_million_tokens"] = per(replacement, r.generated_tokens) * 1e6;
  c["flash"] = flash;
  c["unpriced_devices"] = unpriced;
  return c;
}
}  // namespace

json energy_cost_metrics(const Hardware& hw, const Platform& platform, const EnergyRun& r) {
  const auto& stats = platform.stats();
  const double thr = r.end_s > 0 ? std::min(1.0, r.throttled_s / r.end_s) : 0.0;
  const EnergyTotals t = integrate_energy(hw, stats, link_bytes_now(platform), platform.work_s(), r.end_s, thr);
  json e = energy_json(hw, stats, t, r);
  if (!r.work_at_prefill_end.empty() && r.prefill_tokens > 0) {
    const EnergyTotals p = integrate_energy(hw, stats, r.bytes_at_prefill_end, r.work_at_prefill_end, r.prefill_end_s, thr);
    e["prefill_J"] = p.total_J;
    e["J_per_prefill_token"] = p.total_J / r.prefill_tokens;
  }
  return {{"energy", e}, {"cost", cost_json(hw, t, r)}};
}

}  // namespace kvtier
