#include "traces/attention_trace.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <tuple>

#include "traces/line_reader.h"

namespace kvtier {

namespace {
// A writer stops at its first failed write (a full disk): the caller exits 2
// and the unfinished file is removed, instead of writing on until close.
void check_written(const std::ofstream& out, const std::string& path) {
  if (!out) throw ConfigError(path + ": write failed (" + std::strerror(errno) + "); nothing was written");
}
}  // namespace

static constexpr const char* kFormat = "kvtier-attention-trace";

json header_to_json(const AttentionHeader& h) {
  return json{{"format", kFormat},           {"version", h.version}, {"layers", h.layers},
              {"steps", h.steps},            {"block_tokens", h.block_tokens},
              {"context_tokens", h.context_tokens}, {"model", h.model}, {"origin", h.origin}};
}

namespace {

// "" or what is wrong with a header's counts (the four every version has).
std::string check_header_counts(const json& h) {
  const std::pair<const char*, uint64_t> counts[] = {{"layers", kMaxTraceLayers},
                                                     {"steps", kMaxTraceSteps},
                                                     {"block_tokens", kMaxTraceBlockTokens},
                                                     {"context_tokens", kMaxTraceContextTokens}};
  for (const auto& [k, max] : counts) {
    if (!h.contains(k) || !h[k].is_number_unsigned() || h[k].get<uint64_t>() == 0 || h[k].get<uint64_t>() > max)
      return std::string("header: \"") + k + "\" must be an integer from 1 to " + std::to_string(max) + ", got " +
             (h.contains(k) ? brief_dump(h[k]) : std::string("nothing"));
  }
  return "";
}

// A mass as the float it is stored as: a finite number >= 0 whose float is finite.
bool mass_ok(const json& m) {
  if (!m.is_number()) return false;
  const double d = m.get<double>();
  return std::isfinite(d) && d >= 0 && std::isfinite(static_cast<float>(d));
}

}  // namespace

void check_trace_shape(const std::string& where, uint64_t layers, uint64_t context_tokens, uint64_t steps,
                       uint64_t block_tokens, uint64_t sequences) {
  const std::tuple<const char*, uint64_t, uint64_t> counts[] = {{"layers", layers, kMaxTraceLayers},
                                                                {"context tokens", context_tokens, kMaxTraceContextTokens},
                                                                {"steps", steps, kMaxTraceSteps},
                                                                {"block tokens", block_tokens, kMaxTraceBlockTokens},
                                                                {"sequences", sequences, 65536}};
  for (const auto& [what, v, max] : counts)
    if (v < 1 || v > max)
      throw ConfigError(where + ": a trace of " + std::to_string(v) + " " + what + ", expected 1 to " +
                        std::to_string(max));
  if (layers * sequences > kMaxTraceLayerSequences)
    throw ConfigError(where + ": a trace of " + std::to_string(layers) + " layers x " + std::to_string(sequences) +
                      " sequences, more than " + std::to_string(kMaxTraceLayerSequences));
}

void JsonlAttentionReader::fail(const std::string& what) const {
  throw ConfigError(path_ + ":" + std::to_string(line_no_) + ": " + what);
}

JsonlAttentionReader::JsonlAttentionReader(const std::string& path) : path_(path), in_(path) {
  if (!in_) throw ConfigError(path + ": cannot open attention trace");
  line_no_ = 1;
  const LineRead got = read_line_limited(in_, line_);
  if (got == LineRead::End) throw ConfigError(path + ":1: empty file, expected a kvtier-attention-trace header");
  if (got == LineRead::TooLong) fail("line longer than " + std::to_string(kMaxTraceLineBytes) + " bytes");
  json h;
  {
    size_t byte = 0;
    bool syntax = false;
    const std::string herr = parse_json_limited(line_, h, byte, syntax);
    if (!herr.empty()) fail("header is not valid JSON: " + herr);
  }
  if (!h.is_object() || !h.contains("format") || h["format"] != kFormat)
    fail("expected a header object with \"format\": \"kvtier-attention-trace\"");
  if (!h.contains("version") || h["version"] != 1)
    fail("unsupported version " + (h.contains("version") ? brief_dump(h["version"]) : std::string("(none)")) +
         ", this reader knows 1");
  if (std::string err = check_header_counts(h); !err.empty()) fail(err);
  header_.layers = h["layers"].get<uint32_t>();
  header_.steps = h["steps"].get<uint32_t>();
  header_.block_tokens = h["block_tokens"].get<uint32_t>();
  header_.context_tokens = h["context_tokens"].get<uint32_t>();
  header_.model = h.value("model", json::object());
  header_.origin = h.value("origin", json::object());
  seen_.assign(header_.blocks_at(header_.steps), 0);
}

bool JsonlAttentionReader::next(AttentionRecord& rec) {
  if (expect_step_ >= header_.steps) return false;
  do {
    const LineRead got = read_line_limited(in_, line_);
    if (got == LineRead::End)
      fail("trace ends early: expected the record for step " + std::to_string(expect_step_) + " layer " +
           std::to_string(expect_layer_) + " (header says " + std::to_string(header_.steps) + " steps)");
    ++line_no_;
    if (got == LineRead::TooLong) fail("line longer than " + std::to_string(kMaxTraceLineBytes) + " bytes");
  } while (line_.find_first_not_of(" \t\r") == std::string::npos);
  json r;
  try {
    r = json::parse(line_);
  } catch (const json::exception& e) {
    fail(std::string("not valid JSON: ") + e.what());
  }
  if (!r.is_object()) fail("expected a record object");
  auto field_u32 = [&](const char* k) -> uint32_t {
    auto it = r.find(k);
    if (it == r.end() || !it->is_number_unsigned() || it->get<uint64_t>() > 0xFFFFFFFEu)
      fail(std::string("\"") + k + "\" must be a non-negative integer below 2^32 - 1");
    return it->get<uint32_t>();
  };
  rec.step = field_u32("step");
  rec.layer = field_u32("layer");
  if (rec.step != expect_step_ || rec.layer != expect_layer_)
    fail("expected step " + std::to_string(expect_step_) + " layer " + std::to_string(expect_layer_) + ", got step " +
         std::to_string(rec.step) + " layer " + std::to_string(rec.layer) + " (records are step-major, layer-minor)");
  auto bl = r.find("blocks");
  auto ms = r.find("mass");
  if (bl == r.end() || !bl->is_array()) fail("\"blocks\" must be an array of block indices");
  if (ms == r.end() || !ms->is_array() || ms->size() != bl->size())
    fail("\"mass\" must be an array of numbers as long as \"blocks\"");
  const uint32_t n = header_.blocks_at(rec.step);
  rec.blocks.clear();
  rec.mass.clear();
  ++stamp_;
  for (size_t i = 0; i < bl->size(); ++i) {
    const json& b = (*bl)[i];
    const json& m = (*ms)[i];
    if (!b.is_number_unsigned()) fail("blocks[" + std::to_string(i) + "]: expected a non-negative integer");
    if (!mass_ok(m)) fail("mass[" + std::to_string(i) + "]: expected a number >= 0 that fits a float (<= 3.4e38)");
    const uint64_t id = b.get<uint64_t>();
    if (id >= n)
      fail("blocks[" + std::to_string(i) + "] = " + std::to_string(id) + " does not exist at step " +
           std::to_string(rec.step) + " (" + std::to_string(n) + " blocks)");
    if (seen_[id] == stamp_) fail("block " + std::to_string(id) + " listed twice");
    seen_[id] = stamp_;
    rec.blocks.push_back(static_cast<uint32_t>(id));
    rec.mass.push_back(m.get<float>());
  }
  if (++expect_layer_ == header_.layers) {
    expect_layer_ = 0;
    ++expect_step_;
  }
  return true;
}

JsonlAttentionWriter::JsonlAttentionWriter(const std::string& path, const AttentionHeader& h)
    : path_(path), tmp_(path + ".tmp"), out_(tmp_) {
  if (!out_) throw ConfigError(path + ": cannot write");
  out_ << header_to_json(h).dump() << '\n';
}

JsonlAttentionWriter::~JsonlAttentionWriter() {
  if (!closed_) {
    out_.close();
    std::remove(tmp_.c_str());  // an unfinished trace never replaces a finished one
  }
}

void JsonlAttentionWriter::write(const AttentionRecord& rec) {
  out_ << "{\"step\":" << rec.step << ",\"layer\":" << rec.layer << ",\"blocks\":[";
  for (size_t i = 0; i < rec.blocks.size(); ++i) out_ << (i ? "," : "") << rec.blocks[i];
  out_ << "],\"mass\":[";
  // Masses through nlohmann so the text round-trips to the same float.
  for (size_t i = 0; i < rec.mass.size(); ++i) out_ << (i ? "," : "") << json(rec.mass[i]).dump();
  out_ << "]}\n";
  check_written(out_, path_);
}

void JsonlAttentionWriter::close() {
  out_.close();
  if (!out_ || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    // A staged output (NAME.tmp, renamed into place at the end): the user's name.
    std::string shown = path_;
    if (shown.size() > 4 && shown.compare(shown.size() - 4, 4, ".tmp") == 0) shown.resize(shown.size() - 4);
    throw ConfigError(shown + ": write failed");
  }
  closed_ = true;
}

// ---- Format v2 ----

json trace_header_json(const AttentionHeader& h, uint32_t head_groups) {
  json j = header_to_json(h);
  if (h.version >= 2) {
    if (j["model"].is_null()) j["model"] = json::object();
    if (j["origin"].is_null()) j["origin"] = json::object();
    j["sequences"] = h.sequences;
    j["head_groups"] = head_groups;
    j["has_prompt"] = h.has_prompt;
  }
  return j;
}

uint64_t AttentionFileSource::record_count() const {
  return static_cast<uint64_t>(header_.steps) * header_.layers * (header_.sequences > 1 ? header_.sequences : 1);
}

const std::vector<float>* AttentionFileSource::prompt(uint32_t seq, uint32_t layer) const {
  if (!header_.has_prompt || layer >= header_.layers || seq >= header_.sequences) return nullptr;
  const auto& p = prompts_[static_cast<size_t>(layer) * header_.sequences + seq];
  return p.empty() ? nullptr : &p;
}

std::string AttentionFileSource::parse_header(const json& h) {
  if (!h.is_object() || !h.contains("format") || h["format"] != kFormat)
    return "expected a header object with \"format\": \"kvtier-attention-trace\"";
  const json v = h.contains("version") ? h["version"] : json();
  if (!v.is_number_unsigned() || (v.get<uint64_t>() != 1 && v.get<uint64_t>() != 2))
    return "unsupported version " + brief_dump(v) + ", this reader knows 1 and 2";
  header_.version = v.get<uint32_t>();
  if (std::string err = check_header_counts(h); !err.empty()) return err;
  header_.layers = h["layers"].get<uint32_t>();
  header_.steps = h["steps"].get<uint32_t>();
  header_.block_tokens = h["block_tokens"].get<uint32_t>();
  header_.context_tokens = h["context_tokens"].get<uint32_t>();
  header_.model = h.value("model", json::object());
  header_.origin = h.value("origin", json::object());
  header_.sequences = 1;
  header_.has_prompt = false;
  head_groups_ = 1;
  if (header_.version >= 2) {
    for (const char* k : {"sequences", "head_groups"}) {
      if (!h.contains(k)) continue;
      if (!h[k].is_number_unsigned() || h[k].get<uint64_t>() == 0 || h[k].get<uint64_t>() > 65536)
        return std::string("header: \"") + k + "\" must be an integer from 1 to 65536";
    }
    header_.sequences = h.value("sequences", 1u);
    head_groups_ = h.value("head_groups", 1u);
    if (static_cast<uint64_t>(header_.layers) * header_.sequences > kMaxTraceLayerSequences)
      return "header: layers x sequences = " + std::to_string(static_cast<uint64_t>(header_.layers) * header_.sequences) +
             ", more than " + std::to_string(kMaxTraceLayerSequences);
    if (h.contains("has_prompt") && !h["has_prompt"].is_boolean()) return "header: \"has_prompt\" must be true or false";
    header_.has_prompt = h.value("has_prompt", false);
  } else {
    for (const char* k : {"sequences", "head_groups", "has_prompt"})
      if (h.contains(k)) return std::string("header: \"") + k + "\" needs \"version\": 2";
  }
  seen_.clear();  // sized at the first record, after the header has been compared with the configuration
  prompts_.assign(header_.has_prompt ? static_cast<size_t>(header_.layers) * header_.sequences : 0, {});
  return "";
}

std::string AttentionFileSource::check_record(const AttentionRecord& rec) {
  const uint64_t per_step = static_cast<uint64_t>(header_.layers) * (header_.sequences > 1 ? header_.sequences : 1);
  const uint64_t i = records_seen_;
  // Past the header's promise a record would name a step that does not exist.
  if (i >= record_count())
    return "a record past the " + std::to_string(record_count()) + " the header promises (" +
           std::to_string(header_.steps) + " steps)";
  const uint32_t step = static_cast<uint32_t>(i / per_step);
  const uint32_t layer = static_cast<uint32_t>((i % per_step) / (header_.sequences > 1 ? header_.sequences : 1));
  const uint32_t seq = header_.sequences > 1 ? static_cast<uint32_t>(i % header_.sequences) : kAllSequences;
  auto seq_text = [](uint32_t s) { return s == kAllSequences ? std::string("all") : std::to_string(s); };
  if (rec.step != step || rec.layer != layer || rec.seq != seq)
    return "expected step " + std::to_string(step) + " layer " + std::to_string(layer) + " sequence " + seq_text(seq) +
           ", got step " + std::to_string(rec.step) + " layer " + std::to_string(rec.layer) + " sequence " +
           seq_text(rec.seq) + " (records are step-major, then layer, then sequence)";
  if (rec.mass.size() != rec.blocks.size()) return "\"mass\" must be as long as \"blocks\"";
  const uint32_t n = header_.blocks_at(rec.step);
  if (seen_.empty()) seen_.assign(header_.blocks_at(header_.steps), 0);
  ++stamp_;
  for (size_t k = 0; k < rec.blocks.size(); ++k) {
    const uint32_t id = rec.blocks[k];
    if (id >= n)
      return "blocks[" + std::to_string(k) + "] = " + std::to_string(id) + " does not exist at step " +
             std::to_string(rec.step) + " (" + std::to_string(n) + " blocks)";
    if (seen_[id] == stamp_) return "block " + std::to_string(id) + " listed twice";
    seen_[id] = stamp_;
    if (!std::isfinite(rec.mass[k]) || rec.mass[k] < 0)
      return "mass[" + std::to_string(k) + "] = " + std::to_string(rec.mass[k]) + ": expected a finite number >= 0";
  }
  if (head_groups_ > 1) {
    if (group_mass_.size() != static_cast<size_t>(head_groups_) * rec.blocks.size())
      return "\"groups\" must hold " + std::to_string(head_groups_) + " arrays as long as \"blocks\"";
    for (size_t k = 0; k < group_mass_.size(); ++k)
      if (!std::isfinite(group_mass_[k]) || group_mass_[k] < 0)
        return "groups[" + std::to_string(k / rec.blocks.size()) + "][" + std::to_string(k % rec.blocks.size()) +
               "]: expected a finite number >= 0";
  }
  ++records_seen_;
  return "";
}

std::string AttentionFileSource::add_prompt(uint32_t layer, uint32_t seq, std::vector<float> mass) {
  if (!header_.has_prompt) return "a prompt record, but the header has no \"has_prompt\": true";
  if (layer >= header_.layers) return "prompt record for layer " + std::to_string(layer) + " past the header's layers";
  if (seq >= header_.sequences)
    return "prompt record for sequence " + std::to_string(seq) + " past the header's " +
           std::to_string(header_.sequences) + " sequences";
  auto& slot = prompts_[static_cast<size_t>(layer) * header_.sequences + seq];
  if (!slot.empty()) return "prompt record for layer " + std::to_string(layer) + " sequence " + std::to_string(seq) + " twice";
  const size_t n = (header_.context_tokens + header_.block_tokens - 1) / header_.block_tokens;
  if (mass.size() != n)
    return "prompt record has " + std::to_string(mass.size()) + " masses, expected one per prompt block (" +
           std::to_string(n) + ")";
  double sum = 0;
  for (size_t k = 0; k < mass.size(); ++k) {
    if (!std::isfinite(mass[k]) || mass[k] < 0)
      return "prompt mass[" + std::to_string(k) + "]: expected a finite number >= 0";
    sum += mass[k];
  }
  // Averaged over the prompt's queries, each of which sums to 1; stored
  // values are rounded (f16 at worst), hence the tolerance.
  if (std::fabs(sum - 1.0) > 0.01)
    return "prompt masses sum to " + std::to_string(sum) + ", expected 1 (averaged over the prompt's queries)";
  slot = std::move(mass);
  return "";
}

std::string AttentionFileSource::check_prompts_complete() const {
  for (uint32_t l = 0; l < header_.layers && header_.has_prompt; ++l)
    for (uint32_t s = 0; s < header_.sequences; ++s)
      if (prompts_[static_cast<size_t>(l) * header_.sequences + s].empty())
        return "missing the prompt record for layer " + std::to_string(l) + " sequence " + std::to_string(s) +
               " (the header says \"has_prompt\": true; prompt records come before the decode records)";
  return "";
}

void JsonlTraceReader::fail(const std::string& what) const {
  throw ConfigError(path_ + ":" + std::to_string(line_no_) + ": " + what);
}

bool JsonlTraceReader::next_line() {
  do {
    const LineRead got = read_line_limited(in_, line_);
    if (got == LineRead::End) return false;
    ++line_no_;
    if (got == LineRead::TooLong) fail("line longer than " + std::to_string(kMaxTraceLineBytes) + " bytes");
  } while (line_.find_first_not_of(" \t\r") == std::string::npos);
  return true;
}

namespace {
json parse_line(const std::string& line, const std::function<void(const std::string&)>& fail) {
  try {
    return json::parse(line);
  } catch (const json::exception& e) {
    fail(std::string("not valid JSON: ") + e.what());
  }
  return json();
}

// Reads a JSON array of numbers into `out`; "" or what is wrong.
std::string read_masses(const json& a, const std::string& name, std::vector<float>& out) {
  if (!a.is_array()) return "\"" + name + "\" must be an array of numbers";
  for (size_t i = 0; i < a.size(); ++i) {
    if (!mass_ok(a[i]))
      return name + "[" + std::to_string(i) + "]: expected a number >= 0 that fits a float (<= 3.4e38), got " +
             brief_dump(a[i]);
    out.push_back(a[i].get<float>());
  }
  return "";
}
}  // namespace

JsonlTraceReader::JsonlTraceReader(const std::string& path) : AttentionFileSource(path), in_(path) {
  if (!in_) throw ConfigError(path + ": cannot open attention trace");
  if (!next_line()) throw ConfigError(path + ":1: empty file, expected a kvtier-attention-trace header");
  auto f = [this](const std::string& w) { fail(w); };
  json h;
  {
    size_t byte = 0;
    bool syntax = false;
    const std::string herr = parse_json_limited(line_, h, byte, syntax);
    if (!herr.empty()) fail("header is not valid JSON: " + herr);
  }
  std::string err = parse_header(h);
  if (!err.empty()) fail(err);
  // Prompt records come first; the first record line that is not one is kept for next().
  while (next_line()) {
    json r = parse_line(line_, f);
    if (!r.is_object() || !r.contains("prompt")) {
      pending_ = true;
      break;
    }
    if (r["prompt"] != true) fail("\"prompt\" must be true");
    auto u32 = [&](const char* k, bool required) -> uint32_t {
      auto it = r.find(k);
      if (it == r.end()) {
        if (required) fail(std::string("prompt record: \"") + k + "\" must be a non-negative integer");
        return 0;
      }
      if (!it->is_number_unsigned()) fail(std::string("\"") + k + "\" must be a non-negative integer");
      return it->get<uint32_t>();
    };
    const uint32_t layer = u32("layer", true);
    const uint32_t seq = u32("seq", header_.sequences > 1);
    std::vector<float> m;
    auto it = r.find("mass");
    if (it == r.end()) fail("prompt record: \"mass\" must be an array of numbers");
    err = read_masses(*it, "mass", m);
    if (err.empty()) err = add_prompt(layer, seq, std::move(m));
    if (!err.empty()) fail(err);
  }
  err = check_prompts_complete();
  if (!err.empty()) fail(err);
}

bool JsonlTraceReader::next(AttentionRecord& rec) {
  if (records_seen_ >= record_count()) {
    if (pending_ || next_line()) fail("a record after the last one the header promises (" + std::to_string(header_.steps) + " steps)");
    return false;
  }
  if (!pending_ && !next_line())
    fail("trace ends early: " + std::to_string(records_seen_) + " of the " + std::to_string(record_count()) +
         " records the header promises");
  pending_ = false;
  json r = parse_line(line_, [this](const std::string& w) { fail(w); });
  if (!r.is_object()) fail("expected a record object");
  if (r.contains("prompt")) fail("a prompt record after the decode records (prompt records come first)");
  auto field_u32 = [&](const char* k) -> uint32_t {
    auto it = r.find(k);
    if (it == r.end() || !it->is_number_unsigned() || it->get<uint64_t>() > 0xFFFFFFFEu)
      fail(std::string("\"") + k + "\" must be a non-negative integer");
    return it->get<uint32_t>();
  };
  rec.step = field_u32("step");
  rec.layer = field_u32("layer");
  rec.seq = kAllSequences;
  if (header_.sequences > 1) rec.seq = field_u32("seq");
  else if (r.contains("seq") && !(r["seq"].is_number_unsigned() && r["seq"].get<uint64_t>() == 0))
    fail("\"seq\" must be 0 or absent: the header has one sequence");
  auto bl = r.find("blocks");
  if (bl == r.end() || !bl->is_array()) fail("\"blocks\" must be an array of block indices");
  rec.blocks.clear();
  rec.mass.clear();
  for (size_t i = 0; i < bl->size(); ++i) {
    const json& b = (*bl)[i];
    if (!b.is_number_unsigned() || b.get<uint64_t>() > 0xFFFFFFFFu)
      fail("blocks[" + std::to_string(i) + "]: expected a non-negative integer");
    rec.blocks.push_back(b.get<uint32_t>());
  }
  auto ms = r.find("mass");
  if (ms == r.end()) fail("\"mass\" must be an array of numbers as long as \"blocks\"");
  std::string err = read_masses(*ms, "mass", rec.mass);
  if (!err.empty()) fail(err);
  if (rec.mass.size() != rec.blocks.size()) fail("\"mass\" must be an array of numbers as long as \"blocks\"");
  group_mass_.clear();
  if (head_groups_ > 1) {
    auto g = r.find("groups");
    if (g == r.end() || !g->is_array() || g->size() != head_groups_)
      fail("\"groups\" must be an array of " + std::to_string(head_groups_) + " arrays (the header's head_groups)");
    for (uint32_t k = 0; k < head_groups_; ++k) {
      const size_t before = group_mass_.size();
      err = read_masses((*g)[k], "groups[" + std::to_string(k) + "]", group_mass_);
      if (!err.empty()) fail(err);
      if (group_mass_.size() - before != rec.blocks.size())
        fail("groups[" + std::to_string(k) + "] must be as long as \"blocks\"");
    }
  } else if (r.contains("groups")) {
    fail("\"groups\" given, but the header has no \"head_groups\" above 1");
  }
  err = check_record(rec);
  if (!err.empty()) fail(err);
  return true;
}

JsonlTraceWriter::JsonlTraceWriter(const std::string& path, const AttentionHeader& h, uint32_t head_groups)
    : path_(path), tmp_(path + ".tmp"), h_(h), groups_(head_groups) {
  if (h.version == 1 && (h.sequences > 1 || h.has_prompt || head_groups > 1))
    throw ConfigError(path + ": format v1 has no per-sequence records, prompt records or head groups; write version 2");
  out_.open(tmp_);
  if (!out_) throw ConfigError(path + ": cannot write");
  out_ << trace_header_json(h, head_groups).dump() << '\n';
}

JsonlTraceWriter::~JsonlTraceWriter() {
  if (!closed_) {
    out_.close();
    std::remove(tmp_.c_str());
  }
}

void JsonlTraceWriter::put_mass(float m) {
  if (h_.version == 1) {
    buf_ += json(m).dump();  // as JsonlAttentionWriter, so v1 files round-trip byte for byte
    return;
  }
  char b[32];
  auto r = std::to_chars(b, b + sizeof b, m);  // shortest text that reads back to the same float
  buf_.append(b, r.ptr);
}

void JsonlTraceWriter::prompt(uint32_t layer, uint32_t seq, const std::vector<float>& mass) {
  buf_ = "{\"prompt\":true,\"layer\":" + std::to_string(layer);
  if (h_.sequences > 1) buf_ += ",\"seq\":" + std::to_string(seq);
  buf_ += ",\"mass\":[";
  for (size_t i = 0; i < mass.size(); ++i) {
    if (i) buf_ += ',';
    put_mass(mass[i]);
  }
  buf_ += "]}\n";
  out_ << buf_;
  check_written(out_, path_);
}

void JsonlTraceWriter::write(const AttentionRecord& rec, const std::vector<float>* group_mass) {
  buf_ = "{\"step\":" + std::to_string(rec.step) + ",\"layer\":" + std::to_string(rec.layer);
  if (h_.sequences > 1) buf_ += ",\"seq\":" + std::to_string(rec.seq);
  buf_ += ",\"blocks\":[";
  for (size_t i = 0; i < rec.blocks.size(); ++i) {
    if (i) buf_ += ',';
    buf_ += std::to_string(rec.blocks[i]);
  }
  buf_ += "],\"mass\":[";
  for (size_t i = 0; i < rec.mass.size(); ++i) {
    if (i) buf_ += ',';
    put_mass(rec.mass[i]);
  }
  buf_ += ']';
  if (groups_ > 1) {
    const size_t n = rec.blocks.size();
    if (!group_mass || group_mass->size() != groups_ * n)
      throw ConfigError(path_ + ": a record without its " + std::to_string(groups_) + " head-group masses");
    buf_ += ",\"groups\":[";
    for (uint32_t g = 0; g < groups_; ++g) {
      buf_ += g ? ",[" : "[";
      for (size_t i = 0; i < n; ++i) {
        if (i) buf_ += ',';
        put_mass((*group_mass)[g * n + i]);
      }
      buf_ += ']';
    }
    buf_ += ']';
  }
  buf_ += "}\n";
  out_ << buf_;
  check_written(out_, path_);
}

void JsonlTraceWriter::close() {
  out_.close();
  if (!out_ || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    // A staged output (NAME.tmp, renamed into place at the end): the user's name.
    std::string shown = path_;
    if (shown.size() > 4 && shown.compare(shown.size() - 4, 4, ".tmp") == 0) shown.resize(shown.size() - 4);
    throw ConfigError(shown + ": write failed");
  }
  closed_ = true;
}

}  // namespace kvtier
