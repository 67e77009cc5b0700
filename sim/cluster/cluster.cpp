#include "sim/cluster/cluster.h"
#include "sim/cluster/instance.h"
#include "sim/cluster/layerwise_transfer.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

#include "models/hardware.h"
#include "models/kv_capacity.h"
#include "models/llm.h"
#include "models/topology.h"
#include "policies/router.h"
#include "sim/core/config.h"
#include "sim/core/footprint.h"
#include "sim/core/timeline.h"
#include "sim/platform/collective.h"
#include "sim/platform/pipeline_stages.h"
#include "sim/platform/platform.h"
#include "sim/platform/sim_clock.h"
#include "sim/serving/kv_pool.h"
#include "sim/serving/prefix_cache.h"
#include "sim/serving/serving.h"

namespace kvtier {

ParamList cluster_run_params() {
  return {
      integer("replicas", 0,
              "model instances, of cluster.tp GPUs each (0: as many as the hardware's GPUs hold); each has its own "
              "scheduler, paged KV pool and prefix cache",
              0, 1 << 16),
      any("gpus", json::array(),
          "the GPUs the instances run on, in order (device names; default: hardware.gpu, then every other device of "
          "kind gpu in the order listed)",
          ParamType::Array),
      any("router", "round_robin",
          "which instance an arriving request goes to: a router name or {\"name\": ..., parameters} (`kvtier list "
          "policies`)"),
      integer("prefill_replicas", 0,
              "disaggregated prefill and decode: the first this many instances only prefill (the router picks among "
              "them) and the rest only decode, pulling each prompt's KV from its prefill GPU (0: every instance does "
              "both)",
              0, 1 << 16),
      any("decode_router", "least_tokens",
          "with prefill_replicas: which decode instance a prefilled request goes to (a router name or object)"),
      integer("tp", 1,
              "tensor parallelism: GPUs per instance (consecutive in cluster.gpus); each holds 1/tp of the weights, "
              "query heads and KV heads (KV heads replicated where tp exceeds them) and every layer ends in two "
              "all-reduces of the iteration's hidden states",
              1, 1024),
      integer("pp", 1,
              "pipeline parallelism: stages per instance, each on cluster.tp consecutive GPUs after the stage "
              "before, holding a consecutive share of the layers (an uneven remainder one extra layer each on the "
              "stages before the last, as vLLM splits them) with their weights and KV only; an iteration runs stage "
              "by stage, handing every token's activations on over the route between the stages' GPUs, and pp "
              "micro-batches (vLLM's virtual engines, each its own scheduler over 1/pp of the KV blocks) keep the "
              "stages busy at once",
              1, 1024),
      integer("pp_tensors", 2,
              "with cluster.pp: the tensors of hidden size a stage hands the next per token (2: the hidden states "
              "and the residual, as vLLM's Llama-family models send them; 1: the hidden states alone)",
              1, 16),
      num("pp_buffer_MiB", 4,
          "with cluster.pp: NCCL's buffer per connection between two stages' ranks (NCCL_BUFFSIZE, 4 MiB by "
          "default): a hand-over whose slice per rank fits goes into the next stage's buffer without waiting for "
          "that stage to finish its micro-batch, the sending stage free once it is in (one hand-over in a buffer at "
          "a time); a larger one, or every one with 0, waits for both stages",
          0, 1e6),
      boolean("fold_ranks", true,
              "a tensor-parallel instance's copies (each rank its share over its own route, at once) run as one "
              "SimGrid flow where every rank's route is the first rank's seen from another GPU, as on an HGX node; "
              "the same results (each rank's flow gets the same rate), one flow instead of one per rank; false: a "
              "flow per rank, the reference"),
      str("allreduce", "ring",
          "how a tensor-parallel instance's GPUs all-reduce: ring (NCCL's ring over the routes between consecutive "
          "ranks) or switch (NVSwitch: every rank to every other through the switch)",
          {"ring", "switch"}),
      str("kv_transfer", "after_prefill",
          "with prefill_replicas: how a prompt's KV reaches its decode instance: after_prefill (the decode instance, "
          "picked when the prefill ends, pulls the whole KV once it has room) or layerwise (picked when the prefill "
          "starts, it reserves the KV's blocks and each layer's KV is pushed as the prefill computes it; the prefill "
          "instance holds the KV until the last layer has landed)",
          {"after_prefill", "layerwise"}),
      str("kv_pool", "local",
          "where the instances' prefix caches keep prompt blocks: local (each its own, in its share of its node's host "
          "memory and drives) or pooled (Mooncake Store: every instance's share is part of one cache with one index, "
          "which any instance reads from the node holding a block, over the fabric between nodes)",
          {"local", "pooled"}),
      integer("kv_pool_replicate_after", 0,
              "with kv_pool pooled, replication of hot blocks: a block of the pool's top tier read from another node "
              "this many times gets a copy in the share of the instance whose read made it hot, which reads it "
              "locally from then on (copies hold slots the index does not count and yield them to cached blocks; "
              "0: none: a block is only where its share holds it)",
              0, 1 << 30),
      integer("kv_pool_copies", 1,
              "with kv_pool_replicate_after: the most copies a hot block has at once, each in the share of another "
              "instance whose reads made it hot (the k-th after k x kv_pool_replicate_after reads from other nodes "
              "since the block entered the pool's top tier)",
              1, 1 << 16),
      str("kv_pool_placement", "local_first",
          "with kv_pool pooled, which share a block goes to: local_first (the writing instance's own share while it "
          "has room) or hashed (the share its block hash names, as a store spreading keys over its nodes), each "
          "else the slot the tier's last victim freed, else the share with the most room",
          {"local_first", "hashed"}),
  };
}


ClusterSimulation::ClusterSimulation(json& cfg) : cfg_(cfg) {
  reset_footprint();
  resolve_params(cfg_["cluster"], cluster_run_params(), "cluster");
  json& sv = cfg_["serving"];
  if (!sv.is_object()) throw ConfigError("serving: expected an object (the serving engine's settings)");
  resolve_params(sv, serving_params(), "serving");
  stream_ = load_requests(sv);
  router_ = Registry<RouterPolicy>::instance().create(cfg_["cluster"]["router"], "cluster.router");
  decode_router_ = Registry<RouterPolicy>::instance().create(cfg_["cluster"]["decode_router"], "cluster.decode_router");
  if (decode_router_->reads_estimates())
    throw ConfigError("cluster.decode_router: a router that estimates a prompt's first token picks where it is "
                      "prefilled; expected one that weighs a decode instance's load (least_tokens, round_robin)");
  prefill_ = cfg_["cluster"]["prefill_replicas"].get<size_t>();
  place_instances();
  if (prefill_ > 0 && prefill_ >= inst_.size())
    throw ConfigError("cluster.prefill_replicas: " + std::to_string(prefill_) + " prefill instances leave none of the " +
                      std::to_string(inst_.size()) + " to decode");
  // Streaming pushes into a decode instance's paged pool (a cluster's instances refuse serving.kv "tiered").
  if (cfg_["cluster"]["kv_transfer"] == "layerwise" && prefill_ > 0)
    layerwise_ = std::make_unique<LayerwiseTransfer>(stream_.reqs.size());
  for (size_t i = 0; i < inst_.size() && prefill_ > 0; ++i) {
    inst_[i]->role = i < prefill_ ? "prefill" : "decode";
    for (size_t v = 0; i < prefill_ && !layerwise_ && v < inst_[i]->engines(); ++v)
      inst_[i]->engine(v).on_finish([this, i, v](uint32_t local) { hand_over(i, v, local); });
    // Streaming: every virtual engine of a pipeline streams what it prefills.
    for (size_t v = 0; layerwise_ && v < inst_[i]->engines(); ++v) {
      ServingSimulation& e = inst_[i]->engine(v);
      if (i >= prefill_)
        e.on_reserved([this, i, v](uint32_t local) { layerwise_->reserved(inst_[i]->global[v][local]); });
      if (i < prefill_) {
        e.on_schedule([this, i, v](uint32_t local) { stream_over(i, v, local); });
        e.on_finish([this, i, v](uint32_t local) {
          const uint32_t k = inst_[i]->global[v][local];
          if (decode_of_[k] != UINT32_MAX) layerwise_->prefilled(k);
        });
      }
    }
  }
  instance_of_.assign(stream_.reqs.size(), 0);
  local_id_.assign(stream_.reqs.size(), 0);
  engine_of_.assign(stream_.reqs.size(), 0);
  decode_engine_.assign(prefill_ > 0 ? stream_.reqs.size() : 0, 0);
  decode_of_.assign(prefill_ > 0 ? stream_.reqs.size() : 0, UINT32_MAX);
  decode_local_.assign(decode_of_.size(), 0);
  for (const ServingRequest& q : stream_.reqs)
    if (prefill_ > 0 && q.output_tokens > 1) ++to_hand_over_;
  if (cfg_["cluster"]["kv_pool"] == "pooled") build_pool();
  else if (cfg_["cluster"]["kv_pool_placement"] != "local_first")
    throw ConfigError("cluster.kv_pool_placement: places blocks in a pool's shares; expected cluster.kv_pool "
                      "\"pooled\" with it (local caches keep their blocks on their own node)");
  else if (cfg_["cluster"]["kv_pool_replicate_after"].get<uint64_t>() > 0)
    throw ConfigError("cluster.kv_pool_replicate_after: copies hot blocks between a pool's shares; expected "
                      "cluster.kv_pool \"pooled\" with it");
  if (cfg_["cluster"]["kv_pool_copies"].get<uint32_t>() > 1 && cfg_["cluster"]["kv_pool_replicate_after"].get<uint64_t>() == 0)
    throw ConfigError("cluster.kv_pool_copies: the most copies of a hot block; expected cluster.kv_pool_replicate_after "
                      "above 0 with it (0 makes no copies)");
  // serving.prefix_cache.warm: the pool, or else every engine's own cache
  // (each node holds the whole precomputed corpus), starts holding the stream.
  if (inst_[0]->sim->prefix_cache().warm_start()) {
    if (pool_) pool_->warm(stream_.reqs);
    else
      for (auto& in : inst_)
        for (size_t v = 0; v < in->engines(); ++v) in->engine(v).prefix_cache().warm(stream_.reqs);
  }
}

// One cache of every instance's share: the same tiers, policy and block
// size as each instance's own cache, each share as big as that cache.
void ClusterSimulation::build_pool() {
  const Hardware& hw = inst_[0]->sim->setup().hw;
  // A member per serving engine: a pipeline-parallel instance's virtual
  // engines each bring the share of the devices their own prefix cache has.
  std::vector<KvPool::Member> members;
  for (auto& in : inst_)
    for (size_t v = 0; v < in->engines(); ++v) {
      const PrefixCache& pc = in->engine(v).prefix_cache();
      if (!pc.replay_config())
        throw ConfigError("cluster.kv_pool: \"pooled\" needs a prefix cache below each instance's GPU "
                          "(serving.prefix_cache.enabled, a tier below the GPU in hardware.tiers, and requests with "
                          "prefix blocks)");
      KvPool::Member m;
      m.gpu = in->gpu_dev;
      m.gpu_node = static_cast<uint32_t>(hw.node_of(in->gpu_dev));
      for (size_t u = 0; u < pc.devices().size(); ++u) {
        m.devs.push_back(pc.devices()[u]);
        m.nodes.push_back(static_cast<uint32_t>(hw.node_of(pc.devices()[u])));
        m.capacity.push_back(pc.replay_config()->tiers[u].capacity_blocks);
      }
      members.push_back(std::move(m));
    }
  const KvPool::Placement placement = cfg_["cluster"]["kv_pool_placement"] == "hashed" ? KvPool::Placement::Hashed
                                                                                     : KvPool::Placement::LocalFirst;
  pool_ = std::make_unique<KvPool>(*inst_[0]->sim->prefix_cache().replay_config(), std::move(members),
                                   stream_.distinct_blocks, placement,
                                   cfg_["cluster"]["kv_pool_replicate_after"].get<uint32_t>(),
                                   cfg_["cluster"]["kv_pool_copies"].get<uint32_t>());
  // Every GPU of an instance moves its share (its stage's layers, its
  // rank's heads): the bytes a member's engine counts, times them.
  const uint32_t ranks = cfg_["cluster"]["tp"].get<uint32_t>() * cfg_["cluster"]["pp"].get<uint32_t>();
  uint32_t member = 0;
  for (auto& in : inst_)
    for (size_t v = 0; v < in->engines(); ++v) in->engine(v).prefix_cache().join(*pool_, member++, ranks);
}

// An instance reads and writes every share from its GPU (loads, writes,
// promotions); demotions between two other shares get their stream when
// first made. Writes into another member's drive wear as its own tier's.
void ClusterSimulation::connect_pool() {
  const Hardware& hw = inst_[0]->sim->setup().hw;
  for (size_t i = 0; i < inst_.size(); ++i) {
    std::vector<std::pair<size_t, size_t>> pairs, drives;
    const size_t g = inst_[i]->gpu_dev;
    for (size_t j = 0; j < pool_->members(); ++j) {
      const KvPool::Member& m = pool_->member(j);
      for (size_t u = 0; u < m.devs.size(); ++u) {
        if (m.gpu != g || m.devs[u] != inst_[i]->rank_tiers[0][u + 1]) {
          pairs.emplace_back(m.devs[u], g);
          pairs.emplace_back(g, m.devs[u]);
        }
        if (hw.devices[m.devs[u]].model->is_storage()) drives.emplace_back(m.devs[u], u + 1);
      }
    }
    // Several members on one device (a pipeline's virtual engines): a pair once, in the order first met.
    auto once = [](std::vector<std::pair<size_t, size_t>>& v) {
      std::unordered_set<uint64_t> seen;
      size_t kept = 0;
      for (const auto& p : v)
        if (seen.insert((uint64_t(p.first) << 32) | uint64_t(p.second)).second) v[kept++] = p;
      v.resize(kept);
    };
    once(pairs);
    once(drives);
    for (size_t v = 0; v < inst_[i]->engines(); ++v) inst_[i]->engine(v).pool_streams(pairs, drives);
  }
}

ClusterSimulation::~ClusterSimulation() = default;

// Each device's part on ranks 1..T-1, per instance: a rank's GPU for the
// first rank's, its nearest host memory or drive for the first rank's,
// another instance's ranks for its first GPU (KV pulled between instances);
// anything else is itself on every rank.
std::vector<std::vector<std::vector<size_t>>> ClusterSimulation::rank_parts(size_t ranks) const {
  const size_t devices = inst_[0]->sim->setup().hw.devices.size();
  std::vector<std::vector<size_t>> part(devices);
  for (size_t d = 0; d < part.size(); ++d) part[d].assign(ranks - 1, d);
  for (const auto& in : inst_)
    for (size_t r = 1; r < ranks; ++r) part[in->gpu_dev][r - 1] = in->gpus[r];
  std::vector<std::vector<std::vector<size_t>>> parts;
  for (const auto& in : inst_) {
    std::vector<std::vector<size_t>> mine = part;
    // Pooled: another member's share is on its ranks' devices, rank by
    // rank (this instance's own tiers, set next, win where they coincide).
    for (const auto& other : inst_)
      for (size_t t = 1; pool_ && other != in && t < other->rank_tiers[0].size(); ++t)
        for (size_t r = 1; r < ranks; ++r) mine[other->rank_tiers[0][t]][r - 1] = other->rank_tiers[r][t];
    for (size_t t = 1; t < in->rank_tiers[0].size(); ++t)
      for (size_t r = 1; r < ranks; ++r) mine[in->rank_tiers[0][t]][r - 1] = in->rank_tiers[r][t];
    parts.push_back(std::move(mine));
  }
  return parts;
}

// Every pair of rank layouts a run may copy between, each device as the
// copying instance's ranks play it: an instance's GPU and tiers among
// themselves, prefill GPUs to decode GPUs, and with a pool every share to
// and from each GPU and each share of a tier to each share of the tier
// below (a victim's demotion). A share is the same layout seen from any
// instance (its owner's ranks), so the pairs between shares are listed once.
std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>> ClusterSimulation::fold_pairs(
    const std::vector<std::vector<std::vector<size_t>>>& parts) const {
  std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>> pairs;
  auto layout = [&](size_t i, size_t d) {
    std::vector<size_t> l{d};
    l.insert(l.end(), parts[i][d].begin(), parts[i][d].end());
    return l;
  };
  for (size_t i = 0; i < inst_.size(); ++i) {
    auto pair = [&](size_t a, size_t b) {
      if (a != b) pairs.emplace_back(layout(i, a), layout(i, b));
    };
    const size_t g = inst_[i]->gpu_dev;
    const std::vector<size_t>& own = inst_[i]->rank_tiers[0];  // the GPU, then the tiers
    for (size_t a : own)
      for (size_t b : own) pair(a, b);
    for (size_t p = 0; p < prefill_; ++p) {
      if (i >= prefill_ && !layerwise_) pair(inst_[p]->gpu_dev, g);
      if (i < prefill_ && layerwise_)
        for (size_t d = prefill_; d < inst_.size(); ++d) pair(g, inst_[d]->gpu_dev);
    }
    for (size_t j = 0; pool_ && j < inst_.size(); ++j)
      for (size_t t = 1; t < inst_[j]->rank_tiers[0].size(); ++t) {
        pair(inst_[j]->rank_tiers[0][t], g);
        pair(g, inst_[j]->rank_tiers[0][t]);
      }
  }
  for (size_t t = 1; pool_ && t + 1 < inst_[0]->rank_tiers[0].size(); ++t)
    for (size_t j = 0; j < inst_.size(); ++j)
      for (size_t k = 0; k < inst_.size(); ++k) {
        const size_t a = inst_[j]->rank_tiers[0][t], b = inst_[k]->rank_tiers[0][t + 1];
        if (a != b) pairs.emplace_back(layout(j, a), layout(k, b));
      }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

namespace {

// The device of `kind` closest to `from`: fewest links, then least latency,
// then first listed. A GPU's host memory is its own socket's where the
// hardware has one per socket.
size_t nearest_of_kind(const Hardware& hw, const Topology& topo, size_t from, const std::string& kind) {
  size_t best = hw.devices.size();
  std::pair<size_t, double> best_cost{0, 0};
  for (size_t d = 0; d < hw.devices.size(); ++d) {
    // A rank keeps its KV in its own node (routes between nodes go over the
    // fabric, which the topology of one node does not hold).
    if (hw.devices[d].kind != kind || hw.node_of(d) != hw.node_of(from)) continue;
    const Route r = topo.route(from, d);
    double lat = 0;
    for (const Hop& h : r) lat += hw.links[h.link].latency_s;
    const std::pair<size_t, double> cost{r.size(), lat};
    if (best == hw.devices.size() || cost < best_cost) {
      best = d;
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace

// Which GPU each instance runs on and which devices are its tiers: the
// hardware's own tiers for an instance on hardware.gpu, the nearest device
// of the same kind for the others. Devices several instances keep KV in are
// shared out equally (hardware.kv_capacity of each instance).
void ClusterSimulation::place_instances() {
  json hwj = cfg_["hardware"];
  const Hardware hw = parse_hardware(hwj, "hardware");
  const Topology topo(hw);
  cfg_["hardware"] = hwj;
  const json& cl = cfg_["cluster"];
  std::vector<size_t> gpus;
  auto is_gpu = [&](size_t d) { return hw.devices[d].model->flops() > 0 && hw.devices[d].kind == "gpu"; };
  if (!cl["gpus"].empty()) {
    for (size_t i = 0; i < cl["gpus"].size(); ++i) {
      const json& g = cl["gpus"][i];
      const std::string where = "cluster.gpus[" + std::to_string(i) + "]";
      if (!g.is_string()) throw ConfigError(where + ": expected a device name");
      const int d = hw.device_index(g.get<std::string>());
      if (d < 0 || !is_gpu(static_cast<size_t>(d)))
        throw ConfigError(where + ": '" + g.get<std::string>() + "' is not a GPU of the hardware");
      if (std::find(gpus.begin(), gpus.end(), size_t(d)) != gpus.end())
        throw ConfigError(where + ": '" + g.get<std::string>() + "' is listed twice (one instance per GPU)");
      gpus.push_back(static_cast<size_t>(d));
    }
  } else {
    gpus.push_back(static_cast<size_t>(hw.device_index(hw.gpu)));
    for (size_t d = 0; d < hw.devices.size(); ++d)
      if (is_gpu(d) && d != gpus[0]) gpus.push_back(d);
  }
  const size_t tp = cl["tp"].get<size_t>();
  const size_t pp = cl["pp"].get<size_t>();
  const size_t per = tp * pp;  // GPUs per instance: its stages one after the other, each of tp ranks
  const size_t want = cl["replicas"].get<size_t>();
  const size_t n = want == 0 ? gpus.size() / per : want;
  if (n == 0 || n * per > gpus.size()) {
    if (pp > 1 && want <= 1)
      throw ConfigError("cluster.pp: an instance of " + std::to_string(pp) + " stages of " + std::to_string(tp) +
                        " GPUs (cluster.tp) takes " + std::to_string(per) + " GPUs, but the hardware (or cluster.gpus) has " +
                        std::to_string(gpus.size()));
    throw ConfigError("cluster.replicas: " + std::to_string(std::max<size_t>(n, 1)) + " instances of " +
                      (per > 1 ? std::to_string(per) + " GPUs (cluster.tp x cluster.pp)" : std::string("one GPU")) +
                      " each, but the hardware (or cluster.gpus) has " + std::to_string(gpus.size()) + " GPUs");
  }
  if (pp > 1) {
    json m = cfg_["model"];
    const LlmSpec whole = parse_llm(m, "model");
    if (pp > whole.layers)
      throw ConfigError("cluster.pp: " + std::to_string(pp) + " stages for the model's " + std::to_string(whole.layers) +
                        " layers (a stage holds at least one)");
  }
  if (hw.tiers.empty() || hw.tiers[0] != hw.gpu)
    throw ConfigError("hardware.tiers: a cluster's instances keep running KV on their GPU: the first tier must be the GPU (" +
                      hw.gpu + ")");
  // Each rank's tier devices: the hardware's own for the first instance's
  // first rank, the nearest of the same kind for the others. Each rank of
  // every instance keeps its share of KV in its devices.
  std::vector<uint32_t> sharers(hw.devices.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    auto in = std::make_unique<Instance>();
    for (size_t r = 0; r < per; ++r) {
      const size_t g = gpus[i * per + r];
      in->gpus.push_back(g);
      std::vector<size_t> tiers{g};
      for (size_t t = 1; t < hw.tiers.size(); ++t) {
        const size_t own = static_cast<size_t>(hw.device_index(hw.tiers[t]));
        tiers.push_back(i == 0 && r == 0 ? own : nearest_of_kind(hw, topo, g, hw.devices[own].kind));
        ++sharers[tiers.back()];
      }
      in->rank_tiers.push_back(tiers);
    }
    in->gpu_dev = in->gpus[0];
    in->gpu = hw.devices[in->gpu_dev].name;
    if (pp > 1) {
      json m = cfg_["model"];
      const std::vector<uint32_t> layers = stage_layers(parse_llm(m, "model").layers, static_cast<uint32_t>(pp));
      for (size_t st = 0; st < pp; ++st) {
        PipelineStages::Stage stage;
        for (size_t r = 0; r < tp; ++r) {
          stage.gpus.push_back(in->gpus[st * tp + r]);
          stage.names.push_back(hw.devices[stage.gpus.back()].name);
        }
        stage.layers = layers[st];
        in->stage_plan.push_back(std::move(stage));
      }
    }
    inst_.push_back(std::move(in));
  }
  // Each virtual engine of a pipeline-parallel instance has its own prefix
  // cache in its share of the devices.
  for (uint32_t& k : sharers) k *= static_cast<uint32_t>(pp);
  for (auto& in : inst_) {
    in->cfg = instance_config(in->gpu_dev, in->rank_tiers[0], sharers);
    in->global.resize(pp);
    try {
      in->sim = std::make_unique<ServingSimulation>(in->cfg, stream_, nullptr);
      // The other virtual engines: the same configuration (each its own copy, resolved by its engine).
      for (size_t v = 1; v < pp; ++v) {
        in->more_cfg.push_back(std::make_unique<json>(in->cfg));
        in->more.push_back(std::make_unique<ServingSimulation>(*in->more_cfg.back(), stream_, nullptr));
      }
    } catch (const ConfigError& e) {
      if (n == 1 && per == 1) throw;
      throw ConfigError(std::string(e.what()) + " (the instance on " + in->gpu +
                        (pp > 1 ? ": each of its " + std::to_string(pp) + " virtual engines has 1/" + std::to_string(pp) +
                                      " of a stage GPU's KV pool)"
                                : std::string(")")));
    }
  }
  // The run's configuration as resolved: the first instance's, with the
  // hardware as given (its GPU and tiers) and the cluster section.
  json keep_model = cfg_["model"];
  parse_llm(keep_model, "model");
  const json keep_hw = cfg_["hardware"], keep_cluster = cfg_["cluster"];
  const json keep_swap = cfg_["serving"]["swap_space_GiB"];
  cfg_ = inst_[0]->cfg;
  cfg_["hardware"] = keep_hw;
  cfg_["model"] = keep_model;  // the whole model (each instance's holds a rank's shard)
  cfg_["cluster"] = keep_cluster;
  cfg_["cluster"]["replicas"] = n;
  cfg_["serving"]["swap_space_GiB"] = keep_swap;  // an instance's, not one virtual engine's share
}

// The config of an instance on GPU `gpu` with tiers `tier_devs`: its tiers
// named after its devices, hardware.kv_capacity carried over to them, and a
// device that `sharers` instances keep KV in given each its share.
json ClusterSimulation::instance_config(size_t gpu, const std::vector<size_t>& tier_devs,
                                        const std::vector<uint32_t>& sharers) const {
  json c = cfg_;
  c.erase("cluster");
  json hwj = c["hardware"];
  const Hardware hw = parse_hardware(hwj, "hardware");
  json& h = c["hardware"];
  h["gpu"] = hw.devices[gpu].name;
  json names = json::array();
  for (size_t d : tier_devs) names.push_back(hw.devices[d].name);
  // hardware.kv_capacity is keyed by the tiers as written ("dram0"), which
  // on a cluster of several nodes are node 0's ("n0.dram0" in hw.tiers).
  const json written = h["tiers"];
  h["tiers"] = names;
  const json given = h.contains("kv_capacity") ? h["kv_capacity"] : json::object();
  json cap = json::object();
  const LlmSpec whole = [&] {
    json m = c["model"];
    return parse_llm(m, "model");
  }();
  const uint32_t tp = cfg_["cluster"]["tp"].get<uint32_t>();
  LlmSpec model = whole;
  if (tp > 1) {
    // One rank's shard (Megatron-LM): a tp-th of the query heads and the
    // weights; KV heads split, or replicated where there are fewer than ranks.
    if (whole.heads % tp != 0)
      throw ConfigError("cluster.tp: " + std::to_string(tp) + " ranks do not split the model's " +
                        std::to_string(whole.heads) + " query heads evenly");
    if (whole.kv_heads % tp != 0 && tp % whole.kv_heads != 0)
      throw ConfigError("cluster.tp: " + std::to_string(tp) + " ranks neither split nor replicate the model's " +
                        std::to_string(whole.kv_heads) + " KV heads evenly");
    model.heads = whole.heads / tp;
    model.kv_heads = whole.kv_heads % tp == 0 ? whole.kv_heads / tp : 1;
    model.params = whole.params / tp;
    c["model"]["heads"] = model.heads;
    c["model"]["kv_heads"] = model.kv_heads;
    c["model"]["params_B"] = model.params / 1e9;
    c["model"]["note"] = "one of " + std::to_string(tp) + " tensor-parallel ranks' shard of " + whole.name;
  }
  const uint32_t pp = cfg_["cluster"]["pp"].get<uint32_t>();
  std::vector<LlmSpec> stage_specs;
  if (tp > 1 || pp > 1) {
    const json& w = c["policies"].is_object() && c["policies"].contains("weights") ? c["policies"]["weights"] : json();
    if (!w.is_null() && w != "gpu" && !(w.is_object() && w.value("name", "") == "gpu"))
      throw ConfigError("policies.weights: a tensor- or pipeline-parallel instance keeps its weights on its GPUs "
                        "(streamed weights are modelled for one GPU); remove it or set cluster.tp and cluster.pp 1");
  }
  if (pp > 1) {
    // One stage's share (every stage holds as many layers as the largest,
    // or one fewer): its layers' weights and KV only, so a block (every
    // layer of the stage) is 1/pp of the model's. The stage with the most
    // layers holds the fewest blocks, and vLLM sizes every stage's pool by
    // the smallest; the micro-batches' virtual engines then split it.
    // The embedding is stage 0's, the head the last stage's (each engine
    // runs every stage's layers, so its spec keeps both ends and its layers
    // their per-layer share; what each stage's GPU holds is stage_specs').
    uint32_t top = 0;
    const std::vector<uint32_t> per_stage = stage_layers(whole.layers, pp);
    for (uint32_t l : per_stage) top = std::max(top, l);
    for (size_t st = 0; st < per_stage.size(); ++st)
      stage_specs.push_back(model.stage(per_stage[st], st == 0, st + 1 == per_stage.size()));
    model.params = model.layer_params() * double(top) / double(whole.layers) + model.embedding_params() + model.head_params();
    model.layers = top;
    c["model"]["layers"] = model.layers;
    c["model"]["params_B"] = model.params / 1e9;
    c["model"]["note"] = "one of " + std::to_string(pp) + " pipeline stages' share" +
                         (tp > 1 ? " (one of " + std::to_string(tp) + " tensor-parallel ranks')" : std::string()) +
                         " of " + whole.name;
  }
  const json& sv = c["serving"];
  const double block_bytes = double(model.kv_bytes_per_token()) * get_int(c["workload"], "block_tokens");
  // The swap space's tier, as the serving engine picks it.
  const std::string swap_tier = sv["swap_tier"].get<std::string>();
  int swap_t = -1;
  for (size_t t = 1; t < tier_devs.size() && swap_t < 0; ++t)
    if (swap_tier.empty() ? hw.devices[tier_devs[t]].model->role() == DeviceRole::Memory : hw.tiers[t] == swap_tier)
      swap_t = static_cast<int>(t);
  if (!swap_tier.empty() && swap_t > 0) c["serving"]["swap_tier"] = hw.devices[tier_devs[size_t(swap_t)]].name;
  // A virtual engine of a pipeline-parallel instance swaps into its share
  // of the instance's swap space (vLLM divides num_cpu_blocks by pp).
  if (pp > 1) c["serving"]["swap_space_GiB"] = sv["swap_space_GiB"].get<double>() / pp;
  const double swap_bytes = sv["preemption"] == "swap" ? sv["swap_space_GiB"].get<double>() * 1073741824.0 : 0.0;
  for (size_t t = 0; t < tier_devs.size(); ++t) {
    const std::string own = written.is_array() && t < written.size() ? written[t].get<std::string>() : hw.tiers[t];
    const std::string& mine = hw.devices[tier_devs[t]].name;
    if (t == 0 && pp > 1) {
      // A stage's GPU: its memory less its layers' weights, in blocks of its
      // layers, shared out among the micro-batches' virtual engines (vLLM
      // divides num_gpu_blocks by pp).
      // Every stage's pool is the smallest stage's: each stage's GPU less
      // its own weights (its layers', with the embedding or the head), in
      // blocks of its own layers.
      const double cap_bytes = hw.devices[tier_devs[0]].model->capacity_bytes();
      uint64_t per_stage_blocks = UINT64_MAX;
      for (const LlmSpec& st : stage_specs) {
        const double st_block = double(st.kv_bytes_per_token()) * get_int(c["workload"], "block_tokens");
        double room = cap_bytes - st.weight_bytes();
        if (given.contains(own))
          room = kv_room_bytes(parse_kv_capacity(json{{own, given[own]}}, {own}, "hardware.kv_capacity"), own, room,
                               st_block, " after the stage's weights");
        per_stage_blocks = std::min<uint64_t>(per_stage_blocks, room > 0 ? static_cast<uint64_t>(room / st_block) : 0);
      }
      const uint64_t blocks = per_stage_blocks / pp;
      if (blocks == 0)
        throw ConfigError("cluster.pp: a stage's GPU (" + mine + ") holds no KV block of its layers for each of its " +
                          std::to_string(pp) + " micro-batches after its weights");
      cap[mine] = blocks;
    } else if (given.contains(own)) {
      cap[mine] = given[own];
    } else if (t > 0 && sharers[tier_devs[t]] > 1) {
      const double share = hw.devices[tier_devs[t]].model->capacity_bytes() / sharers[tier_devs[t]] -
                           (int(t) == swap_t ? swap_bytes : 0.0);
      const uint64_t blocks = share > 0 ? static_cast<uint64_t>(share / block_bytes) : 0;
      if (blocks == 0)
        throw ConfigError("cluster.replicas: " + std::to_string(sharers[tier_devs[t]]) + " instances share " + mine +
                          ", whose share holds no KV block" + (int(t) == swap_t ? " beside the swap space" : ""));
      cap[mine] = blocks;
    }
  }
  if (cap.empty()) h.erase("kv_capacity");
  else h["kv_capacity"] = cap;
  return c;
}

// The router: each request at its arrival, to the instance it picks (a
// prefill instance, where prefill and decode are apart).
void ClusterSimulation::route_all() {
  const size_t n = prefill_ > 0 ? prefill_ : inst_.size();
  std::vector<InstanceLoad> loads(n);
  std::vector<uint8_t> handed(n, 0);
  const bool prefix = router_->reads_prefix(), estimates = router_->reads_estimates();
  if (estimates) estimated_ttft_.assign(stream_.reqs.size(), 0.0);
  auto wake = [&] {
    for (size_t i = 0; i < n; ++i)
      for (size_t v = 0; handed[i] && v < inst_[i]->engines(); ++v) inst_[i]->engine(v).wake();
    std::fill(handed.begin(), handed.end(), 0);
  };
  for (size_t k = 0; k < stream_.reqs.size(); ++k) {
    const ServingRequest& q = stream_.reqs[k];
    // Requests that arrive together are handed over together, before any
    // instance is woken: one woken by the first would plan without the rest.
    if (q.arrival_s > sim_now()) {
      wake();
      sim_sleep_until(q.arrival_s);
    }
    for (size_t i = 0; i < n; ++i) {
      loads[i].outstanding_tokens = inst_[i]->outstanding_tokens();
      loads[i].requests = inst_[i]->unfinished();
      loads[i].cached_tokens = 0;
      for (size_t v = 0; prefix && v < inst_[i]->engines(); ++v)
        loads[i].cached_tokens = std::max(loads[i].cached_tokens, inst_[i]->engine(v).cached_prefix_tokens(q));
      if (estimates) estimate_first_token(i, q, loads[i]);
    }
    const uint32_t i = router_->route(RoutedRequest{static_cast<uint32_t>(k), q.input_tokens, q.output_tokens}, loads);
    if (i >= n) throw std::logic_error("router returned instance " + std::to_string(i));
    if (estimates) estimated_ttft_[k] = loads[i].queue_s + loads[i].service_s;
    instance_of_[k] = i;
    const size_t v = inst_[i]->least_busy_engine();
    engine_of_[k] = static_cast<uint32_t>(v);
    local_id_[k] = static_cast<uint32_t>(inst_[i]->engine(v).requests().size());
    inst_[i]->global[v].push_back(static_cast<uint32_t>(k));
    ServingRequest r = q;
    if (prefill_ > 0) r.output_tokens = 1;  // a prefill instance ends with the first token
    inst_[i]->engine(v).accept(std::move(r));
    handed[i] = 1;
  }
  wake();
  for (size_t i = 0; i < n; ++i)
    for (size_t v = 0; v < inst_[i]->engines(); ++v) inst_[i]->engine(v).close();
  routed_all_ = true;
  if (handed_over_ == to_hand_over_) close_decode_side();
}

// What a router estimating the first token weighs (Mooncake's conductor
// makes the same estimate). Queued: the layer-seconds of the prompts handed
// to the instance (all its virtual engines: they share its GPUs) that have
// not been prefilled, each as if alone and uncached, times the model's
// layers, with their embeddings and LM heads. Service: the prompt's prefill
// less its cached prefix, on the instance's kernel model with each layer's
// tensor-parallel all-reduces and a pipeline's hand-overs between stages as
// they take on an idle platform; its cached blocks load layer by layer from
// the devices they lie on (its own host memory or drives, or with a pool another
// node's, over the fabric) at the route's rate and latency when alone, and
// layer l computes once its KV is in: with L equal layers, the longer of the
// two sides plus one layer of the shorter. The running sequences' decode
// and contention are not in the estimate.
void ClusterSimulation::estimate_first_token(size_t i, const ServingRequest& q, InstanceLoad& load) {
  Instance& in = *inst_[i];
  double layers = 0;
  for (const PipelineStages::Stage& st : in.stage_plan) layers += st.layers;
  if (in.stage_plan.empty()) layers = in.sim->setup().model.layers;
  double queued = 0, queued_ends = 0;
  for (size_t v = 0; v < in.engines(); ++v) {
    queued += in.engine(v).queued_prefill_layer_s();
    queued_ends += in.engine(v).queued_prefill_ends_s();
  }
  load.queue_s = layers * queued + queued_ends;
  const ServingSimulation& e = in.engine(in.least_busy_engine());
  hit_from_.clear();
  // At least the prompt's last token is computed (it yields the first token).
  const uint32_t cached = std::min(e.prefix_hit_sources(q, hit_from_), q.input_tokens > 0 ? q.input_tokens - 1 : 0u);
  const double compute =
      layers * e.prefill_layer_s(cached, q.input_tokens - cached) + e.prefill_ends_s(cached, q.input_tokens - cached);
  std::sort(hit_from_.begin(), hit_from_.end());
  const double per_token = e.prefix_load_bytes_per_token_layer();
  double loading = 0;
  for (size_t a = 0; a < hit_from_.size();) {
    const size_t dev = hit_from_[a].first;
    double tokens = 0;
    for (; a < hit_from_.size() && hit_from_[a].first == dev; ++a) tokens += hit_from_[a].second;
    loading += layers * e.prefix_load_layer_s(dev, tokens * per_token);  // one layer's, each rank's share
  }
  // A pipeline hands the prompt's computed tokens from stage to stage.
  const double handovers = in.stages ? in.stages->handovers_idle_s(double(q.input_tokens - cached)) : 0.0;
  load.service_s = std::max(compute, loading) + std::min(compute, loading) / std::max(1.0, layers) + handovers;
}

// A prefill instance's request is done: on to a decode instance, which pulls
// its KV from the prefill GPU.
void ClusterSimulation::hand_over(size_t from, size_t engine, uint32_t local) {
  const uint32_t k = inst_[from]->global[engine][local];
  const ServingRequest& q = stream_.reqs[k];
  if (q.output_tokens <= 1) return;  // the first token was the last
  const auto [j, v] = pick_decode(k);
  ServingSimulation& d = inst_[j]->engine(v);
  d.accept_prefilled(q, inst_[from]->gpu_dev);
  d.wake();
  if (++handed_over_ == to_hand_over_ && routed_all_) close_decode_side();
}

std::pair<size_t, size_t> ClusterSimulation::pick_decode(uint32_t k) {
  const ServingRequest& q = stream_.reqs[k];
  const size_t n = inst_.size() - prefill_;
  std::vector<InstanceLoad> loads(n);
  for (size_t j = 0; j < n; ++j) {
    loads[j].outstanding_tokens = inst_[prefill_ + j]->outstanding_tokens();
    loads[j].requests = inst_[prefill_ + j]->unfinished();
  }
  const uint32_t j = decode_router_->route(RoutedRequest{k, q.input_tokens, q.output_tokens}, loads);
  if (j >= n) throw std::logic_error("decode router returned instance " + std::to_string(j));
  Instance& d = *inst_[prefill_ + j];
  const size_t v = d.least_busy_engine();
  decode_of_[k] = static_cast<uint32_t>(prefill_ + j);
  decode_engine_[k] = static_cast<uint32_t>(v);
  decode_local_[k] = static_cast<uint32_t>(d.engine(v).requests().size());
  d.global[v].push_back(k);
  return {prefill_ + j, v};
}

// Layer-wise: the prompt's prefill starts; its decode instance is picked now
// and reserves its blocks when it can, and the prefill streams the KV to it.
void ClusterSimulation::stream_over(size_t from, size_t engine, uint32_t local) {
  const uint32_t k = inst_[from]->global[engine][local];
  const ServingRequest& q = stream_.reqs[k];
  if (q.output_tokens <= 1) return;  // the first token is the last: nothing to decode
  const auto [j, v] = pick_decode(k);
  ServingSimulation& d = inst_[j]->engine(v);
  d.accept_streamed(q);
  layerwise_->start(k, inst_[from]->engine(engine), local, d, decode_local_[k], inst_[j]->gpu_dev);
  d.wake();
  if (++handed_over_ == to_hand_over_ && routed_all_) close_decode_side();
}

void ClusterSimulation::close_decode_side() {
  for (size_t i = prefill_; prefill_ > 0 && i < inst_.size(); ++i)
    for (size_t v = 0; v < inst_[i]->engines(); ++v) inst_[i]->engine(v).close();
}

ServingRequest ClusterSimulation::served(size_t k) const {
  const ServingRequest& p = inst_[instance_of_[k]]->engine(engine_of_[k]).requests()[local_id_[k]];
  ServingRequest r = p;
  if (!decode_of_.empty() && decode_of_[k] != UINT32_MAX) {
    r = inst_[decode_of_[k]]->engine(decode_engine_[k]).requests()[decode_local_[k]];
    // What the prefill instance did: when it started, what it computed and found cached.
    r.first_scheduled_s = p.first_scheduled_s;
    r.computed_tokens += p.computed_tokens;
    r.hit_tokens = p.hit_tokens;
    r.gpu_hit_tokens = p.gpu_hit_tokens;
    r.remote_hit_tokens = p.remote_hit_tokens;
    r.remote_nodes = p.remote_nodes;
    r.preemptions += p.preemptions;
  } else if (!decode_of_.empty()) {
    r.output_tokens = stream_.reqs[k].output_tokens;
  }
  r.id = static_cast<uint32_t>(k);
  return r;
}

// Per instance: whether nothing but its own all-reduces can ever cross the
// links they take (then they run as closed forms, sim/platform/collective.h).
// Every other byte the cluster moves goes between a rank's GPU and its tier
// devices (KV, the prefix cache, weights; both ways), between two of those
// tiers, with a KV pool between a rank's GPU and every member's share of
// that rank and between any two shares, between a prefill and a decode GPU
// of the same rank (a pull after the prefill, or a layer-wise push), between
// consecutive pipeline stages' ranks of the same index, or across the fabric
// through a node's gateway: every such route is listed here, and a new kind
// of transfer between instances must be listed too.
std::vector<bool> ClusterSimulation::allreduce_alone(bool through_switch) const {
  const Hardware& hw = inst_[0]->sim->setup().hw;
  const Platform& p = *platform_;
  std::vector<uint8_t> used(p.stats().size(), 0);
  auto mark = [&](size_t a, size_t b) {
    if (a == b) return;
    for (uint32_t s : p.route(a, b).stats) used[s] = 1;
    for (uint32_t s : p.route(b, a).stats) used[s] = 1;
  };
  for (const auto& in : inst_)
    for (size_t r = 0; r < in->gpus.size(); ++r) {
      const std::vector<size_t>& tiers = in->rank_tiers[r];
      for (size_t t = 1; t < tiers.size(); ++t) {
        mark(in->gpus[r], tiers[t]);
        for (size_t u = 1; u < t; ++u) mark(tiers[u], tiers[t]);
      }
    }
  // Every byte between nodes crosses the fabric (an instance spanning nodes
  // all-reduces over it), and a host memory's copies between nodes may go
  // through any of its adapters (Platform::fabric_ends).
  for (uint32_t s : p.fabric_links()) used[s] = 1;
  for (uint32_t s : p.view_links()) used[s] = 1;
  auto gateway = [&](size_t dev) { return static_cast<size_t>(hw.device_index(hw.node_of(dev), hw.cluster.fabric.nic)); };
  if (hw.nodes() > 1)
    for (const auto& in : inst_)
      for (size_t g : in->gpus) mark(g, gateway(g));
  if (pool_) {
    // The pool: every rank reads and writes every member's share of its rank,
    // and blocks move down between any two shares.
    std::vector<size_t> shares;
    for (const auto& in : inst_)
      for (const std::vector<size_t>& rank : in->rank_tiers) shares.insert(shares.end(), rank.begin() + 1, rank.end());
    std::sort(shares.begin(), shares.end());
    shares.erase(std::unique(shares.begin(), shares.end()), shares.end());
    auto link = [&](size_t a, size_t b) {
      if (hw.node_of(a) == hw.node_of(b)) {
        mark(a, b);
      } else {
        mark(a, gateway(a));
        mark(gateway(b), b);
      }
    };
    for (const auto& in : inst_)
      for (size_t r = 0; r < in->gpus.size(); ++r)
        for (const auto& other : inst_)
          for (size_t t = 1; r < other->rank_tiers.size() && t < other->rank_tiers[r].size(); ++t)
            link(in->gpus[r], other->rank_tiers[r][t]);
    for (size_t a : shares)
      for (size_t b : shares)
        if (hw.node_of(a) == hw.node_of(b)) mark(a, b);
    for (size_t a : shares)
      if (hw.nodes() > 1) mark(a, gateway(a));
  }
  for (size_t i = 0; i < prefill_; ++i)
    for (size_t j = prefill_; j < inst_.size(); ++j)
      for (size_t r = 0; r < inst_[i]->gpus.size(); ++r) {
        const size_t a = inst_[i]->gpus[r], b = inst_[j]->gpus[r];
        if (hw.node_of(a) == hw.node_of(b)) {
          mark(a, b);
        } else {
          mark(a, gateway(a));
          mark(gateway(b), b);
        }
      }
  const CollectiveAlgorithm algo = through_switch ? CollectiveAlgorithm::Switch : CollectiveAlgorithm::Ring;
  // Each stage of each instance all-reduces among its own ranks (and
  // all-gathers what it received over the same links), its micro-batch
  // beside the other stages': a link two groups cross is shared.
  struct Group {
    size_t instance, stage;
    std::vector<uint32_t> links;
  };
  std::vector<Group> groups;
  std::vector<uint8_t> collectives(used.size(), 0);  // groups whose all-reduces cross each link
  for (size_t i = 0; i < inst_.size(); ++i) {
    const size_t per_stage = inst_[i]->stage_plan.empty() ? inst_[i]->gpus.size() : inst_[i]->stage_plan[0].gpus.size();
    for (size_t first = 0, st = 0; first < inst_[i]->gpus.size(); first += per_stage, ++st) {
      const std::vector<size_t> g(inst_[i]->gpus.begin() + static_cast<std::ptrdiff_t>(first),
                                  inst_[i]->gpus.begin() + static_cast<std::ptrdiff_t>(first + per_stage));
      groups.push_back(Group{i, st, collective_links(p, allreduce_plan(p, g, 1.0, algo))});
      for (uint32_t s : groups.back().links) collectives[s] = static_cast<uint8_t>(std::min(collectives[s] + 1, 2));
    }
  }
  std::vector<bool> alone(inst_.size(), true);
  for (const Group& g : groups)
    for (uint32_t s : g.links)
      if (used[s] || collectives[s] > 1) alone[g.instance] = false;
  // Pipeline parallelism: stage s's ranks send activations to stage s+1's
  // ranks of the same index while both stages wait for them (a rendezvous:
  // sim/platform/pipeline_stages.h), so the sends never meet those two
  // stages' all-reduces, but may meet any other group's.
  std::vector<uint8_t> sends;
  for (size_t i = 0; i < inst_.size(); ++i)
    for (size_t st = 0; st + 1 < inst_[i]->stage_plan.size(); ++st) {
      sends.assign(used.size(), 0);
      auto on = [&](size_t a, size_t b) {
        for (uint32_t s : p.route(a, b).stats) sends[s] = 1;
      };
      for (size_t r = 0; r < inst_[i]->stage_plan[st].gpus.size(); ++r) {
        const size_t a = inst_[i]->stage_plan[st].gpus[r], b = inst_[i]->stage_plan[st + 1].gpus[r];
        on(a, b);
      }
      for (const Group& g : groups) {
        if (g.instance == i && (g.stage == st || g.stage == st + 1)) continue;
        for (uint32_t s : g.links)
          if (sends[s]) alone[g.instance] = false;
      }
    }
  return alone;
}

// Each pipeline-parallel instance's stages, shared by its virtual engines:
// activations of pp_tensors x the hidden size per token.
void ClusterSimulation::build_stages() {
  const json& cl = cfg_["cluster"];
  if (cl["pp"].get<size_t>() < 2) return;
  json m = cfg_["model"];
  const LlmSpec whole = parse_llm(m, "model");
  const double per_token = double(whole.model_dim()) * whole.dtype_bytes * cl["pp_tensors"].get<double>();
  for (auto& in : inst_) {
    in->stages = std::make_unique<PipelineStages>(*platform_, *timeline_, in->stage_plan, per_token,
                                                  cl["pp_buffer_MiB"].get<double>() * 1048576.0);
    for (size_t v = 0; v < in->engines(); ++v) in->engine(v).pipeline_stages(in->stages.get());
  }
}

json ClusterSimulation::run(const std::string& timeline_path) {
  start_simgrid();
  const EngineSetup& s0 = inst_[0]->sim->setup();
  const json& cl = cfg_["cluster"];
  // Every GPU of an instance (each stage's tensor-parallel ranks) makes its
  // share of every copy.
  const size_t tp = cl["tp"].get<size_t>();
  const size_t ranks = tp * cl["pp"].get<size_t>();
  std::vector<std::vector<std::vector<size_t>>> parts;  // per instance: each device's part on ranks 1..T-1
  if (ranks > 1) parts = rank_parts(ranks);
  // Copies fold (one flow for every rank's) where nothing else runs a flow
  // per rank beside them: no pipeline stages handing activations over, the
  // all-reduces closed forms (checked below, once the platform exists), and
  // between nodes only over a star fabric.
  const bool fold = ranks > 1 && cl["fold_ranks"].get<bool>() && cl["pp"].get<size_t>() == 1 &&
                    cfg_["serving"]["coarsen"].get<bool>() &&
                    (s0.hw.nodes() == 1 || s0.hw.cluster.fabric.topology == FabricTopology::Star);
  const auto pairs = fold ? fold_pairs(parts) : std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>>{};
  std::vector<std::vector<size_t>> layouts;
  for (const auto& [a, b] : pairs) {
    layouts.push_back(a);
    layouts.push_back(b);
  }
  platform_ = std::make_unique<Platform>(s0.hw, *s0.topo, std::move(layouts));
  platform_->set_request_bytes(double(s0.model.kv_bytes_per_token()) * get_int(cfg_["workload"], "block_tokens"));
  timeline_ = std::make_unique<Timeline>();
  if (!timeline_path.empty()) timeline_->open(timeline_path);
  if (ranks > 1) {
    json m = cfg_["model"];
    const LlmSpec whole = parse_llm(m, "model");
    const double hidden = double(whole.model_dim()) * whole.dtype_bytes;
    for (size_t i = 0; i < inst_.size(); ++i) {
      Instance& in = *inst_[i];
      // The all-reduces run among the first stage's ranks (each stage's among its own: sim/platform/pipeline_stages.h).
      const std::vector<size_t> group(in.gpus.begin(), in.gpus.begin() + static_cast<std::ptrdiff_t>(tp));
      for (size_t v = 0; v < in.engines(); ++v)
        in.engine(v).tensor_parallel(group, hidden, cl["allreduce"] == "switch",
                                     v + 1 < in.engines() ? parts[i] : std::move(parts[i]));
    }
    // serving.coarsen false: every all-reduce as flows, the reference the closed forms are checked against.
    if (cfg_["serving"]["coarsen"].get<bool>()) {
      const std::vector<bool> alone = allreduce_alone(cl["allreduce"] == "switch");
      const bool all_alone = std::find(alone.begin(), alone.end(), false) == alone.end();
      const bool folds = fold && all_alone && platform_->folds_all(pairs);
      for (size_t i = 0; i < inst_.size(); ++i)
        for (size_t v = 0; v < inst_[i]->engines(); ++v) {
          inst_[i]->engine(v).allreduce_alone(alone[i]);
          inst_[i]->engine(v).fold_ranks(fold && all_alone && folds);
        }
    }
  }
  std::vector<size_t> prefill_gpus;
  for (size_t i = 0; i < prefill_; ++i) prefill_gpus.push_back(inst_[i]->gpu_dev);
  std::vector<size_t> decode_gpus;
  for (size_t i = prefill_; i < inst_.size() && prefill_ > 0; ++i) decode_gpus.push_back(inst_[i]->gpu_dev);
  for (size_t i = prefill_; i < inst_.size() && prefill_ > 0 && !layerwise_; ++i)
    for (size_t v = 0; v < inst_[i]->engines(); ++v) inst_[i]->engine(v).pulls_from(prefill_gpus);
  for (size_t i = 0; i < prefill_ && layerwise_; ++i)
    for (size_t v = 0; v < inst_[i]->engines(); ++v) inst_[i]->engine(v).pushes_to(decode_gpus);
  if (pool_) connect_pool();
  build_stages();
  for (auto& in : inst_)
    for (size_t v = 0; v < in->engines(); ++v) in->engine(v).attach(*platform_, *timeline_);
  for (auto& st : platform_->stats()) st.track = timeline_->track(Timeline::Links, st.name);
  std::vector<ActorSpec> actors;
  for (auto& in : inst_)
    for (size_t v = 0; v < in->engines(); ++v) {
      ServingSimulation* sim = &in->engine(v);
      actors.push_back(ActorSpec{platform_->controller(),
                                 in->gpu + " serving" + (v > 0 ? " " + std::to_string(v) : std::string()),
                                 [sim] { sim->serve(); }});
    }
  actors.push_back(ActorSpec{platform_->controller(), "router", [this] { route_all(); }});
  run_simulation(std::move(actors));
  const double end = sim_now();
  json m = metrics(end);
  timeline_->close();
  return m;
}

}  // namespace kvtier
