// The sweep file (sim/app/sweep_file.cpp): keys, base (file or inline), set, grid,
// zip, points and seed, expanded and every point resolved and validated as
// `kvtier sweep` does before it runs anything (no point is run here); each
// point's key, computed as a sweep computes it (points that differ only in
// their seed share one construction), must be the hash of the point's
// configuration built in full. Inputs that expand to more than kMaxPoints
// are skipped, to keep each input quick (the limit is kMaxSweepPoints,
// sim/app/sweep_file.h).
#include "sim/app/sweep_points.h"
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
    const SweepSpace space(path, {}, kvtier_fuzz::scratch_dir());
    const SweepPlan plan = plan_sweep(space, 0, 1, /*quiet=*/true);
    const PointResolver full(space);
    for (const SweepPlan::Point& p : plan.mine)
      if (key_text(p.key) != config_key(full.resolved(p.index)))
        kvtier_fuzz::finding("a point's key is not its configuration's");
  } catch (const ConfigError&) {
  }
  return 0;
}
