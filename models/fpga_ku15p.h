// The Xilinx Kintex UltraScale+ KU15P in the Samsung SmartSSD as a scoring
// engine: how fast a scoring kernel runs (clock x parallel MAC lanes x key
// precision) and whether it fits on the part.
//
// The resource estimate is anchored on the two designs HillInfer reports for
// this part: the simplified Q.K^T kernel (no softmax; query in BRAM, keys
// streamed, fully unrolled adder tree) at 42% LUT / 35% DSP, 350 MHz, and full
// attention at 89% LUT / 78% DSP, 200 MHz. We read both as 128 INT8 lanes (one
// head_dim-wide dot product per cycle for head_dim 128, as the unrolled adder
// tree suggests) on top of a platform shell that does not scale with the
// kernel, and scale the kernel's share linearly with lanes x bits / 8 (the
// datapath width). BRAM is not reported; its reference shares are our
// assumption. Timing: a kernel kind cannot be clocked above the clock its
// reference design closed at.
#pragma once

#include <string>

#include "models/param.h"

namespace kvtier {

struct FpgaPart {
  const char* name;
  double lut, dsp, bram36;  // available resources
};
// KU15P: 522,720 CLB LUTs, 1,968 DSP48E2, 984 36-Kb block RAMs (Xilinx DS890).
const FpgaPart& ku15p();

enum class ScoringKernelKind { QkDot, FullAttention };
ScoringKernelKind parse_kernel_kind(const std::string& s, const std::string& where);
const char* to_string(ScoringKernelKind k);

struct ScoringKernel {
  ScoringKernelKind kind = ScoringKernelKind::QkDot;
  int lanes = 128;  // multiply-accumulates per cycle
  int bits = 8;     // key precision: 4, 8 or 16
  double clock_MHz = 350;
};

struct FpgaUtilization {
  double lut = 0, dsp = 0, bram = 0;  // fractions of the part
  double max() const;
};

FpgaUtilization estimate_utilization(const ScoringKernel& k);
// The clock the kind's reference design closed timing at: 350 or 200 MHz.
double kernel_fmax_MHz(ScoringKernelKind k);
// Throws ConfigError at `where` (a device's JSON path) naming the resource
// that does not fit, or the clock above fmax. `max_utilization` in (0, 1]:
// the share of each resource placement and routing can use.
void check_kernel_fits(const ScoringKernel& k, double max_utilization, const std::string& where);
// Bytes of keys scored per second at `clock_MHz`: lanes x bits/8 x clock.
double fpga_scoring_Bps(const ScoringKernel& k, double clock_MHz);

// The DDR4 attached to the FPGA (on the SmartSSD: 4 GB on one 64-bit
// channel): a place data can live next to the kernel, read by it without
// crossing PCIe or the NAND. Nothing but the FPGA's own kernels reaches it in
// the model, so it is a capacity and a bandwidth, not a SimGrid link.
struct FpgaMemory {
  double bytes = 0;  // capacity; 0 = the FPGA has none
  double Bps = 0;    // the kernel's read bandwidth from it
  // Seconds the kernel needs to read `bytes` of it.
  double read_s(double b) const { return Bps > 0 ? b / Bps : 0.0; }
};

// For a device of kind "ku15p": its kernel, thermal parameters (to build a
// ThermalModel per run) and attached memory; nullptr for any other kind.
class DeviceModel;
struct ThermalParams;
const ScoringKernel* fpga_kernel(const DeviceModel& d);
const ThermalParams* fpga_thermal(const DeviceModel& d);
const FpgaMemory* fpga_memory(const DeviceModel& d);

}  // namespace kvtier
