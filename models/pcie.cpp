#include "models/pcie.h"

#include <cctype>

namespace kvtier {

double pcie_gt_per_s(int gen) {
  switch (gen) {
    case 1: return 2.5e9;
    case 2: return 5e9;
    case 3: return 8e9;
    case 4: return 16e9;
    case 5: return 32e9;
    default: return 0;
  }
}

double pcie_encoding(int gen) { return gen <= 2 ? 8.0 / 10.0 : 128.0 / 130.0; }

double pcie_raw_Bps(int gen, int lanes) { return pcie_gt_per_s(gen) * lanes / 8.0; }

double pcie_link_Bps(int gen, int lanes) { return pcie_raw_Bps(gen, lanes) * pcie_encoding(gen); }

double pcie_effective_Bps(const PcieConfig& c) {
  return pcie_link_Bps(c.gen, c.lanes) * c.max_payload_B / (c.max_payload_B + c.tlp_overhead_B);
}

void validate_pcie(const PcieConfig& c, const std::string& where) {
  if (c.gen < 1 || c.gen > 5)
    throw ConfigError(where + ": PCIe generation " + std::to_string(c.gen) + " is not supported (1..5)");
  if (c.lanes != 1 && c.lanes != 2 && c.lanes != 4 && c.lanes != 8 && c.lanes != 16)
    throw ConfigError(where + ": PCIe width x" + std::to_string(c.lanes) + " is not one of x1 x2 x4 x8 x16");
  if (!(c.max_payload_B > 0)) throw ConfigError(where + ": max payload must be > 0 bytes");
  if (!(c.tlp_overhead_B >= 0)) throw ConfigError(where + ": TLP overhead must be >= 0 bytes");
}

PcieConfig parse_pcie_spec(const std::string& spec, const std::string& where) {
  std::string s;
  for (char ch : spec)
    if (!std::isspace(static_cast<unsigned char>(ch))) s += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (s.rfind("gen", 0) == 0) s = s.substr(3);
  auto x = s.find('x');
  auto bad = [&] {
    return ConfigError(where + ": '" + spec + "' is not a PCIe link; expected e.g. \"gen4x16\"");
  };
  if (x == std::string::npos || x == 0 || x + 1 >= s.size()) throw bad();
  PcieConfig c;
  try {
    size_t used = 0;
    c.gen = std::stoi(s.substr(0, x), &used);
    if (used != x) throw bad();
    c.lanes = std::stoi(s.substr(x + 1), &used);
    if (used != s.size() - x - 1) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  validate_pcie(c, where);
  return c;
}

}  // namespace kvtier
