// First-order thermal model of an accelerator card (the SmartSSD's FPGA): a
// single thermal resistance to ambient and a single time constant, so the
// temperature relaxes exponentially toward ambient + R x power. Power is idle
// power plus a dynamic part proportional to utilisation and clock. Above the
// throttle threshold the clock drops (HillInfer: 350 -> 300 MHz at 70 C) and
// comes back once the card has cooled by the hysteresis, as firmware governors
// do, so a card on the edge settles into a duty cycle rather than flapping at
// every step.
#pragma once

#include "models/param.h"

namespace kvtier {

struct ThermalParams {
  double ambient_C = 25;
  double resistance_C_per_W = 2.8;   // case-to-ambient under the drive's airflow
  double idle_W = 6;
  double load_W = 14;                // at full utilisation and nominal clock
  double time_constant_s = 60;
  double throttle_C = 70;
  double hysteresis_C = 5;
  double nominal_clock_MHz = 350;
  double throttled_clock_MHz = 300;
};

ParamList thermal_params();  // the JSON keys below, for device kinds that embed the model
ThermalParams parse_thermal(const json& resolved);

class ThermalModel {
 public:
  // Starts at the idle steady state unless `initial_C` is given.
  explicit ThermalModel(const ThermalParams& p);
  ThermalModel(const ThermalParams& p, double initial_C);

  double temperature_C() const { return t_; }
  bool throttled() const { return throttled_; }
  double clock_MHz() const { return throttled_ ? p_.throttled_clock_MHz : p_.nominal_clock_MHz; }
  // The clock a card at `temp_C` runs at, ignoring hysteresis (a card that is
  // above the threshold is throttled whatever its history).
  double clock_at_MHz(double temp_C) const;

  double power_W(double utilization) const;
  double steady_state_C(double utilization) const;
  // Runs `dt_s` seconds at constant utilisation in [0, 1], switching the clock
  // when a threshold is crossed within the interval.
  void advance(double dt_s, double utilization);
  // Seconds until the throttle threshold is crossed at this utilisation;
  // infinity if the steady state stays below it or the card is throttled.
  double time_to_throttle_s(double utilization) const;

  const ThermalParams& params() const { return p_; }

 private:
  ThermalParams p_;
  double t_;
  bool throttled_ = false;
};

}  // namespace kvtier
