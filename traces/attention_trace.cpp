#include "traces/attention_trace.h"

#include <cstdio>

namespace kvtier {

static constexpr const char* kFormat = "kvtier-attention-trace";

json header_to_json(const AttentionHeader& h) {
  return json{{"format", kFormat},           {"version", h.version}, {"layers", h.layers},
              {"steps", h.steps},            {"block_tokens", h.block_tokens},
              {"context_tokens", h.context_tokens}, {"model", h.model}, {"origin", h.origin}};
}

void JsonlAttentionReader::fail(const std::string& what) const {
  throw ConfigError(path_ + ":" + std::to_string(line_no_) + ": " + what);
}

JsonlAttentionReader::JsonlAttentionReader(const std::string& path) : path_(path), in_(path) {
  if (!in_) throw ConfigError(path + ": cannot open attention trace");
  if (!std::getline(in_, line_)) throw ConfigError(path + ":1: empty file, expected a kvtier-attention-trace header");
  line_no_ = 1;
  json h;
  try {
    h = json::parse(line_);
  } catch (const json::parse_error& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!h.is_object() || h.value("format", "") != kFormat)
    fail("expected a header object with \"format\": \"kvtier-attention-trace\"");
  if (h.value("version", 0) != 1) fail("unsupported version " + h.value("version", json()).dump() + ", this reader knows 1");
  for (const char* k : {"layers", "steps", "block_tokens", "context_tokens"}) {
    if (!h.contains(k) || !h[k].is_number_unsigned() || h[k].get<uint64_t>() == 0)
      fail(std::string("header: \"") + k + "\" must be a positive integer");
  }
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
    if (!std::getline(in_, line_))
      fail("trace ends early: expected the record for step " + std::to_string(expect_step_) + " layer " +
           std::to_string(expect_layer_) + " (header says " + std::to_string(header_.steps) + " steps)");
    ++line_no_;
  } while (line_.find_first_not_of(" \t\r") == std::string::npos);
  json r;
  try {
    r = json::parse(line_);
  } catch (const json::parse_error& e) {
    fail(std::string("not valid JSON: ") + e.what());
  }
  if (!r.is_object()) fail("expected a record object");
  auto field_u32 = [&](const char* k) -> uint32_t {
    auto it = r.find(k);
    if (it == r.end() || !it->is_number_unsigned()) fail(std::string("\"") + k + "\" must be a non-negative integer");
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
    if (!m.is_number() || m.get<double>() < 0) fail("mass[" + std::to_string(i) + "]: expected a number >= 0");
    uint32_t id = b.get<uint32_t>();
    if (id >= n)
      fail("blocks[" + std::to_string(i) + "] = " + std::to_string(id) + " does not exist at step " +
           std::to_string(rec.step) + " (" + std::to_string(n) + " blocks)");
    if (seen_[id] == stamp_) fail("block " + std::to_string(id) + " listed twice");
    seen_[id] = stamp_;
    rec.blocks.push_back(id);
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
}

void JsonlAttentionWriter::close() {
  out_.close();
  if (!out_ || std::rename(tmp_.c_str(), path_.c_str()) != 0) throw ConfigError(path_ + ": write failed");
  closed_ = true;
}

}  // namespace kvtier
