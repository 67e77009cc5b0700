// The serving engine's request stream, read whole before anything runs (so
// that its checks come first): a request trace (Mooncake JSONL, Azure CSV),
// the synthetic request generator, or identical requests; arrivals scaled
// by serving.time_scale, prefix block ids made dense.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/llm.h"
#include "policies/common.h"
#include "sim/serving/scheduler.h"

namespace kvtier {

struct RequestStream {
  std::vector<ServingRequest> reqs;
  std::string source_name;
  uint32_t prefix_block_tokens = 0;  // tokens per prefix block (the trace's hash blocks; 0: none)
  uint64_t distinct_blocks = 0;      // distinct prefix blocks over the stream
};

// serving.requests (resolved in place), at most serving.limit of them.
RequestStream load_requests(json& sv);

// Every request can run, even alone: its context within the model's, its KV
// within the pool (`pool_what`: what holds it), its prompt within an
// iteration's token budget unless prompts are chunked.
void check_requests(const std::vector<ServingRequest>& reqs, const std::string& source, const SchedulerLimits& limits,
                    const LlmSpec& model, const char* pool_what);

}  // namespace kvtier
