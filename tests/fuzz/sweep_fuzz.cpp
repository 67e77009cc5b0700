// The sweep file (sim/app/sweep_file.cpp): keys, base (file or inline), set, grid,
// zip, points and seed, expanded and every point resolved and validated as
// `kvtier sweep` does before it runs anything (no point is run here).
// Validating a point costs a config load and the engine constructed, so a
// sweep of the 10^6 points allowed takes tens of minutes to validate: inputs
// that expand to more than kMaxPoints are skipped rather than reported as
// timeouts (the limit is kMaxSweepPoints, sim/app/sweep_file.h).
#include "sim/app/sweep_file.h"
#include "tests/fuzz/fuzz_input.h"

using namespace kvtier;

namespace {

constexpr uint64_t kMaxPoints = 64;

// An upper bound of the points the file expands to, from its own JSON; 0 if it is not an object.
uint64_t points_bound(const uint8_t* data, size_t size) {
  const json doc = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return 0;
  uint64_t n = 1;
  auto times = [&n](uint64_t k) { n = k == 0 ? n : (n > kMaxPoints ? n : n * k); };
  if (auto it = doc.find("points"); it != doc.end() && it->is_array()) times(it->size());
  if (auto it = doc.find("seed"); it != doc.end() && it->is_array()) times(it->size());
  if (auto it = doc.find("grid"); it != doc.end() && it->is_object())
    for (const auto& v : *it) times(v.is_array() ? v.size() : 1);
  if (auto it = doc.find("zip"); it != doc.end() && it->is_object())
    for (const auto& axis : *it)
      if (axis.is_object() && !axis.empty() && axis.begin()->is_array()) times(axis.begin()->size());
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (points_bound(data, size) > kMaxPoints) return 0;
  const std::string path = kvtier_fuzz::write_input(data, size, "sweep.json");
  try {
    Sweep sw = load_sweep(path, {}, kvtier_fuzz::scratch_dir(), /*quiet=*/true);
    for (const SweepPoint& p : sw.points)
      if (p.key != config_key(p.config)) kvtier_fuzz::finding("a point's key is not its configuration's");
  } catch (const ConfigError&) {
  }
  return 0;
}
