// The cluster's results: its metrics (the instances' together, per
// instance, per node, the pool's) and requests.csv with where each request
// ran.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "models/hardware.h"
#include "sim/cluster/cluster.h"
#include "sim/cluster/instance.h"
#include "sim/core/config.h"
#include "sim/engine/energy_metrics.h"
#include "sim/engine/engine_metrics.h"
#include "sim/platform/platform.h"
#include "sim/serving/kv_pool.h"
#include "sim/serving/prefix_cache.h"
#include "sim/serving/serving.h"
#include "sim/serving/serving_metrics.h"

namespace kvtier {

namespace {

// The instances' values of a metrics object added up, key by key: counts
// and bytes sum; what all instances share (a setting, or a flag) is the
// first's. `skip`: keys left out (a peak of each is not the peak of their sum).
void add_up(json& into, const json& more, const std::vector<std::string>& same, const std::vector<std::string>& skip) {
  for (auto it = more.begin(); it != more.end(); ++it) {
    const std::string& k = it.key();
    if (std::find(skip.begin(), skip.end(), k) != skip.end()) continue;
    if (!into.contains(k)) {
      into[k] = *it;
    } else if (it->is_object()) {
      add_up(into[k], *it, same, skip);
    } else if (it->is_number() && std::find(same.begin(), same.end(), k) == same.end()) {
      if (it->is_number_unsigned() && into[k].is_number_unsigned())
        into[k] = into[k].get<uint64_t>() + it->get<uint64_t>();
      else
        into[k] = into[k].get<double>() + it->get<double>();
    }
  }
}

}  // namespace

// The cluster's metrics: every request's distributions as one serving run's,
// each instance's own under `instances`, the platform's links and energy.
// Per node of hardware.cluster: the instances whose first GPU is on it,
// their requests and tokens, their GPUs' mean busy share, and the bytes the
// node sent into and took from a star fabric through its port.
json ClusterSimulation::node_metrics(const Hardware& hw, const std::vector<json>& per, const json& links) const {
  json nodes = json::array();
  for (size_t k = 0; k < hw.cluster.nodes; ++k) {
    json node{{"node", "n" + std::to_string(k)}, {"instances", json::array()}};
    double requests = 0, output = 0, busy = 0, count = 0;
    for (size_t i = 0; i < inst_.size(); ++i) {
      if (hw.node_of(inst_[i]->gpu_dev) != k) continue;
      node["instances"].push_back(inst_[i]->gpu);
      requests += per[i].value("requests", 0.0);
      output += per[i].value("output_tokens", 0.0);
      busy += per[i].value("gpu_busy_fraction", 0.0);
      ++count;
    }
    node["requests"] = requests;
    node["output_tokens"] = output;
    node["gpu_busy_fraction"] = count > 0 ? busy / count : 0.0;
    const std::string port = "n" + std::to_string(k) + ".fabric";
    if (links.contains(port + ":up")) node["fabric_bytes_out"] = links[port + ":up"]["bytes"];
    if (links.contains(port + ":down")) node["fabric_bytes_in"] = links[port + ":down"]["bytes"];
    nodes.push_back(node);
  }
  return nodes;
}

// The pool as a whole: each tier's room (the shares summed) and use at the
// end, the prefix hits of its tiers split by where they were read from (the
// reader's node or another), and the bytes its reads and writes moved
// between nodes (every rank's: what the fabric carried for it).
json ClusterSimulation::pool_metrics(const json& m) const {
  const json& p = m["prefix_cache"]["pool"];
  const auto& names = inst_[0]->sim->tier_names();
  json tiers = json::array();
  for (uint32_t u = 0; u < pool_->tiers(); ++u) {
    uint64_t cap = 0, used = 0;
    for (uint32_t j = 0; j < pool_->members(); ++j) {
      cap += pool_->member(j).capacity[u];
      used += pool_->used(j, u);
    }
    tiers.push_back({{"tier", names[u + 1]}, {"capacity_blocks", cap}, {"used_blocks", used}});
  }
  const double local = p["local_hit_tokens"].get<double>(), remote = p["remote_hit_tokens"].get<double>();
  json out = {{"mode", "pooled"},
          {"members", pool_->members()},
          {"tiers", tiers},
          {"local_hit_tokens", p["local_hit_tokens"]},
          {"remote_hit_tokens", p["remote_hit_tokens"]},
          {"remote_hit_fraction", local + remote > 0 ? remote / (local + remote) : 0.0},
          {"prefill_tokens_saved", m["prefix_hit_tokens"]},
          {"fabric_read_bytes", p["remote_load_bytes"]},
          {"fabric_write_bytes", p["remote_write_bytes"]}};
  if (pool_->replicate_after() > 0)
    out["replicas"] = {{"after_reads", pool_->replicate_after()},
                       {"most_copies", pool_->max_copies()},
                       {"made", pool_->replicas_made()},
                       {"held", pool_->replicas_held()},
                       {"hit_tokens", p["replica_hit_tokens"]}};
  return out;
}

json ClusterSimulation::instance_metrics(size_t i, double end, ServingTotals& t) {
  Instance& in = *inst_[i];
  if (!in.stages) {
    t = in.sim->totals(end);
    return in.sim->instance_metrics(end);
  }
  // A pipeline-parallel instance: its virtual engines' requests as one
  // instance's, their counts and caches added up (a tier's peak: the sum of
  // their peaks, an upper bound), and each stage's GPUs' busy time.
  std::vector<ServingRequest> reqs;
  json sums = json::object();
  t = ServingTotals{};
  t.end_s = end;
  for (size_t v = 0; v < in.engines(); ++v) {
    ServingSimulation& e = in.engine(v);
    json part = e.instance_metrics(end);
    json keep = json::object();
    for (const char* k : {"swap_bytes", "prefix_cache", "kv_pool_blocks", "ssd_bytes_written", "tiers", "allreduce_s",
                          "allreduce_bytes"})
      if (part.contains(k)) keep[k] = part[k];
    add_up(sums, keep, {"distinct_blocks", "block_tokens", "enabled"}, {"years_to_wear_out"});
    t.add_counts(e.totals(end));
    reqs.insert(reqs.end(), e.requests().begin(), e.requests().end());
  }
  const PipelineStages& ps = *in.stages;
  json stages = json::array();
  double busy = 0;
  for (size_t st = 0; st < ps.size(); ++st) {
    busy += ps.busy_s(st);
    stages.push_back({{"gpus", ps.stage(st).names},
                      {"layers", ps.stage(st).layers},
                      {"busy_s", ps.busy_s(st)},
                      {"busy_fraction", end > 0 ? ps.busy_s(st) / end : 0.0}});
  }
  t.gpu_busy_s = busy / double(ps.size());  // gpu_busy_fraction: the mean over the stages
  json m = serving_metrics(reqs, t);
  for (auto it = sums.begin(); it != sums.end(); ++it) m[it.key()] = *it;
  m["pp"] = ps.size();
  m["virtual_engines"] = in.engines();
  m["stages"] = stages;
  m["micro_batches"] = ps.micro_batches();
  m["activation_bytes"] = ps.activation_bytes();
  m["activation_s"] = ps.activation_s();
  m["pipeline_active_s"] = ps.active_s(end);
  m["pipeline_bubble_fraction"] = ps.bubble_fraction(end);
  return m;
}

json ClusterSimulation::metrics(double end) {
  const size_t n = inst_.size();
  std::vector<ServingRequest> all(stream_.reqs.size());
  for (size_t k = 0; k < all.size(); ++k) all[k] = served(k);
  std::vector<json> per(n);
  ServingTotals tot;
  tot.end_s = end;
  double busy = 0;
  for (size_t i = 0; i < n; ++i) {
    ServingTotals t;
    per[i] = instance_metrics(i, end, t);
    tot.add_counts(t);
    busy += t.gpu_busy_s;
  }
  tot.gpu_busy_s = busy / double(n);  // gpu_busy_fraction: the mean over the instances' GPUs
  json m = serving_metrics(all, tot);
  if (n == 1) {
    for (const char* k : {"swap_bytes", "prefix_cache", "kv_pool_blocks", "ssd_bytes_written", "tiers"}) m[k] = per[0][k];
  } else {
    json sums = json::object();
    for (size_t i = 0; i < n; ++i) {
      json part = per[i];
      // Tiers by the hardware's own tier names: each instance's GPU and
      // nearest host memory and drive in the first instance's places.
      json tiers = json::object();
      const auto& names = inst_[i]->sim->tier_names();
      const auto& own = inst_[0]->sim->tier_names();
      for (size_t t = 0; t < names.size() && t < own.size(); ++t)
        if (part["tiers"].contains(names[t])) tiers[own[t]] = part["tiers"][names[t]];
      part["tiers"] = tiers;
      add_up(sums, part, {"distinct_blocks", "block_tokens"}, {"peak_bytes", "years_to_wear_out"});
      // A tier's peak over the cluster: the instances' peaks summed (each
      // instance's share of its devices is its own; they need not peak at
      // once, so an upper bound on the simultaneous peak); the first drive
      // to wear out sets the tier's years.
      for (auto& [name, mine] : tiers.items()) {
        json& total = sums["tiers"][name];
        if (mine.contains("peak_bytes"))
          total["peak_bytes"] = (i == 0 ? 0.0 : total["peak_bytes"].get<double>()) + mine["peak_bytes"].get<double>();
        const json& years = mine.contains("years_to_wear_out") ? mine["years_to_wear_out"] : json();
        if (years.is_number() && (i == 0 || !total["years_to_wear_out"].is_number() ||
                                  years.get<double>() < total["years_to_wear_out"].get<double>()))
          total["years_to_wear_out"] = years;
      }
    }
    for (const char* k : {"swap_bytes", "prefix_cache", "kv_pool_blocks", "ssd_bytes_written", "tiers"}) m[k] = sums[k];
  }
  json instances = json::array();
  for (size_t i = 0; i < n; ++i) {
    per[i]["gpu"] = inst_[i]->gpu;
    if (inst_[i]->gpus.size() > 1) {
      per[i]["gpus"] = json::array();
      for (size_t g : inst_[i]->gpus) per[i]["gpus"].push_back(inst_[i]->sim->setup().hw.devices[g].name);
    }
    per[i]["role"] = inst_[i]->role;
    per[i]["tier_devices"] = inst_[i]->sim->tier_names();
    instances.push_back(per[i]);
  }
  m["instances"] = instances;
  if (pool_) m["pooled_cache"] = pool_metrics(m);
  m["links"] = link_metrics(*platform_, end);
  const Hardware& hw = inst_[0]->sim->setup().hw;
  if (hw.cluster.nodes > 1) m["nodes"] = node_metrics(hw, per, m["links"]);
  EnergyRun run;
  run.end_s = end;
  run.generated_tokens = m.at("output_tokens").get<double>();
  run.requests = m.at("requests").get<double>();
  for (auto& in : inst_)
    for (size_t v = 0; v < in->engines(); ++v) {
      const EngineSetup& s = in->engine(v).setup();
      const EngineCounters& c = in->engine(v).counters();
      run.throttled_s += c.throttled_s;
      for (size_t t = 1; t < s.tiers() && t < c.wear.size(); ++t)
        if (s.hw.devices[s.tier_dev[t]].model->is_storage()) run.wear.push_back({s.tier_dev[t], c.wear[t].life_used()});
    }
  m.update(energy_cost_metrics(inst_[0]->sim->setup().hw, *platform_, run));
  return m;
}

std::string ClusterSimulation::requests_csv() const {
  std::vector<ServingRequest> all(stream_.reqs.size());
  for (size_t k = 0; k < all.size(); ++k) all[k] = served(k);
  const ServingSimulation& s0 = *inst_[0]->sim;
  const auto& names = s0.tier_names();
  const std::vector<std::string> tiers(names.begin() + 1, names.end());
  const json& slo = cfg_["serving"]["slo"];
  const std::string csv = serving_requests_csv(all, ServingSlo{slo["ttft_s"].get<double>(), slo["tpot_s"].get<double>()},
                                               tiers, s0.gpu_prefix_cache() ? names[0] : std::string());
  // Each line, the instance that served it (the one that prefilled it, and
  // the one that decoded it where they are apart).
  std::istringstream in(csv);
  std::ostringstream out;
  const size_t pp = cfg_["cluster"]["pp"].get<size_t>();
  std::string line;
  size_t k = 0;
  bool header = true;
  while (std::getline(in, line)) {
    out << line << ',';
    if (header) {
      out << "instance" << (prefill_ > 0 ? ",decode_instance" : "") << (pp > 1 ? ",pp,virtual_engine" : "");
      if (pool_) out << ",remote_hit_tokens,remote_nodes";
      if (!estimated_ttft_.empty()) out << ",estimated_ttft_s";
    } else {
      out << inst_[instance_of_[k]]->gpu;
      if (prefill_ > 0) out << ',' << (decode_of_[k] == UINT32_MAX ? std::string() : inst_[decode_of_[k]]->gpu);
      if (pp > 1) out << ',' << pp << ',' << (prefill_ > 0 && decode_of_[k] != UINT32_MAX ? decode_engine_[k] : engine_of_[k]);
      if (pool_) out << ',' << all[k].remote_hit_tokens << ',' << all[k].remote_nodes;
      if (!estimated_ttft_.empty()) out << ',' << json(estimated_ttft_[k]).dump();
      ++k;
    }
    out << '\n';
    header = false;
  }
  return out.str();
}

}  // namespace kvtier
