// Every kind of attention trace a run can name in workload.trace, behind one
// factory: "synthetic" (SyntheticAttention), "patterns" (PatternAttention),
// "file" (any file format: JSON lines v1 or v2, or the binary container,
// told apart by the file's first bytes) and "none".
#pragma once

#include <memory>
#include <string>

#include "traces/attention_trace.h"

namespace kvtier {

// The source `trace_cfg` describes, validated in place (defaults filled in);
// null for "none". For "file", `path` is looked up as given, then relative to
// the source tree, and the file's shape is checked against the run's: layers,
// block_tokens and context_tokens equal, at least `steps` steps. `sequences`
// is the batch: the patterns generator draws that many independent patterns.
std::unique_ptr<AttentionSource> make_attention_source(json& trace_cfg, const std::string& where, uint32_t layers,
                                                       uint32_t context_tokens, uint32_t steps, uint32_t block_tokens,
                                                       uint32_t sequences, uint64_t seed);

// Opens a trace file of any format (sniffed from its first bytes).
std::unique_ptr<AttentionFileSource> open_attention_file(const std::string& path);

// The prompt record a policy needs: throws ConfigError naming the source and
// the record when it has none.
const std::vector<float>& require_prompt(const AttentionSource& src, uint32_t seq, uint32_t layer,
                                         const std::string& needed_by);

// The name errors give a source: a file's path, else the generator's.
std::string source_name(const AttentionSource& src);

}  // namespace kvtier
