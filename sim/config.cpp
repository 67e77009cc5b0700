#include "sim/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvtier {

namespace fs = std::filesystem;

json load_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // nlohmann reports a byte offset; users want line and column.
    size_t line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    auto pos = what.find("syntax error");
    throw ConfigError(path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": invalid JSON: " +
                      (pos == std::string::npos ? what : what.substr(pos)));
  }
}

std::string find_data_file(const std::string& path, const std::string& including_file, const std::string& where) {
  std::vector<fs::path> tries{fs::path(path)};
  if (fs::path(path).is_relative()) {
    if (!including_file.empty()) tries.push_back(fs::path(including_file).parent_path() / path);
    tries.push_back(fs::path(KVTIER_SOURCE_DIR) / path);
  }
  for (const auto& t : tries)
    if (fs::is_regular_file(t)) return t.string();
  throw ConfigError(where + ": file '" + path + "' not found (looked in the current directory, next to " +
                    (including_file.empty() ? std::string("the config") : including_file) + " and in " +
                    KVTIER_SOURCE_DIR + ")");
}

namespace {

json expand(const std::string& path, int depth);

// A section is a file name, or an object that may name a "preset" to start from.
json expand_section(json sec, const std::string& file, const std::string& where, int depth) {
  if (sec.is_string()) {
    std::string p = find_data_file(sec.get<std::string>(), file, where);
    return expand(p, depth + 1);
  }
  if (sec.is_object() && sec.contains("preset")) {
    if (!sec["preset"].is_string()) throw ConfigError(where + ".preset: expected a file name");
    std::string p = find_data_file(sec["preset"].get<std::string>(), file, where + ".preset");
    json base = expand(p, depth + 1);
    sec.erase("preset");
    base.merge_patch(sec);
    return base;
  }
  return sec;
}

json expand(const std::string& path, int depth) {
  if (depth > 8) throw ConfigError(path + ": presets nested more than 8 deep (a cycle?)");
  json cfg = load_json_file(path);
  if (!cfg.is_object()) throw ConfigError(path + ": expected a JSON object at the top level");
  if (cfg.contains("preset")) cfg = expand_section(cfg, path, "preset", depth);
  for (const char* s : {"hardware", "model", "workload", "policies", "sim"})
    if (cfg.contains(s)) cfg[s] = expand_section(cfg[s], path, s, depth);
  return cfg;
}

}  // namespace

void apply_set(json& cfg, const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set '" + assignment + "': expected PATH=VALUE, e.g. workload.batch=4");
  std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  json value;
  try {
    value = json::parse(text);
  } catch (const json::parse_error&) {
    value = text;  // bare words are strings: --set policies.eviction.name=lru
  }
  json* node = &cfg;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) throw ConfigError("--set '" + assignment + "': empty key in path");
    if (!node->is_object()) throw ConfigError("--set '" + assignment + "': '" + path.substr(0, start - 1) + "' is not an object");
    if (dot == std::string::npos) {
      (*node)[key] = value;
      return;
    }
    node = &(*node)[key];
    if (node->is_null()) *node = json::object();
    start = dot + 1;
  }
}

ParamList workload_params() {
  return {
      integer("batch", 1, "sequences decoded together", 1, 4096),
      integer("context_tokens", 4096, "prompt tokens per sequence (KV present when decode starts)", 1),
      integer("decode_steps", 64, "tokens generated per sequence", 1),
      integer("warmup_steps", 0,
              "first decode steps left out of TPOT and tokens/s (start-up: prefill write-back still draining, "
              "caches cold); first-step and all-step figures are reported apart", 0),
      integer("block_tokens", 128, "tokens per KV block (the unit of placement and transfer)", 1),
      str("prefill", "compute", "compute: simulate prefill (TTFT) and the writes that place its KV; "
                                "load: the prompt's KV is precomputed on the lowest tier and loaded (MatKV); "
                                "none: KV is already in place when decode starts", {"compute", "load", "none"}),
      integer("query_tokens", 64, "prefill load: tokens computed after the KV is loaded (the question)", 0),
      boolean("overlap_next_load", false,
              "prefill load (MatKV): while this batch decodes, load the next batch's precomputed KV (same shape) "
              "from the lowest tier, competing for the same links; reports metrics.next_request"),
      any("trace", json{{"kind", "synthetic"}},
          "attention trace: {\"kind\": \"synthetic\", generator params} | {\"kind\": \"file\", \"path\": ...} | "
          "{\"kind\": \"none\"} (exact evaluation only)", ParamType::Object),
  };
}

ParamList sim_params() {
  return {
      integer("seed", 1, "seed of every random choice (trace generator, policies)", 0),
      str("out_dir", "", "where result.json goes (default out/<config name>)"),
      str("timeline", "", "write a Chrome trace-event JSON of every activity to this file"),
      boolean("step_csv", false, "also write steps.csv (per-step start, end, latency) next to result.json"),
  };
}

json load_config(const std::string& path, const std::vector<std::string>& sets) {
  json cfg = expand(path, 0);
  for (const auto& s : sets) apply_set(cfg, s);
  const std::vector<std::string> sections{"name", "hardware", "model", "workload", "policies", "sim"};
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    if (is_annotation_key(it.key()) || std::find(sections.begin(), sections.end(), it.key()) != sections.end()) continue;
    std::string hint = nearest(it.key(), sections);
    throw ConfigError(path + ": " + it.key() + ": unknown top-level section" +
                      (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
  }
  if (!cfg.contains("name")) cfg["name"] = fs::path(path).stem().string();
  for (const char* s : {"hardware", "model"})
    if (!cfg.contains(s) || !cfg[s].is_object())
      throw ConfigError(path + ": " + s + ": required section missing (an object or a preset file name)");
  for (const char* s : {"workload", "policies", "sim"}) {
    if (!cfg.contains(s)) cfg[s] = json::object();
    if (!cfg[s].is_object()) throw ConfigError(path + ": " + s + ": expected an object");
  }
  resolve_params(cfg["workload"], workload_params(), "workload");
  resolve_params(cfg["sim"], sim_params(), "sim");
  return cfg;
}

}  // namespace kvtier
