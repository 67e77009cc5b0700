// A seeded generator of LLM serving requests (the same Request stream as the
// importers). Parameters (docs/replay.md has the full list):
//  - arrival: "poisson" (rate_per_s), "gamma" (rate_per_s and cv, the
//    coefficient of variation of inter-arrival gaps: 1 is Poisson, above 1
//    bursty), or "replay" (the arrival times of a Mooncake or Azure trace,
//    multiplied by time_scale). Each arrival starts a conversation.
//  - input / output: length distributions (constant, uniform, exponential,
//    lognormal), clamped to [min, max] tokens.
//  - sessions: a conversation has 1 + Geometric turns (mean turns_mean); a
//    later turn arrives think_s (exponential mean) after the previous one and
//    its prompt is the previous prompt + the previous answer + a new input,
//    so it shares all the earlier turns' full blocks (same ids).
//  - rag: a share of conversations are single retrieval-augmented requests
//    whose prompt is chunks_per_request distinct chunks drawn from a corpus
//    by a Zipf(alpha) popularity, then a question; a chunk's blocks have the
//    same ids wherever it appears (MatKV reuses a chunk's precomputed KV
//    across requests, whatever its position).
// Block ids: full blocks of a conversation and chunk blocks are stable;
// a prompt's trailing partial block is unique to that request.
#pragma once

#include <memory>
#include <random>

#include "traces/request_trace.h"

namespace kvtier {

ParamList synthetic_request_params();

class SyntheticRequests : public RequestSource {
 public:
  // `p` is resolved in place (defaults filled in); errors name `where`.
  SyntheticRequests(json& p, const std::string& where);
  ~SyntheticRequests() override;
  const std::string& name() const override { return name_; }
  uint32_t block_tokens() const override { return block_tokens_; }
  bool has_blocks() const override { return true; }
  bool next(Request& r) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string name_;
  uint32_t block_tokens_ = 512;
};

}  // namespace kvtier
