// The Mooncake request trace (FAST'25 release): one JSON object per line,
// {"timestamp": ms from the start, "input_length": tokens, "output_length":
// tokens, "hash_ids": [ids of the prompt's 512-token blocks, in order]}.
// Other keys are ignored. Arrival times must not go backwards: a line whose
// timestamp is before the previous one is an error (the reader streams and
// does not sort).
#include <fstream>

#include "traces/line_reader.h"
#include "traces/request_trace.h"

namespace kvtier {
namespace {

class MooncakeReader : public RequestSource {
 public:
  explicit MooncakeReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw ConfigError(path + ": cannot open the Mooncake trace");
  }
  const std::string& name() const override { return path_; }
  uint32_t block_tokens() const override { return kMooncakeBlockTokens; }
  bool has_blocks() const override { return true; }

  bool next(Request& r) override {
    std::string text;
    for (;;) {
      const LineRead got = read_line_limited(in_, text);
      if (got == LineRead::TooLong) {
        ++line_;
        fail("line longer than " + std::to_string(kMaxTraceLineBytes) + " bytes (expected one request per line)");
      }
      if (got == LineRead::End) {
        if (requests_ == 0)
          fail(line_ == 0 ? "empty file, expected Mooncake JSONL requests"
                          : "no requests, expected Mooncake JSONL requests");
        return false;
      }
      ++line_;
      if (text.find_first_not_of(" \t\r") != std::string::npos) break;
    }
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception&) {
      fail("expected one JSON object (timestamp, input_length, output_length, hash_ids); the line is not valid "
           "JSON (truncated?)");
    }
    if (!j.is_object()) fail("expected a JSON object with timestamp, input_length, output_length, hash_ids");
    const json& ts = field(j, "timestamp");
    if (!ts.is_number() || ts.get<double>() < 0)
      fail("timestamp: expected a non-negative number of milliseconds, got " + brief_dump(ts));
    double t = ts.get<double>() / 1000.0;
    if (!(t <= kMaxArrivalSeconds))
      fail("timestamp " + brief_dump(ts) + " ms: expected at most 1e11 ms (about 3 years) from the trace's start");
    if (requests_ > 0 && t < last_s_)
      fail("timestamp " + ts.dump() + " ms is before the previous request's (" + json(last_s_ * 1000.0).dump() +
           " ms): expected non-decreasing arrival times");
    r.arrival_s = t;
    r.input_tokens = length(j, "input_length");
    r.output_tokens = length(j, "output_length");
    r.session = 0;
    const json& ids = field(j, "hash_ids");
    if (!ids.is_array()) fail("hash_ids: expected an array of block ids, got " + brief_dump(ids));
    uint64_t fits = (uint64_t(r.input_tokens) + kMooncakeBlockTokens - 1) / kMooncakeBlockTokens;
    if (ids.size() > fits)
      fail("hash_ids: " + std::to_string(ids.size()) + " blocks, but input_length " +
           std::to_string(r.input_tokens) + " fills at most " + std::to_string(fits) + " blocks of " +
           std::to_string(kMooncakeBlockTokens) + " tokens");
    r.blocks.resize(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      const json& v = ids[i];
      if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
        fail("hash_ids[" + std::to_string(i) + "]: expected a non-negative integer block id, got " + brief_dump(v));
      r.blocks[i] = v.get<uint64_t>();
    }
    last_s_ = t;
    ++requests_;
    return true;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(path_ + ":" + std::to_string(line_) + ": " + what);
  }
  const json& field(const json& j, const char* key) const {
    auto it = j.find(key);
    if (it == j.end())
      fail(std::string("missing field \"") + key + "\" (expected timestamp, input_length, output_length, hash_ids)");
    return *it;
  }
  uint32_t length(const json& j, const char* key) const {
    const json& v = field(j, key);
    if (!v.is_number_unsigned() || v.get<uint64_t>() > 0xFFFFFFFFull)
      fail(std::string(key) + ": expected a non-negative integer number of tokens, got " + brief_dump(v));
    return uint32_t(v.get<uint64_t>());
  }

  std::string path_;
  std::ifstream in_;
  uint64_t line_ = 0, requests_ = 0;
  double last_s_ = 0;
};

}  // namespace

std::unique_ptr<RequestSource> open_mooncake_trace(const std::string& path) {
  return std::make_unique<MooncakeReader>(path);
}

}  // namespace kvtier
