#include "models/thermal.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvtier {

ParamList thermal_params() {
  return {
      num("ambient_C", 25.0, "ambient (inlet air) temperature, C"),
      positive("thermal_resistance_C_per_W", 2.8, "card-to-ambient thermal resistance, C/W"),
      num("idle_W", 6.0, "power at idle, W", 0),
      num("load_W", 14.0, "power at full utilisation and nominal clock, W", 0),
      positive("thermal_time_constant_s", 60.0, "time constant of heating and cooling, s"),
      num("throttle_C", 70.0, "temperature above which the clock drops, C"),
      num("hysteresis_C", 5.0, "the clock returns once the card is this much below throttle_C, C", 0),
      positive("clock_MHz", 350.0, "nominal kernel clock, MHz"),
      positive("throttle_clock_MHz", 300.0, "kernel clock while throttled, MHz"),
  };
}

ThermalParams parse_thermal(const json& p) {
  ThermalParams t;
  t.ambient_C = get_num(p, "ambient_C");
  t.resistance_C_per_W = get_num(p, "thermal_resistance_C_per_W");
  t.idle_W = get_num(p, "idle_W");
  t.load_W = get_num(p, "load_W");
  t.time_constant_s = get_num(p, "thermal_time_constant_s");
  t.throttle_C = get_num(p, "throttle_C");
  t.hysteresis_C = get_num(p, "hysteresis_C");
  t.nominal_clock_MHz = get_num(p, "clock_MHz");
  t.throttled_clock_MHz = get_num(p, "throttle_clock_MHz");
  if (t.load_W < t.idle_W) throw ConfigError("load_W: power under load is below idle power");
  if (t.throttled_clock_MHz > t.nominal_clock_MHz)
    throw ConfigError("throttle_clock_MHz: the throttled clock is above the nominal clock");
  return t;
}

ThermalModel::ThermalModel(const ThermalParams& p) : p_(p), t_(0) { t_ = steady_state_C(0); throttled_ = t_ > p_.throttle_C; }
ThermalModel::ThermalModel(const ThermalParams& p, double initial_C) : p_(p), t_(initial_C), throttled_(initial_C > p.throttle_C) {}

double ThermalModel::clock_at_MHz(double temp_C) const {
  return temp_C > p_.throttle_C ? p_.throttled_clock_MHz : p_.nominal_clock_MHz;
}

double ThermalModel::power_W(double u) const {
  u = std::clamp(u, 0.0, 1.0);
  // Dynamic power scales with the clock (same voltage rail: P ~ C V^2 f).
  return p_.idle_W + (p_.load_W - p_.idle_W) * u * clock_MHz() / p_.nominal_clock_MHz;
}

double ThermalModel::steady_state_C(double u) const { return p_.ambient_C + p_.resistance_C_per_W * power_W(u); }

double ThermalModel::time_to_throttle_s(double u) const {
  if (throttled_) return std::numeric_limits<double>::infinity();
  double ss = steady_state_C(u);
  if (ss <= p_.throttle_C) return std::numeric_limits<double>::infinity();
  if (t_ > p_.throttle_C) return 0;
  return p_.time_constant_s * std::log((ss - t_) / (ss - p_.throttle_C));
}

void ThermalModel::advance(double dt, double u) {
  // Piecewise exact: run to the next threshold crossing, switch the clock, repeat.
  for (int guard = 0; dt > 0 && guard < 1000; ++guard) {
    double ss = steady_state_C(u);
    double target = throttled_ ? p_.throttle_C - p_.hysteresis_C : p_.throttle_C;
    bool crosses = throttled_ ? (ss < target && t_ > target) : (ss > target && t_ <= target);
    double t_cross = crosses ? p_.time_constant_s * std::log((ss - t_) / (ss - target)) : dt + 1;
    if (t_cross >= dt) {
      t_ = ss + (t_ - ss) * std::exp(-dt / p_.time_constant_s);
      break;
    }
    t_ = target;
    dt -= t_cross;
    throttled_ = !throttled_;
  }
}

}  // namespace kvtier
