#include "traces/request_trace.h"

#include <filesystem>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

namespace kvtier {

const char* to_string(RequestTraceKind k) {
  switch (k) {
    case RequestTraceKind::Mooncake: return "Mooncake JSONL";
    case RequestTraceKind::Azure: return "Azure LLM inference CSV";
    default: return "unknown";
  }
}

RequestTraceKind detect_request_trace(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ConfigError(path + ": is a folder, expected a request trace file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open the request trace");
  std::string line;
  bool any = false;
  while (std::getline(in, line)) {
    any = true;
    size_t i = line.find_first_not_of(" \t\r");
    if (i == std::string::npos) continue;  // blank line
    if (line[i] == '{')
      return line.find("\"input_length\"") != std::string::npos || line.find("\"hash_ids\"") != std::string::npos
                 ? RequestTraceKind::Mooncake
                 : RequestTraceKind::Unknown;
    // The Azure header, or any .csv file (the Azure reader then checks the
    // header and names what it expected).
    bool csv = path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
    if (csv || line.compare(i, 9, "TIMESTAMP") == 0) return RequestTraceKind::Azure;
    return RequestTraceKind::Unknown;
  }
  throw ConfigError(path + (any ? ": only blank lines" : ": empty file") +
                    ", expected a request trace (Mooncake JSONL or Azure LLM inference CSV)");
}

bool is_request_trace(const std::string& path) {
  try {
    return detect_request_trace(path) != RequestTraceKind::Unknown;
  } catch (const ConfigError&) {
    return false;
  }
}

std::unique_ptr<RequestSource> open_request_trace(const std::string& path) {
  switch (detect_request_trace(path)) {
    case RequestTraceKind::Mooncake: return open_mooncake_trace(path);
    case RequestTraceKind::Azure: return open_azure_trace(path);
    default:
      throw ConfigError(path +
                        ":1: not a request trace: expected a Mooncake JSONL line (timestamp, input_length, "
                        "output_length, hash_ids) or an Azure CSV header TIMESTAMP,ContextTokens,GeneratedTokens");
  }
}

RequestStats request_stats(RequestSource& src) {
  RequestStats s;
  s.has_blocks = src.has_blocks();
  std::unordered_set<uint64_t> seen;
  Request r;
  double first = 0, last = 0, in_sum = 0, out_sum = 0;
  while (src.next(r)) {
    if (s.requests == 0) first = r.arrival_s;
    last = r.arrival_s;
    ++s.requests;
    in_sum += r.input_tokens;
    out_sum += r.output_tokens;
    bool prefix = true;
    for (uint64_t b : r.blocks) {
      ++s.block_refs;
      bool fresh = seen.insert(b).second;
      if (fresh) prefix = false;
      else ++s.unbounded_hits;
      if (prefix) ++s.unbounded_prefix_hits;
    }
  }
  s.distinct_blocks = seen.size();
  s.duration_s = last - first;
  if (s.requests) {
    s.mean_input_tokens = in_sum / double(s.requests);
    s.mean_output_tokens = out_sum / double(s.requests);
  }
  return s;
}

json to_json(const RequestStats& s) {
  json j{{"requests", s.requests},
         {"duration_s", s.duration_s},
         {"mean_input_tokens", s.mean_input_tokens},
         {"mean_output_tokens", s.mean_output_tokens},
         {"has_block_ids", s.has_blocks}};
  if (s.has_blocks) {
    j["block_refs"] = s.block_refs;
    j["distinct_blocks"] = s.distinct_blocks;
    j["unbounded_hits"] = s.unbounded_hits;
    j["unbounded_hit_ratio"] = s.unbounded_hit_ratio();
    j["unbounded_prefix_hits"] = s.unbounded_prefix_hits;
    j["unbounded_prefix_hit_ratio"] = s.unbounded_prefix_hit_ratio();
  }
  return j;
}

BlockStream load_block_stream(RequestSource& src) {
  if (!src.has_blocks())
    throw ConfigError(src.name() +
                      ": the requests carry no block ids (an Azure trace has lengths only), so there is no block "
                      "stream to replay or export; use a Mooncake trace or the synthetic generator");
  BlockStream s;
  s.name = src.name();
  s.block_tokens = src.block_tokens();
  std::unordered_map<uint64_t, uint32_t> dense;
  Request r;
  while (src.next(r)) {
    for (uint64_t b : r.blocks) {
      auto [it, fresh] = dense.try_emplace(b, uint32_t(s.ids.size()));
      if (fresh) {
        if (s.ids.size() >= 0xFFFFFFFEull) throw ConfigError(src.name() + ": more than 2^32 - 2 distinct blocks");
        s.ids.push_back(b);
      }
      s.refs.push_back(it->second);
    }
    s.request_end.push_back(s.refs.size());
    s.arrival_s.push_back(r.arrival_s);
    ++s.requests;
  }
  return s;
}

NextReferences next_references(const BlockStream& s, uint32_t repeat) {
  NextReferences nr;
  nr.n = s.refs.size();
  nr.repeat = repeat < 1 ? 1 : repeat;
  nr.within.assign(nr.n, NextReferences::kNoNext);
  nr.first_ref.assign(s.blocks(), NextReferences::kNoNext);
  std::vector<uint64_t> later(s.blocks(), NextReferences::kNoNext);  // the next position seen so far, going back
  for (uint64_t i = nr.n; i-- > 0;) {
    uint32_t b = s.refs[i];
    nr.within[i] = later[b];
    later[b] = i;
  }
  nr.first_ref = std::move(later);
  return nr;
}

}  // namespace kvtier
