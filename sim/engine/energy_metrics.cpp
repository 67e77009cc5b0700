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

// A drive worn out in `years` is bought every `years`, not every
// amortization_years: the difference per hour, where it is positive.
double wear_premium_usd_per_hour(const DevicePrice& p, double run_usd, double hours) {
  return std::max(0.0, run_usd / hours - p.usd / (p.amortization_years * kHoursPerYear));
}

// Capital (or rent) per hour, electricity on what is not rented, and flash
// worn out faster than it is amortised; per device and in total.
json cost_json(const Hardware& hw, const EnergyTotals& t, const EnergyRun& r) {
  bool any_bought = false, any_rented = false;
  for (const DeviceEntry& d : hw.devices) {
    any_bought = any_bought || d.price.usd > 0;
    any_rented = any_rented || d.price.usd_per_hour > 0;
  }
  const bool all_rented = any_rented && !any_bought;  // the rent pays for all the machine's power
  const double usd_per_J = hw.electricity_usd_per_kWh / 3.6e6, hours = r.end_s / 3600;
  std::vector<double> run_usd(hw.devices.size(), 0.0);  // flash consumed by the run's writes
  for (const EnergyRun::Wear& w : r.wear) run_usd[w.device] += hw.devices[w.device].price.usd * w.life_used;
  double capital = 0, electricity = 0, wear = 0, replacement = 0;
  json devices = json::object(), flash = json::object(), unpriced = json::array();
  for (size_t d = 0; d < hw.devices.size(); ++d) {
    const DevicePrice& p = hw.devices[d].price;
    const double cap = p.capital_usd_per_hour();
    const double el = all_rented || p.usd_per_hour > 0 ? 0.0 : per(t.devices[d].total_J() * usd_per_J, hours);
    const double wr = run_usd[d] > 0 && hours > 0 ? wear_premium_usd_per_hour(p, run_usd[d], hours) : 0.0;
    capital += cap, electricity += el, wear += wr, replacement += run_usd[d];
    devices[hw.devices[d].name] = {{"usd_per_hour", cap + el + wr}, {"capital_usd_per_hour", cap},
                                   {"electricity_usd_per_hour", el}, {"flash_wear_usd_per_hour", wr}};
    if (run_usd[d] > 0)
      flash[hw.devices[d].name] = {{"replacement_usd_per_million_tokens", per(run_usd[d], r.generated_tokens) * 1e6},
                                   {"replacement_usd_per_hour", per(run_usd[d], hours)}};
    if (!p.priced() && hw.devices[d].model->role() != DeviceRole::Switch) unpriced.push_back(hw.devices[d].name);
  }
  double link_J = 0;
  for (double j : t.link_J) link_J += j;
  if (!all_rented) electricity += per(link_J * usd_per_J, hours);
  const double usd_per_hour = capital + electricity + wear;
  json c;
  c["usd_per_hour"] = usd_per_hour;
  c["capital_usd_per_hour"] = capital;
  c["electricity_usd_per_hour"] = electricity;
  c["flash_wear_usd_per_hour"] = wear;
  c["usd_per_million_tokens"] = per(usd_per_hour * hours, r.generated_tokens) * 1e6;
  c["flash_replacement_usd_per_million_tokens"] = per(replacement, r.generated_tokens) * 1e6;
  c["devices"] = devices;
  c["flash"] = flash;
  c["unpriced_devices"] = unpriced;
  return c;
}
// Peak power: the highest mean power over one window of the run (the
// platform's activity windows), each window's activity through the same
// integration as the whole run's. Idle power is drawn whatever happens, so
// no device's peak is below it.
void peak_power(json& e, const Hardware& hw, const Platform& platform, double end_s, double throttled_fraction) {
  const ActivityWindows& win = platform.windows();
  const double width = std::min(win.width_s(), end_s);
  std::vector<double> peak;
  double total = 0;
  for (const DeviceEntry& d : hw.devices) {
    peak.push_back(d.power->idle_W());
    total += d.power->idle_W();
  }
  for (size_t w = 0; w < win.windows() && width > 0; ++w) {
    const double len = std::min(win.width_s(), end_s - double(w) * win.width_s());
    if (len <= 0) break;
    const EnergyTotals t = integrate_energy(hw, platform.stats(), win.bytes(w), win.work(w), len, throttled_fraction);
    for (size_t d = 0; d < peak.size(); ++d) peak[d] = std::max(peak[d], t.devices[d].total_J() / len);
    total = std::max(total, t.total_J / len);
  }
  e["peak_W"] = total;
  e["peak_window_s"] = width;
  for (size_t d = 0; d < peak.size(); ++d) e["devices"][hw.devices[d].name]["peak_W"] = peak[d];
}
}  // namespace

json energy_cost_metrics(const Hardware& hw, const Platform& platform, const EnergyRun& r) {
  const auto& stats = platform.stats();
  const double thr = r.end_s > 0 ? std::min(1.0, r.throttled_s / r.end_s) : 0.0;
  const EnergyTotals t = integrate_energy(hw, stats, link_bytes_now(platform), platform.work_s(), r.end_s, thr);
  json e = energy_json(hw, stats, t, r);
  peak_power(e, hw, platform, r.end_s, thr);
  if (!r.work_at_prefill_end.empty() && r.prefill_tokens > 0) {
    const EnergyTotals p = integrate_energy(hw, stats, r.bytes_at_prefill_end, r.work_at_prefill_end, r.prefill_end_s, thr);
    e["prefill_J"] = p.total_J;
    e["J_per_prefill_token"] = p.total_J / r.prefill_tokens;
  }
  return {{"energy", e}, {"cost", cost_json(hw, t, r)}};
}

}  // namespace kvtier
