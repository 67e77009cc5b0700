// The KU15P scoring accelerator as a device kind ("ku15p"): a compute device
// whose throughput is that of its scoring kernel, checked to fit the part,
// with the thermal model (models/thermal.h) governing its clock, and the DDR4
// the part carries.
#include "models/fpga_ku15p.h"

#include <algorithm>
#include <cstdio>

#include "models/device.h"
#include "models/thermal.h"

namespace kvtier {

const FpgaPart& ku15p() {
  static const FpgaPart p{"KU15P", 522720, 1968, 984};
  return p;
}

ScoringKernelKind parse_kernel_kind(const std::string& s, const std::string& where) {
  if (s == "qk_dot") return ScoringKernelKind::QkDot;
  if (s == "full_attention") return ScoringKernelKind::FullAttention;
  throw ConfigError(where + ": '" + s + "' is not one of: qk_dot full_attention");
}

const char* to_string(ScoringKernelKind k) { return k == ScoringKernelKind::QkDot ? "qk_dot" : "full_attention"; }

double FpgaUtilization::max() const { return std::max({lut, dsp, bram}); }

namespace {
struct Reference {
  double lut, dsp, bram, fmax_MHz;
};
// HillInfer (arXiv 2602.18750), resource table for the KU15P; BRAM assumed.
Reference reference(ScoringKernelKind k) {
  return k == ScoringKernelKind::QkDot ? Reference{0.42, 0.35, 0.20, 350} : Reference{0.89, 0.78, 0.45, 200};
}
// The platform shell (PCIe/DMA, DDR controller) of the SmartSSD's Vitis
// platform: present whatever the kernel. Assumed.
constexpr double kShellLut = 0.10, kShellDsp = 0.0, kShellBram = 0.08;
constexpr double kRefLanes = 128, kRefBits = 8;
}  // namespace

FpgaUtilization estimate_utilization(const ScoringKernel& k) {
  Reference r = reference(k.kind);
  double scale = (k.lanes / kRefLanes) * (k.bits / kRefBits);
  return {kShellLut + (r.lut - kShellLut) * scale, kShellDsp + (r.dsp - kShellDsp) * scale,
          kShellBram + (r.bram - kShellBram) * scale};
}

double kernel_fmax_MHz(ScoringKernelKind k) { return reference(k).fmax_MHz; }

void check_kernel_fits(const ScoringKernel& k, double max_u, const std::string& where) {
  auto w = [&](const char* key) { return where.empty() ? std::string(key) : where + "." + key; };
  char buf[400];
  if (k.clock_MHz > kernel_fmax_MHz(k.kind)) {
    std::snprintf(buf, sizeof buf, ": %s kernel at %.0f MHz is above the %.0f MHz its reference design closed timing at",
                  to_string(k.kind), k.clock_MHz, kernel_fmax_MHz(k.kind));
    throw ConfigError(w("clock_MHz") + buf);
  }
  FpgaUtilization u = estimate_utilization(k);
  struct {
    const char* name;
    double used, total;
  } res[] = {{"LUTs", u.lut, ku15p().lut}, {"DSPs", u.dsp, ku15p().dsp}, {"BRAMs", u.bram, ku15p().bram36}};
  for (const auto& r : res)
    if (r.used > max_u) {
      std::snprintf(buf, sizeof buf,
                    ": %s kernel with %d lanes at INT%d needs %.0f%% of the %s's %.0f %s; at most %.0f%% fit "
                    "(fewer lanes or lower precision)",
                    to_string(k.kind), k.lanes, k.bits, 100 * r.used, ku15p().name, r.total, r.name, 100 * max_u);
      throw ConfigError(w("lanes") + buf);
    }
}

double fpga_scoring_Bps(const ScoringKernel& k, double clock_MHz) { return k.lanes * (k.bits / 8.0) * clock_MHz * 1e6; }

class Ku15p : public DeviceModel {
 public:
  static ParamList params() {
    ParamList p = {
        str("kernel", "qk_dot", "scoring kernel: qk_dot (HillInfer's simplified Q.K^T) or full_attention",
            {"qk_dot", "full_attention"}),
        integer("lanes", 128, "multiply-accumulates per cycle", 1, 65536),
        integer("score_bits", 8, "key precision the kernel is built for (4, 8 or 16)", 4, 16),
        num("max_utilization", 1.0, "share of each resource that placement and routing may use", 0.01, 1.0),
        num("dram_GB", 4.0, "DDR4 attached to the FPGA, decimal GB (SmartSSD product brief: 4 GB); 0 = none", 0.0),
        positive("dram_GBps", 19.2,
                 "peak read bandwidth of that DDR4, GB/s (one 64-bit DDR4-2400 channel: 2400 MT/s x 8 B)"),
    };
    for (auto& t : thermal_params()) p.push_back(t);
    return p;
  }
  explicit Ku15p(const json& p) : thermal_(parse_thermal(p)) {
    mem_.bytes = get_num(p, "dram_GB") * kGB;
    mem_.Bps = get_num(p, "dram_GBps") * kGB;
    k_.kind = parse_kernel_kind(p.at("kernel").get<std::string>(), "kernel");
    k_.lanes = static_cast<int>(get_int(p, "lanes"));
    k_.bits = static_cast<int>(get_int(p, "score_bits"));
    if (k_.bits != 4 && k_.bits != 8 && k_.bits != 16) throw ConfigError("score_bits: expected 4, 8 or 16");
    k_.clock_MHz = thermal_.nominal_clock_MHz;
    check_kernel_fits(k_, get_num(p, "max_utilization"), "");
  }
  DeviceRole role() const override { return DeviceRole::Compute; }
  // Two operations per MAC, so that an Exec of 2 x elements FLOPs takes as
  // long as scoring them.
  double flops() const override { return 2.0 * k_.lanes * k_.clock_MHz * 1e6; }
  // At the nominal clock; ThermalModel::clock_MHz() with fpga_scoring_Bps()
  // gives the throttled rate.
  double scoring_Bps(int bits) const override {
    ScoringKernel k = k_;
    k.bits = bits;
    return fpga_scoring_Bps(k, k_.clock_MHz);
  }
  const ScoringKernel& kernel() const { return k_; }
  const ThermalParams& thermal() const { return thermal_; }
  const FpgaMemory& memory() const { return mem_; }

 private:
  ScoringKernel k_;
  ThermalParams thermal_;
  FpgaMemory mem_;
};
KVTIER_REGISTER(DeviceModel, Ku15p, "ku15p",
                "Xilinx KU15P (SmartSSD FPGA) scoring engine: lanes x precision x clock, resource check, thermal clock");

const ScoringKernel* fpga_kernel(const DeviceModel& d) {
  auto* f = dynamic_cast<const Ku15p*>(&d);
  return f ? &f->kernel() : nullptr;
}
const ThermalParams* fpga_thermal(const DeviceModel& d) {
  auto* f = dynamic_cast<const Ku15p*>(&d);
  return f ? &f->thermal() : nullptr;
}
const FpgaMemory* fpga_memory(const DeviceModel& d) {
  auto* f = dynamic_cast<const Ku15p*>(&d);
  return f ? &f->memory() : nullptr;
}

}  // namespace kvtier
