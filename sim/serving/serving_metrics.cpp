#include "sim/serving/serving_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "sim/engine/engine_metrics.h"

namespace kvtier {

namespace {
double tpot(const ServingRequest& r) {
  return r.generated > 1 ? (r.finish_s - r.first_token_s) / double(r.generated - 1) : 0.0;
}
}  // namespace

bool ServingSlo::ttft_met(const ServingRequest& r) const { return ttft_s <= 0 || r.first_token_s - r.arrival_s <= ttft_s; }
bool ServingSlo::tpot_met(const ServingRequest& r) const { return tpot_s <= 0 || tpot(r) <= tpot_s; }

json distribution(std::vector<double> v) {
  if (v.empty()) return json{{"mean", 0.0}, {"p50", 0.0}, {"p90", 0.0}, {"p99", 0.0}, {"count", 0}};
  std::sort(v.begin(), v.end());
  return json{{"mean", std::accumulate(v.begin(), v.end(), 0.0) / double(v.size())},
              {"p50", nearest_rank(v, 0.50)},
              {"p90", nearest_rank(v, 0.90)},
              {"p99", nearest_rank(v, 0.99)},
              {"count", v.size()}};
}

json serving_metrics(const std::vector<ServingRequest>& reqs, const ServingTotals& tot) {
  std::vector<double> queue, ttft, tpots, e2e;
  uint64_t out_tokens = 0, prompt_tokens = 0, computed = 0, hit = 0, good = 0, decode_tokens = 0;
  const ServingSlo slo{tot.slo_ttft_s, tot.slo_tpot_s};
  double first_token = tot.end_s;  // the earliest first token: decode runs from there to the end
  for (const ServingRequest& r : reqs) {
    if (r.generated > 0) {
      decode_tokens += r.generated - 1;
      first_token = std::min(first_token, r.first_token_s);
    }
    queue.push_back(r.first_scheduled_s - r.arrival_s);
    ttft.push_back(r.first_token_s - r.arrival_s);
    if (r.generated > 1) tpots.push_back(tpot(r));
    e2e.push_back(r.finish_s - r.arrival_s);
    out_tokens += r.generated;
    prompt_tokens += r.input_tokens;
    computed += r.computed_tokens;
    for (uint32_t h : r.hit_tokens) hit += h;
    hit += r.gpu_hit_tokens;
    if (slo.ttft_met(r) && slo.tpot_met(r)) ++good;
  }
  json m;
  m["simulated_time_s"] = tot.end_s;
  m["requests"] = reqs.size();
  m["output_tokens"] = out_tokens;
  m["throughput_tokens_per_s"] = tot.end_s > 0 ? double(out_tokens) / tot.end_s : 0.0;
  // Output tokens after each request's first, over the time from the first
  // token out to the end: for N identical requests at time 0 that run
  // together, the single-batch engine's decode tokens/s.
  m["decode_tokens_per_s"] = tot.end_s > first_token ? double(decode_tokens) / (tot.end_s - first_token) : 0.0;
  m["request_throughput_per_s"] = tot.end_s > 0 ? double(reqs.size()) / tot.end_s : 0.0;
  m["goodput_requests_per_s"] = tot.end_s > 0 ? double(good) / tot.end_s : 0.0;
  m["slo_attainment"] = reqs.empty() ? 0.0 : double(good) / double(reqs.size());
  m["queueing_s"] = distribution(queue);
  m["ttft_s"] = distribution(ttft);
  m["tpot_s"] = distribution(tpots);
  m["e2e_s"] = distribution(e2e);
  m["prompt_tokens"] = prompt_tokens;
  m["computed_prompt_tokens"] = computed;  // includes recomputation after preemption
  m["prefix_hit_tokens"] = hit;
  m["prefix_hit_rate"] = prompt_tokens ? double(hit) / double(prompt_tokens) : 0.0;
  m["preemptions"] = tot.preemptions;
  m["swapped_out"] = tot.swapped_out;
  m["swapped_in"] = tot.swapped_in;
  m["recomputed"] = tot.recomputed;
  m["iterations"] = tot.iterations;
  m["layered_iterations"] = tot.layered_iterations;
  m["gpu_busy_fraction"] = tot.end_s > 0 ? tot.gpu_busy_s / tot.end_s : 0.0;
  return m;
}

std::string serving_requests_csv(const std::vector<ServingRequest>& reqs, const ServingSlo& slo,
                                 const std::vector<std::string>& tiers, const std::string& gpu) {
  std::ostringstream o;
  o.precision(17);
  o << "id,arrival_s,input_tokens,output_tokens,queueing_s,ttft_s,tpot_s,e2e_s,computed_prompt_tokens,preemptions,"
       "finish_s,ttft_slo_met,tpot_slo_met,slo_met";
  for (const auto& t : tiers) o << ",hit_tokens_" << t;
  if (!gpu.empty()) o << ",hit_tokens_" << gpu;
  o << "\n";
  for (const ServingRequest& r : reqs) {
    o << r.id << ',' << r.arrival_s << ',' << r.input_tokens << ',' << r.generated << ','
      << r.first_scheduled_s - r.arrival_s << ',' << r.first_token_s - r.arrival_s << ',' << tpot(r) << ','
      << r.finish_s - r.arrival_s << ',' << r.computed_tokens << ',' << r.preemptions << ',' << r.finish_s << ',' << int(slo.ttft_met(r)) << ','
      << int(slo.tpot_met(r)) << ',' << int(slo.ttft_met(r) && slo.tpot_met(r));
    for (size_t t = 0; t < tiers.size(); ++t) o << ',' << (t < r.hit_tokens.size() ? r.hit_tokens[t] : 0u);
    if (!gpu.empty()) o << ',' << r.gpu_hit_tokens;
    o << "\n";
  }
  return o.str();
}

std::string serving_iterations_csv(const std::vector<IterationRow>& rows, const std::vector<std::string>& tiers) {
  std::ostringstream o;
  o.precision(17);
  o << "iteration,start_s,end_s,batch,prefill_tokens,decode_tokens,running,waiting,swapped";
  for (const auto& t : tiers) o << ",kv_bytes_" << t;
  o << "\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const IterationRow& r = rows[i];
    o << i << ',' << r.start_s << ',' << r.end_s << ',' << r.batch << ',' << r.prefill_tokens << ',' << r.decode_tokens
      << ',' << r.running << ',' << r.waiting << ',' << r.swapped;
    for (size_t t = 0; t < tiers.size(); ++t) o << ',' << (t < r.tier_bytes.size() ? r.tier_bytes[t] : 0.0);
    o << "\n";
  }
  return o.str();
}

}  // namespace kvtier
