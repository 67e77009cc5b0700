// The configuration loader (sim/core/config.cpp): preset expansion of a config
// file, `--set PATH=VALUE` overrides (apply_set), the top-level checks, and
// the validation of every component that constructing a Simulation does
// (it does not start SimGrid). Input: the config file's text, then up to
// eight `--set` assignments, each after a NUL byte. Presets named in the
// input are found as for any config: next to it, then in the source tree.
#include <cstring>

#include "sim/core/config.h"
#include "sim/engine/engine.h"
#include "tests/fuzz/fuzz_input.h"

using namespace kvtier;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const char* end = text + size;
  const char* nul = static_cast<const char*>(std::memchr(text, 0, size));
  const char* cfg_end = nul ? nul : end;
  std::vector<std::string> sets;
  for (const char* p = nul; p && p < end && sets.size() < 8;) {
    const char* q = static_cast<const char*>(std::memchr(p + 1, 0, size_t(end - p - 1)));
    sets.emplace_back(p + 1, q ? q : end);
    p = q;
  }
  const std::string path = kvtier_fuzz::write_input(data, size_t(cfg_end - text), "fuzz.json");
  try {
    json cfg = load_config(path, sets);
    Simulation sim(cfg);
    (void)cfg.dump();
  } catch (const ConfigError&) {
  }
  return 0;
}
