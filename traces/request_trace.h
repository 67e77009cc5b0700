// Request traces: LLM serving requests with their arrival time, prompt and
// output lengths and, where the source knows them, the ids of the prompt's
// KV blocks (block_tokens tokens each, in prompt order; equal ids are the
// same prefix block, so they show KV reuse across requests). Importers
// (Mooncake JSONL, Azure CSV) and the synthetic generator all produce this
// one stream type, one request at a time, so a trace of any length streams
// in bounded memory. Formats: docs/formats.md and docs/replay.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

// The latest arrival a request trace may give, seconds from its start
// (about 3.2 years). Simulated time is a double: at 1e8 s its resolution is
// 15 ns, while at 1e15 s a TTFT comes out in steps of 0.125 s and a TPOT
// as 0. Readers refuse a timestamp past it, as config times are capped.
constexpr double kMaxArrivalSeconds = 1e8;

struct Request {
  double arrival_s = 0;    // from the start of the trace, non-decreasing, at most kMaxArrivalSeconds
  uint32_t input_tokens = 0;
  uint32_t output_tokens = 0;
  uint64_t session = 0;    // conversation the request belongs to (synthetic); 0 where unknown
  std::vector<uint64_t> blocks;  // prompt block ids; empty where the source has none (Azure)
};

class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // The file the requests come from, or a description of the generator;
  // error messages name it.
  virtual const std::string& name() const = 0;
  virtual uint32_t block_tokens() const = 0;
  // Whether requests carry block ids.
  virtual bool has_blocks() const = 0;
  // Fills the next request; false at the end. Throws ConfigError on
  // malformed input, naming the file and line and what was expected.
  virtual bool next(Request& r) = 0;
};

enum class RequestTraceKind { Unknown, Mooncake, Azure };
const char* to_string(RequestTraceKind k);

// What kind of request trace a file holds, from its first line (Unknown for
// anything else, an attention trace for example). Throws ConfigError if it
// cannot be read or is empty.
RequestTraceKind detect_request_trace(const std::string& path);

// Whether `path` is a readable Mooncake or Azure file (never throws), for
// commands that read several kinds of trace.
bool is_request_trace(const std::string& path);

// Opens a Mooncake or Azure trace for streaming; ConfigError (naming the
// file) for an unreadable or empty file or one of another kind.
std::unique_ptr<RequestSource> open_request_trace(const std::string& path);
std::unique_ptr<RequestSource> open_mooncake_trace(const std::string& path);
std::unique_ptr<RequestSource> open_azure_trace(const std::string& path);

// The Mooncake trace's block size: hash_ids are ids of 512-token blocks.
constexpr uint32_t kMooncakeBlockTokens = 512;

// `kvtier trace stats` for request traces. The unbounded-cache hit ratio is
// what an infinite cache that starts empty serves: every reference to a block
// after its first (block semantics), or, with prefix semantics, the references
// before a request's first never-seen block.
struct RequestStats {
  uint64_t requests = 0;
  double duration_s = 0;  // last arrival - first arrival
  double mean_input_tokens = 0, mean_output_tokens = 0;
  uint64_t block_refs = 0, distinct_blocks = 0;
  uint64_t unbounded_hits = 0, unbounded_prefix_hits = 0;
  bool has_blocks = false;
  double unbounded_hit_ratio() const { return block_refs ? double(unbounded_hits) / double(block_refs) : 0.0; }
  double unbounded_prefix_hit_ratio() const {
    return block_refs ? double(unbounded_prefix_hits) / double(block_refs) : 0.0;
  }
};
RequestStats request_stats(RequestSource& src);
json to_json(const RequestStats& s);

// A request stream's block references with ids renumbered densely (0..n-1
// in order of first reference), the form replay and export work on: the id
// to index map is built once, here, so the per-reference paths index flat
// arrays. Requests end at `request_end[r]` (exclusive) in `refs`.
struct BlockStream {
  std::string name;
  uint32_t block_tokens = 0;
  std::vector<uint32_t> refs;
  std::vector<uint64_t> request_end;
  std::vector<uint64_t> ids;  // original id of each dense index
  std::vector<double> arrival_s;  // per request
  uint64_t requests = 0;
  uint64_t blocks() const { return ids.size(); }
};
// Reads the whole source. Throws ConfigError if it has no block ids (Azure)
// or more than 2^32 - 2 distinct blocks.
BlockStream load_block_stream(RequestSource& src);

// For each reference i of `refs` repeated `repeat` times (the stream played
// back to back, same ids), the position of the next reference to the same
// block in that repeated stream, or kNoNext. Only `refs.size()` entries are
// stored: positions in later repetitions are computed with next_position().
struct NextReferences {
  static constexpr uint64_t kNoNext = ~0ull;
  std::vector<uint64_t> within;     // next position inside one playback, kNoNext if none
  std::vector<uint64_t> first_ref;  // first position of each block in one playback
  uint64_t n = 0;
  uint32_t repeat = 1;
  uint64_t next_position(uint64_t i, uint32_t rep, uint32_t block) const {
    uint64_t w = within[i];
    if (w != kNoNext) return w + uint64_t(rep) * n;
    if (rep + 1 < repeat) return first_ref[block] + uint64_t(rep + 1) * n;
    return kNoNext;
  }
};
NextReferences next_references(const BlockStream& s, uint32_t repeat);

}  // namespace kvtier
