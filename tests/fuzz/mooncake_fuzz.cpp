// The Mooncake JSONL request-trace importer (traces/mooncake.cpp): any bytes
// either read as requests that keep the format's promises or are rejected
// with a ConfigError.
#include <cmath>

#include "tests/fuzz/fuzz_input.h"
#include "traces/request_trace.h"

using namespace kvtier;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kvtier_fuzz::write_input(data, size, "trace.jsonl");
  try {
    (void)is_request_trace(path);
    auto src = open_mooncake_trace(path);
    Request r;
    double last = 0;
    uint64_t n = 0;
    while (src->next(r)) {
      if (!std::isfinite(r.arrival_s) || r.arrival_s < 0 || (n > 0 && r.arrival_s < last))
        kvtier_fuzz::finding("arrival " + std::to_string(r.arrival_s) + " after " + std::to_string(last));
      if (r.blocks.size() > (uint64_t(r.input_tokens) + kMooncakeBlockTokens - 1) / kMooncakeBlockTokens)
        kvtier_fuzz::finding("more block ids than input_length fills");
      last = r.arrival_s;
      ++n;
    }
    // The same file through the paths replay and stats take.
    auto again = open_mooncake_trace(path);
    BlockStream s = load_block_stream(*again);
    if (s.requests != n || s.request_end.size() != n) kvtier_fuzz::finding("the block stream lost requests");
    for (uint32_t ref : s.refs)
      if (ref >= s.blocks()) kvtier_fuzz::finding("a dense block index past the distinct blocks");
    NextReferences nr = next_references(s, 2);
    for (uint64_t i = 0; i < nr.n; ++i) (void)nr.next_position(i, 0, s.refs[i]);
  } catch (const ConfigError&) {
  }
  return 0;
}
