// The sweep file (sim/sweep.cpp): keys, base (file or inline), set, grid,
// zip, points and seed, expanded and every point resolved and validated as
// `kvtier sweep` does before it runs anything (no point is run here).
#include "sim/sweep.h"
#include "tests/fuzz/fuzz_input.h"

using namespace kvtier;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kvtier_fuzz::write_input(data, size, "sweep.json");
  try {
    Sweep sw = load_sweep(path, {}, kvtier_fuzz::scratch_dir(), /*quiet=*/true);
    for (const SweepPoint& p : sw.points)
      if (p.key != config_key(p.config)) kvtier_fuzz::finding("a point's key is not its configuration's");
  } catch (const ConfigError&) {
  }
  return 0;
}
