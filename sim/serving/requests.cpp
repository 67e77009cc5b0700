#include "sim/serving/requests.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <unordered_map>

#include "sim/core/config.h"
#include "sim/core/event_budget.h"
#include "sim/core/footprint.h"
#include "traces/request_synthetic.h"
#include "traces/request_trace.h"

namespace kvtier {

namespace {

ParamList identical_params() {
  return {
      str("kind", "identical", "identical requests"),
      integer("count", 1, "requests", 1, 1e7),
      integer("input_tokens", 4096, "prompt tokens of each", 1, 1 << 24),
      integer("output_tokens", 64, "output tokens of each (the first comes out of prefill)", 1, 1 << 24),
      num("interval_s", 0.0, "seconds between arrivals (0: all at time 0)", 0),
  };
}

// Requests as they are added: arrival scaled, prefix block ids made dense.
class RequestAdder {
 public:
  RequestAdder(RequestStream& rs, double scale) : rs_(rs), scale_(scale) {}
  void operator()(const Request& r) {
    ServingRequest q;
    q.id = static_cast<uint32_t>(rs_.reqs.size());
    q.arrival_s = r.arrival_s * scale_;
    if (!(q.arrival_s <= kMaxArrivalSeconds))
      throw ConfigError("serving.requests: request " + std::to_string(q.id) + " arrives at " +
                        plain_numbers(std::to_string(q.arrival_s)) +
                        " s (serving.time_scale applied), past the 1e8 s (about 3 years) a run may span");
    q.input_tokens = r.input_tokens;
    q.output_tokens = std::max<uint32_t>(1, r.output_tokens);
    q.prefix_blocks.reserve(r.blocks.size());
    for (uint64_t b : r.blocks) {
      auto it = dense_.emplace(b, static_cast<uint32_t>(dense_.size())).first;
      q.prefix_blocks.push_back(it->second);
    }
    rs_.reqs.push_back(std::move(q));
  }
  uint64_t distinct() const { return dense_.size(); }

 private:
  RequestStream& rs_;
  double scale_;
  std::unordered_map<uint64_t, uint32_t> dense_;
};

// The memory `total` requests will hold once loaded, committed before any
// is (sim/core/footprint.h): `sample(adder, k)` adds the stream's first k
// requests to a scratch stream, whose heap growth per request is measured.
template <class Sample>
void commit_stream(uint64_t total, const std::string& knob, Sample sample) {
  const uint64_t k = std::min<uint64_t>(total, 2048);
  double per_request = double(sizeof(ServingRequest));
  {
    RequestStream scratch;
    scratch.reqs.reserve(k);
    RequestAdder probe(scratch, 1.0);
    const double before = heap_bytes_in_use();
    sample(probe, k);
    const double grown = heap_bytes_in_use() - before;
    if (!scratch.reqs.empty())
      per_request = std::max(per_request, grown / double(scratch.reqs.size()) + double(sizeof(ServingRequest)));
  }
  // What each request adds while it runs: its attention source's slot, its
  // block range's owner, queue entries.
  per_request += 32;
  commit_footprint({"the request stream (" + std::to_string(total) + " requests x " +
                        std::to_string(static_cast<uint64_t>(per_request)) + " bytes)",
                    knob, double(total) * per_request});
  // At the end each request's line of requests.csv (about 125 bytes with
  // its finish time and SLO flags, held twice while it is staged and
  // written) and its latencies, copied into the vectors the percentiles sort.
  constexpr double kResultBytes = 2 * 125 + 64;
  commit_footprint({"the per-request results (" + std::to_string(total) + " requests x " +
                        std::to_string(static_cast<uint64_t>(kResultBytes)) + " bytes)",
                    knob, double(total) * kResultBytes});
}

// The requests in a trace file, estimated before it is read: its size over
// the bytes per line of its first 2,048 lines (a request a line; an Azure
// header line counts as one, an overestimate).
uint64_t estimated_trace_requests(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  double lines = 0, bytes = 0;
  while (lines < 2048 && std::getline(in, line)) {
    lines += 1;
    bytes += double(line.size()) + 1;
  }
  struct stat st {};
  if (bytes <= 0 || ::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(std::ceil(double(st.st_size) * lines / bytes));
}

// A trace or the synthetic generator (null: identical requests, added here).
std::unique_ptr<RequestSource> open_source(json& rqm, const std::string& kind, uint64_t limit, RequestAdder& add,
                                           RequestStream& rs) {
  if (kind == "trace") {
    if (!rqm.contains("path") || !rqm["path"].is_string())
      throw ConfigError("serving.requests.path: expected the path of a Mooncake JSONL or Azure CSV trace");
    for (auto it = rqm.begin(); it != rqm.end(); ++it)
      if (it.key() != "kind" && it.key() != "path" && !is_annotation_key(it.key()))
        throw ConfigError("serving.requests." + it.key() + ": unknown key (a trace takes kind and path)");
    const std::string path = find_data_file(rqm["path"].get<std::string>(), "", "serving.requests.path");
    auto src = open_request_trace(path);
    const uint64_t n = estimated_trace_requests(path);
    const uint64_t total = limit == 0 ? n : std::min(n, limit);
    commit_stream(total, "serving.requests.path (" + path + ", its size), serving.limit", [&](RequestAdder& probe, uint64_t k) {
      auto sample = open_request_trace(path);
      Request r;
      for (uint64_t i = 0; i < k && sample->next(r); ++i) probe(r);
    });
    rs.reqs.reserve(total);
    return src;
  }
  if (kind == "synthetic") {
    json p = rqm;
    p.erase("kind");
    auto src = std::make_unique<SyntheticRequests>(p, "serving.requests");
    for (auto it = p.begin(); it != p.end(); ++it) rqm[it.key()] = *it;
    const uint64_t n = static_cast<uint64_t>(get_int(p, "requests"));
    const uint64_t total = limit == 0 ? n : std::min(n, limit);
    commit_stream(total, "serving.requests.requests", [&](RequestAdder& probe, uint64_t k) {
      json q = p;
      SyntheticRequests sample(q, "serving.requests");
      Request r;
      for (uint64_t i = 0; i < k && sample.next(r); ++i) probe(r);
    });
    rs.reqs.reserve(total);
    return src;
  }
  if (kind != "identical")
    throw ConfigError("serving.requests.kind: expected \"trace\", \"synthetic\" or \"identical\", got \"" + kind + "\"");
  resolve_params(rqm, identical_params(), "serving.requests");
  const uint64_t n = static_cast<uint64_t>(get_int(rqm, "count"));
  Request r;
  r.input_tokens = static_cast<uint32_t>(get_int(rqm, "input_tokens"));
  r.output_tokens = static_cast<uint32_t>(get_int(rqm, "output_tokens"));
  const uint64_t total = limit == 0 ? n : std::min(n, limit);
  commit_stream(total, "serving.requests.count", [&](RequestAdder& probe, uint64_t k) {
    for (uint64_t i = 0; i < k; ++i) probe(r);
  });
  rs.reqs.reserve(total);
  for (uint64_t i = 0; i < n && (limit == 0 || i < limit); ++i) {
    r.arrival_s = double(i) * rqm["interval_s"].get<double>();
    add(r);  // no block ids: identical prompts are distinct, nothing to reuse
  }
  rs.source_name = "identical requests";
  return nullptr;
}

}  // namespace

RequestStream load_requests(json& sv) {
  const json& rq = sv["requests"];
  if (!rq.is_object() || !rq.contains("kind") || !rq["kind"].is_string())
    throw ConfigError("serving.requests: expected an object with \"kind\": \"trace\", \"synthetic\" or \"identical\"");
  const std::string kind = rq["kind"].get<std::string>();
  const uint64_t limit = static_cast<uint64_t>(get_int(sv, "limit"));
  RequestStream rs;
  RequestAdder add(rs, sv["time_scale"].get<double>());
  std::unique_ptr<RequestSource> src = open_source(sv["requests"], kind, limit, add, rs);
  if (src) {
    rs.source_name = src->name();
    rs.prefix_block_tokens = src->block_tokens();
    Request r;
    while ((limit == 0 || rs.reqs.size() < limit) && src->next(r)) add(r);
  }
  if (rs.reqs.empty()) throw ConfigError("serving.requests: " + rs.source_name + " has no requests");
  rs.distinct_blocks = add.distinct();
  return rs;
}

namespace {
// The GPU kernels serving the stream takes (sim/core/event_budget.h), within
// bounds. At most, without preemption: an iteration that decodes makes at
// least one output token, one that only prefills finishes a prompt or
// computes a full serving.max_batched_tokens of prompts, and an iteration
// is at most one kernel per layer. At least: an iteration computes at most
// max_batched_tokens tokens and one output token of at most max_running
// sequences, a request's tokens come out one an iteration, and an iteration
// is at least one kernel (the paged engine runs one for all layers where no
// KV is loaded per layer).
EventEstimate serving_events(const std::vector<ServingRequest>& reqs, const SchedulerLimits& limits, const LlmSpec& model) {
  double outputs = 0, prompts = 0, longest = 0;
  for (const ServingRequest& q : reqs) {
    outputs += q.output_tokens;
    prompts += q.input_tokens;
    longest = std::max(longest, double(q.output_tokens));
  }
  const double budget = std::max<uint32_t>(1, limits.max_batched_tokens);
  const double at_most = outputs + double(reqs.size()) + std::ceil(prompts / budget);
  const double at_least = std::max({longest, std::ceil(outputs / std::max<uint32_t>(1, limits.max_running)),
                                    std::ceil((prompts + outputs) / budget)});
  return {std::to_string(model.layers) + " layers x " + std::to_string(uint64_t(at_least)) + " to " +
              std::to_string(uint64_t(at_most)) + " iterations of " + std::to_string(reqs.size()) + " requests",
          "serving.requests, serving.limit", double(model.layers) * at_most, at_least};
}
}  // namespace

void check_requests(const std::vector<ServingRequest>& reqs, const std::string& source, const SchedulerLimits& limits,
                    const LlmSpec& model, const char* pool_what) {
  const uint64_t pool_tokens = limits.gpu_blocks * limits.block_tokens;
  for (const ServingRequest& q : reqs) {
    const uint64_t need = uint64_t(q.input_tokens) + q.output_tokens;
    if (model.max_context > 0 && need > model.max_context)
      throw ConfigError("serving.requests (" + source + "): request " + std::to_string(q.id) + " has " +
                        std::to_string(q.input_tokens) + " prompt + " + std::to_string(q.output_tokens) +
                        " output tokens, past the model's context of " + std::to_string(model.max_context) +
                        " (model.max_context_tokens)");
    const uint64_t admit = (uint64_t(q.input_tokens) + limits.block_tokens - 1) / limits.block_tokens +
                           static_cast<uint64_t>(limits.watermark * double(limits.gpu_blocks));
    if (need > pool_tokens || admit > limits.gpu_blocks)
      throw ConfigError(source + ": request " + std::to_string(q.id) + " needs the KV of " + std::to_string(need) +
                        " tokens but the " + pool_what + std::to_string(pool_tokens) +
                        " (it can never run, even alone; add GPU memory or shorten it)");
    if (!limits.chunked_prefill && q.input_tokens > limits.max_batched_tokens)
      throw ConfigError("serving.max_batched_tokens: " + std::to_string(limits.max_batched_tokens) +
                        " can never admit request " + std::to_string(q.id) + " of " + source + " (" +
                        std::to_string(q.input_tokens) + " prompt tokens); raise it or set serving.chunked_prefill");
  }
  commit_events(serving_events(reqs, limits, model));
}

}  // namespace kvtier
