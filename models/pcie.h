// PCIe link rates. Generation and width give the raw signalling rate; line
// encoding (8b/10b for Gen1-2, 128b/130b for Gen3-5) gives the link rate that
// datasheets quote (Gen4 x16 = 31.5 GB/s per direction); packet overhead gives
// what a DMA can actually move. We assume the common 256 B max payload and
// 24 B of overhead per TLP (framing 4, sequence 2, 3-4 DW header 12-16, LCRC 4
// = 22-26 B, plus amortised ACK/flow-control DLLPs), i.e. 91.4% of the link
// rate. Measured host-device copies land at 80-90%; a calibration curve
// overrides all of this.
#pragma once

#include <string>

#include "models/param.h"

namespace kvtier {

struct PcieConfig {
  int gen = 4;                 // 1..5
  int lanes = 16;              // 1, 2, 4, 8, 16
  double max_payload_B = 256;  // bytes of data per TLP
  double tlp_overhead_B = 24;  // bytes on the wire per TLP besides the payload
};

// Per lane, per direction, in transfers (bits) per second: 2.5, 5, 8, 16, 32 GT/s.
double pcie_gt_per_s(int gen);
// Data bits per line bit: 0.8 (8b/10b) or 128/130.
double pcie_encoding(int gen);
// Raw signalling rate per direction, bytes/s (GT/s x lanes / 8).
double pcie_raw_Bps(int gen, int lanes);
// After line encoding: the datasheet figure (Gen3 x4 3.94 GB/s).
double pcie_link_Bps(int gen, int lanes);
// After encoding and TLP overhead: what the simulator uses per direction.
double pcie_effective_Bps(const PcieConfig& c);

// "gen4x16" (also "Gen4 x16", "4x16") -> gen and lanes; ConfigError at `where`
// for anything else or an unsupported generation or width.
PcieConfig parse_pcie_spec(const std::string& spec, const std::string& where);
// Checks gen and lanes; ConfigError at `where`.
void validate_pcie(const PcieConfig& c, const std::string& where);

}  // namespace kvtier
