#include "sim/core/config.h"

#include <algorithm>
#include <cstdint>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "models/llm.h"

namespace kvtier {

namespace fs = std::filesystem;

json load_json_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw ConfigError(path + ": is a folder, expected a JSON file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open");
  const auto size = fs::file_size(path, ec);
  if (!ec && size > kMaxConfigBytes)
    throw ConfigError(path + ": " + std::to_string(size) + " bytes, more than a configuration may hold (" +
                      std::to_string(kMaxConfigBytes) + ")");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": cannot read");
  return parse_json_text(ss.str(), path);
}

namespace {

// The entry of folder `dir` nearest to `name` ("" when none is close),
// folders only when `folders`.
std::string nearest_entry(const fs::path& dir, const std::string& name, bool folders) {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (folders ? it->is_directory(ec) : it->is_regular_file(ec)) names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());  // the same suggestion whatever order the folder lists in
  return nearest(name, names);
}

// A shipped preset (configs/**) whose file name starts with `file`'s
// ("mooncake" -> configs/serving/mooncake.json), as a path from the source
// tree; "" when none does.
std::string nearest_preset(const std::string& file) {
  const std::string stem = fs::path(file).stem().string();
  if (stem.size() < 4) return "";  // across every preset, a short name would match unrelated ones
  std::error_code ec;
  const fs::path root(KVTIER_SOURCE_DIR);
  std::vector<fs::path> presets;
  for (fs::recursive_directory_iterator it(root / "configs", ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && it->path().extension() == ".json") presets.push_back(it->path().lexically_relative(root));
  std::sort(presets.begin(), presets.end());  // the same suggestion whatever order the folders list in
  for (const fs::path& p : presets)
    if (p.stem() == stem) return p.string();
  for (const fs::path& p : presets)
    if (p.stem().string().compare(0, stem.size(), stem) == 0) return p.string();
  return "";
}

// A file near `path` as given (its name misspelt, or the folder it is in),
// looked for where `tries` are: "" when none is close.
std::string nearest_file(const std::string& path, const std::vector<fs::path>& tries) {
  const fs::path given(path);
  const std::string file = given.filename().string();
  if (file.empty()) return "";
  std::error_code ec;
  for (const fs::path& t : tries) {
    const fs::path dir = t.parent_path().empty() ? fs::path(".") : t.parent_path();
    if (fs::is_directory(dir, ec)) {
      const std::string hint = nearest_entry(dir, file, false);
      if (!hint.empty()) return (given.parent_path() / hint).string();
      continue;
    }
    // The folder misspelt ("config/default.json"): the nearest folder beside it, then the file in it.
    const fs::path up = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
    if (!fs::is_directory(up, ec) || !given.has_parent_path()) continue;
    const std::string folder = nearest_entry(up, dir.filename().string(), true);
    if (folder.empty()) continue;
    const std::string hint = fs::is_regular_file(up / folder / file, ec) ? file : nearest_entry(up / folder, file, false);
    if (!hint.empty()) return (given.parent_path().parent_path() / folder / hint).string();
  }
  return nearest_preset(file);
}

}  // namespace

std::string find_data_file(const std::string& path, const std::string& including_file, const std::string& where) {
  std::vector<fs::path> tries{fs::path(path)};
  if (fs::path(path).is_relative()) {
    if (!including_file.empty()) tries.push_back(fs::path(including_file).parent_path() / path);
    tries.push_back(fs::path(KVTIER_SOURCE_DIR) / path);
  }
  // error_code overloads: a name the file system refuses (a component longer
  // than NAME_MAX, say) is a file that is not there, not an exception.
  std::error_code ec;
  for (const auto& t : tries)
    if (fs::is_regular_file(t, ec)) return t.string();
  const std::string shown = path.size() > 120 ? path.substr(0, 120) + "..." : path;
  const std::string hint = path.size() > 1000 ? std::string() : nearest_file(path, tries);
  throw ConfigError(where + ": file '" + shown + "' not found" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                    "; looked in the current directory" +
                    (including_file.empty() ? std::string(" and") : ", next to " + including_file + " and") + " in " +
                    KVTIER_SOURCE_DIR);
}

namespace {

const char* const kSections[] = {"hardware", "model", "workload", "policies", "sim"};

json expand(const std::string& path, int depth);

bool is_section(const std::string& key) {
  for (const char* s : kSections)
    if (key == s) return true;
  return false;
}

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
    // A section that names its own preset replaces the base's section
    // instead of being merged into it (the base's values must not leak in).
    if (where == "preset")
      for (const char* s : kSections)
        if (sec.contains(s) && (sec[s].is_string() || (sec[s].is_object() && sec[s].contains("preset")))) {
          base[s] = expand_section(sec[s], file, s, depth);
          sec.erase(s);
        }
    // Likewise a policy that names its own preset (or a file) replaces the
    // base's policy: merged, the base's "name" would override the preset's.
    if (where == "preset" && sec.contains("policies") && sec["policies"].is_object() && base.contains("policies") &&
        base["policies"].is_object()) {
      std::vector<std::string> replaced;
      for (auto it = sec["policies"].begin(); it != sec["policies"].end(); ++it)
        if (it.value().is_string() || (it.value().is_object() && it.value().contains("preset"))) {
          base["policies"][it.key()] = it.value();
          replaced.push_back(it.key());
        }
      for (const auto& k : replaced) sec["policies"].erase(k);
    }
    base.merge_patch(sec);  // null deletes a key of the base
    return base;
  }
  return sec;
}

// A policy given by name ("prefetch": "layer_ahead") becomes {"name": ...},
// so overrides of its parameters apply to it; a name ending in .json, or an
// object with "preset", is a policy preset file.
json normalise_policy(json v, const std::string& file, const std::string& where, int depth) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0) return expand(find_data_file(s, file, where), depth + 1);
    return json{{"name", s}};
  }
  if (v.is_object() && v.contains("preset")) return expand_section(std::move(v), file, where, depth);
  return v;
}

// workload.trace given as a file name: a trace's parameters in a .json file
// (what `kvtier trace fit -o` and `trace synth` read: {"kind": "patterns", ...}),
// or any other name, a trace file to replay ({"kind": "file", "path": ...}).
json normalise_trace(json v, const std::string& file, const std::string& where) {
  if (!v.is_string()) return v;
  const std::string s = v.get<std::string>();
  if (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0) {
    json params = load_json_file(find_data_file(s, file, where));
    if (!params.is_object() || !params.contains("kind"))
      throw ConfigError(where + ": " + s + " holds no trace parameters (expected an object with \"kind\", as "
                        "`kvtier trace fit -o` writes)");
    return params;
  }
  return json{{"kind", "file"}, {"path", s}};
}

void normalise_workload_trace(json& cfg, const std::string& file) {
  if (cfg.contains("workload") && cfg["workload"].is_object() && cfg["workload"].contains("trace"))
    cfg["workload"]["trace"] = normalise_trace(cfg["workload"]["trace"], file, "workload.trace");
}

void normalise_policies(json& cfg, const std::string& file, int depth) {
  if (!cfg.contains("policies") || !cfg["policies"].is_object()) return;
  for (auto it = cfg["policies"].begin(); it != cfg["policies"].end(); ++it)
    if (!is_annotation_key(it.key())) it.value() = normalise_policy(it.value(), file, "policies." + it.key(), depth);
}

json expand(const std::string& path, int depth) {
  if (depth > 8) throw ConfigError(path + ": presets nested more than 8 deep (a cycle?)");
  json cfg = load_json_file(path);
  if (!cfg.is_object()) throw ConfigError(path + ": expected a JSON object at the top level");
  if (cfg.contains("preset")) cfg = expand_section(cfg, path, "preset", depth);
  for (const char* s : kSections)
    if (cfg.contains(s)) cfg[s] = expand_section(cfg[s], path, s, depth);
  normalise_policies(cfg, path, depth);
  normalise_workload_trace(cfg, path);
  return cfg;
}

}  // namespace

void apply_set(json& cfg, const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set '" + assignment + "': expected PATH=VALUE, e.g. workload.batch=4");
  std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  json value;
  size_t byte = 0;
  bool syntax = false;
  const std::string err = parse_json_limited(text, value, byte, syntax);
  if (!err.empty() && !syntax) throw ConfigError("--set " + path + ": " + err);
  if (!err.empty()) value = text;  // bare words are strings: --set policies.eviction.name=lru
  const std::string where = "--set " + path;
  // A bare word is taken byte for byte: it must be text (JSON strings are
  // UTF-8), or every later message that quotes it would fail.
  try {
    (void)value.dump();
  } catch (const json::type_error&) {
    throw ConfigError(where + ": the value is not valid UTF-8 text");
  }
  json* node = &cfg;
  std::vector<std::string> keys;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) throw ConfigError("--set '" + assignment + "': empty key in path");
    if (!node->is_object()) throw ConfigError("--set '" + assignment + "': '" + path.substr(0, start - 1) + "' is not an object");
    keys.push_back(key);
    const bool section = keys.size() == 1 && is_section(key);
    const bool policy = keys.size() == 2 && keys[0] == "policies";
    if (dot == std::string::npos) {
      if (value.is_null()) {
        node->erase(key);  // --set a.b=null deletes, as null does in a config file
        return;
      }
      if (section) {
        value = expand_section(value, "", where, 0);  // hardware=FILE or {"preset": FILE, ...}
        if (key == "policies" && value.is_object()) {
          json wrapper{{"policies", value}};
          normalise_policies(wrapper, "", 0);
          value = wrapper["policies"];
        }
        if (key == "workload" && value.is_object()) {
          json wrapper{{"workload", value}};
          normalise_workload_trace(wrapper, "");
          value = wrapper["workload"];
        }
      } else if (keys.size() == 2 && keys[0] == "workload" && key == "trace") {
        value = normalise_trace(value, "", where);  // workload.trace=fit.json or =TRACE_FILE
      } else if (policy) {
        value = normalise_policy(value, "", where, 0);  // policies.eviction=h2o or =FILE.json
      } else if (keys.size() == 3 && keys[0] == "workload" && keys[1] == "trace" && key == "kind" &&
                 (!node->contains("kind") || (*node)["kind"] != value)) {
        *node = json::object();  // another trace kind: the old kind's parameters do not apply
      }
      (*node)[key] = value;
      return;
    }
    json& next = (*node)[key];
    if (policy && next.is_string()) next = normalise_policy(next, "", where, 0);
    if (keys.size() == 2 && keys[0] == "workload" && key == "trace" && next.is_string())
      next = normalise_trace(next, "", where);
    if (next.is_null()) next = json::object();
    node = &next;
    start = dot + 1;
  }
}

std::string one_line(const std::string& text) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string plain_numbers(const std::string& text) {
  // std::to_string(double) always prints six decimals ("13.400000"): trim
  // the trailing zeros of any such number so messages read "13.4".
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j > i && j + 7 <= text.size() && text[j] == '.' &&
        std::all_of(text.begin() + j + 1, text.begin() + j + 7, [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
        (j + 7 == text.size() || !std::isdigit(static_cast<unsigned char>(text[j + 7]))) &&
        (i == 0 || (!std::isdigit(static_cast<unsigned char>(text[i - 1])) && text[i - 1] != '.'))) {
      std::string frac = text.substr(j + 1, 6);
      while (!frac.empty() && frac.back() == '0') frac.pop_back();
      out += text.substr(i, j - i);
      if (!frac.empty()) out += "." + frac;
      i = j + 7;
      continue;
    }
    if (j > i) {
      out += text.substr(i, j - i);
      i = j;
    } else {
      out += text[i++];
    }
  }
  return out;
}

uint64_t parse_seed(const std::string& text, const std::string& option) {
  const std::string expected =
      option + " '" + text.substr(0, 40) + "': expected an integer from 0 to 18446744073709551615";
  if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos)
    throw ConfigError(expected);
  uint64_t v = 0;
  for (char c : text) {
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) throw ConfigError(expected);
    v = v * 10 + d;
  }
  return v;
}

ParamList workload_params() {
  return {
      integer("batch", 1, "sequences decoded together", 1, kMaxBatch),
      integer("context_tokens", 4096, "prompt tokens per sequence (KV present when decode starts)", 1,
              kMaxContextTokens),
      integer("decode_steps", 64, "tokens generated per sequence", 1, kMaxDecodeSteps),
      boolean("past_trained_context", false,
              "run context_tokens + decode_steps past model.max_context_tokens (as papers that ran a model past "
              "the context it was trained for did); the timing does not depend on what attention would compute there"),
      integer("warmup_steps", 0,
              "first decode steps left out of TPOT and tokens/s (start-up: prefill write-back still draining, "
              "caches cold); first-step and all-step figures are reported apart", 0, kMaxDecodeSteps),
      integer("block_tokens", 128, "tokens per KV block (the unit of placement and transfer)", 1, kMaxBlockTokens),
      str("transfer_unit", "block",
          "what a block's moves and attention cost: block (whole blocks, as paged KV moves pages) or tokens (the "
          "tokens it holds, as FlexGen moves tensors: a sequence's last, partial block moves only its tokens)",
          {"block", "tokens"}),
      str("prefill", "compute", "compute: simulate prefill (TTFT) and the writes that place its KV; "
                                "load: the prompt's KV is precomputed on the lowest tier and loaded (MatKV); "
                                "none: KV is already in place when decode starts", {"compute", "load", "none"}),
      integer("query_tokens", 64, "prefill load: tokens computed after the KV is loaded (the question)", 0,
              kMaxContextTokens),
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
      integer("seed", 1, "seed of every random choice (trace generator, policies)", 0, 18446744073709551615.0),
      str("out_dir", "", "where result.json goes (default out/<config name>)"),
      str("timeline", "", "write a Chrome trace-event JSON of every activity to this file"),
      boolean("step_csv", false,
              "also write steps.csv (per decode step: start, end, latency) next to result.json; a serving run "
              "writes iterations.csv (per iteration: batch, tokens, queues, KV per tier)"),
  };
}

namespace {

// The KV blocks the engine tracks, counted in 64 bits before anything is
// allocated for them; and a trace section the engine can dispatch on.
void check_workload_size(const json& cfg) {
  const json& w = cfg["workload"];
  if (w["trace"].is_object() && w["trace"].contains("kind") && !w["trace"]["kind"].is_string())
    throw ConfigError("workload.trace.kind: expected a string (synthetic, patterns, file or none), got " +
                      brief_dump(w["trace"]["kind"]));
  json m = cfg["model"];  // a copy: the model is resolved again, in place, by the simulation
  const LlmSpec spec = parse_llm(m, "model");
  const long long layers = spec.layers;
  const long long ctx = get_int(w, "context_tokens"), steps = get_int(w, "decode_steps");
  if (spec.max_context > 0 && ctx + steps > spec.max_context && !w["past_trained_context"].get<bool>())
    throw ConfigError("workload: context_tokens " + std::to_string(ctx) + " + decode_steps " + std::to_string(steps) +
                      " = " + std::to_string(ctx + steps) + " tokens, past the " + std::to_string(spec.max_context) +
                      " tokens " + (spec.name.empty() ? std::string("the model") : spec.name) +
                      " was trained for (model.max_context_tokens); set workload.past_trained_context to true to run it anyway");
  const long long bt = get_int(w, "block_tokens"), batch = get_int(w, "batch");
  if (get_int(w, "warmup_steps") >= steps)
    throw ConfigError("workload.warmup_steps: " + std::to_string(get_int(w, "warmup_steps")) +
                      " leaves no measured step of " + std::to_string(steps) + " (workload.decode_steps)");
  const long long blocks = (ctx + steps + bt - 1) / bt;
  long long total = 0;
  const bool overflow = __builtin_mul_overflow(batch, layers, &total) || __builtin_mul_overflow(total, blocks, &total);
  if (overflow || total > kMaxKvBlocks)
    throw ConfigError("workload: batch " + std::to_string(batch) + " x model.layers " + std::to_string(layers) + " x " +
                      std::to_string(blocks) + " blocks per sequence (context_tokens + decode_steps over block_tokens) = " +
                      (overflow ? std::string("more than 2^63") : std::to_string(total)) + " KV blocks, more than the " + std::to_string(kMaxKvBlocks) +
                      " a run may track (docs/config.md, Limits)");
}

}  // namespace

std::string find_config_file(const std::string& given) {
  // The config named on the command line is found the way presets are.
  try {
    return find_data_file(given, "", given);
  } catch (const ConfigError&) {
    std::error_code ec;
    if (fs::is_directory(given, ec))
      throw ConfigError(given + ": is a directory; expected a config file (a JSON object, e.g. configs/default.json)");
    std::vector<fs::path> tries{fs::path(given)};
    if (fs::path(given).is_relative()) tries.push_back(fs::path(KVTIER_SOURCE_DIR) / given);
    const std::string hint = given.size() > 1000 ? std::string() : nearest_file(given, tries);
    throw ConfigError(given + ": no such config file" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                      (fs::path(given).is_relative()
                           ? std::string(" (looked in the current directory and in ") + KVTIER_SOURCE_DIR + ")"
                           : std::string()));
  }
}

json expand_config_file(const std::string& path) { return expand(path, 0); }

json load_config(const std::string& given, const std::vector<std::string>& sets) {
  const std::string path = find_config_file(given);
  json cfg = expand_config_file(path);
  finish_config(cfg, path, sets);
  return cfg;
}

void finish_config(json& cfg, const std::string& path, const std::vector<std::string>& sets) {
  for (const auto& s : sets) apply_set(cfg, s);
  const std::vector<std::string> sections{"name", "hardware", "model", "workload", "policies", "sim", "serving", "cluster"};
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    if (is_annotation_key(it.key()) || std::find(sections.begin(), sections.end(), it.key()) != sections.end()) continue;
    std::string hint = nearest(it.key(), sections);
    throw ConfigError(path + ": " + it.key() + ": unknown top-level section" +
                      (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
  }
  if (!cfg.contains("name")) cfg["name"] = fs::path(path).stem().string();
  {
    const json& n = cfg["name"];
    // Control characters (a newline, an escape) would make a folder name no shell prints on one line.
    auto control = [](const std::string& s) {
      return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
    };
    if (!n.is_string() || n.get_ref<const std::string&>().empty() || n.get_ref<const std::string&>().size() > 200 ||
        n.get_ref<const std::string&>().find('/') != std::string::npos || n == "." || n == ".." ||
        control(n.get_ref<const std::string&>()))
      throw ConfigError(path + ": name: expected a non-empty string of at most 200 characters usable as a folder "
                        "name (no '/', no control characters), got " + brief_dump(n));
  }
  for (const char* s : {"hardware", "model"})
    if (!cfg.contains(s) || !cfg[s].is_object())
      throw ConfigError(path + ": " + s + ": required section missing (an object or a preset file name)");
  for (const char* s : {"workload", "policies", "sim"}) {
    if (!cfg.contains(s)) cfg[s] = json::object();
    if (!cfg[s].is_object()) throw ConfigError(path + ": " + s + ": expected an object");
  }
  if (cfg.contains("serving")) {
    // Requests bring their own lengths and counts: the serving engine reads
    // only the KV block size of the workload section.
    ParamList w;
    for (ParamSpec& p : workload_params()) {
      if (p.name == "block_tokens") w.push_back(std::move(p));
      else if (cfg["workload"].contains(p.name))
        throw ConfigError(path + ": workload." + p.name +
                          ": not read in a serving config (the requests give lengths and counts: serving.requests); "
                          "serving takes workload.block_tokens only");
    }
    resolve_params(cfg["workload"], w, "workload");
  } else {
    resolve_params(cfg["workload"], workload_params(), "workload");
  }
  resolve_params(cfg["sim"], sim_params(), "sim");
  if (!cfg.contains("serving")) check_workload_size(cfg);
}

}  // namespace kvtier
