#include "traces/attention_source.h"

#include <filesystem>

#include "models/param.h"
#include "traces/attention_binary.h"
#include "traces/synthetic.h"
#include "traces/synthetic_patterns.h"

namespace kvtier {

namespace fs = std::filesystem;

namespace {

// The nearest name among the files of `path`'s folder, for a misspelt one.
std::string nearest_sibling(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end && names.size() < 10000; it.increment(ec))
    if (it->is_regular_file(ec)) names.push_back(it->path().filename().string());
  const std::string n = nearest(p.filename().string(), names);
  return n.empty() ? n : (p.has_parent_path() ? (dir / n).string() : n);
}

}  // namespace

std::unique_ptr<AttentionFileSource> open_attention_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    const std::string hint = path.size() > 1000 ? std::string() : nearest_sibling(path);
    throw ConfigError(path + ": no such attention trace file" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
  }
  if (is_binary_trace(path)) return std::make_unique<BinaryTraceReader>(path);
  return std::make_unique<JsonlTraceReader>(path);
}

std::string source_name(const AttentionSource& src) {
  if (auto* f = dynamic_cast<const AttentionFileSource*>(&src)) return f->path();
  const json& o = src.header().origin;
  return o.is_object() && o.contains("generator") && o["generator"].is_string()
             ? o["generator"].get<std::string>() + " trace"
             : "attention trace";
}

const std::vector<float>& require_prompt(const AttentionSource& src, uint32_t seq, uint32_t layer,
                                         const std::string& needed_by) {
  const uint32_t s = src.header().sequences > 1 ? seq % src.header().sequences : 0;
  if (const auto* p = src.prompt(s, layer)) return *p;
  throw ConfigError(source_name(src) + ": no prompt record for layer " + std::to_string(layer) + " sequence " +
                    std::to_string(s) + ", which " + needed_by +
                    " needs (use a trace with the prompt's attention: format v2 with \"has_prompt\": true)");
}

std::unique_ptr<AttentionSource> make_attention_source(json& tr, const std::string& where, uint32_t layers,
                                                       uint32_t context_tokens, uint32_t steps, uint32_t block_tokens,
                                                       uint32_t sequences, uint64_t seed) {
  if (!tr.is_object()) throw ConfigError(where + ": expected an object with \"kind\"");
  if (tr.contains("kind") && !tr["kind"].is_string())
    throw ConfigError(where + ".kind: expected a string (synthetic, patterns, file or none), got " +
                      brief_dump(tr["kind"]));
  const std::string kind = tr.value("kind", "");
  // A file's path under a generator's kind: the file is what was meant.
  if (kind != "file" && tr.contains("path"))
    throw ConfigError(where + ".path: a trace file is read with kind \"file\", but " + where + ".kind is " +
                      tr.value("kind", json("(none)")).dump() + "; set " + where + ".kind to \"file\" (or give " +
                      where + " as the file name alone)");
  if (kind == "synthetic")
    return std::make_unique<SyntheticAttention>(tr, where, layers, context_tokens, steps, block_tokens, seed);
  if (kind == "patterns")
    return std::make_unique<PatternAttention>(tr, where, layers, context_tokens, steps, block_tokens,
                                              std::max<uint32_t>(1, sequences), seed);
  if (kind == "none") return nullptr;
  if (kind != "file")
    throw ConfigError(where + ".kind: expected \"synthetic\", \"patterns\", \"file\" or \"none\", got " +
                      tr.value("kind", json()).dump());
  resolve_params(tr, {str("path", nullptr, "attention trace file: JSON lines v1/v2 or binary (docs/formats.md)")},
                 where, {"kind"});
  std::string path = tr["path"].get<std::string>();
  if (!fs::exists(path) && fs::path(path).is_relative() && fs::exists(fs::path(KVTIER_SOURCE_DIR) / path))
    path = (fs::path(KVTIER_SOURCE_DIR) / path).string();
  if (!fs::exists(path)) throw ConfigError(where + ".path: " + path + ": no such file");
  auto src = open_attention_file(path);
  const auto& h = src->header();
  auto check = [&](const char* what, uint64_t in_trace, uint64_t in_cfg, const char* key, bool at_least) {
    if (at_least ? in_trace < in_cfg : in_trace != in_cfg)
      throw ConfigError(path + ": the trace has " + what + " " + std::to_string(in_trace) + " but " + key + " is " +
                        std::to_string(in_cfg));
  };
  check("layers", h.layers, layers, "model.layers", false);
  check("block_tokens", h.block_tokens, block_tokens, "workload.block_tokens", false);
  check("context_tokens", h.context_tokens, context_tokens, "workload.context_tokens", false);
  check("steps", h.steps, steps, "workload.decode_steps (at most)", true);
  return src;
}

}  // namespace kvtier
