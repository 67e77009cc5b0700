#include "sim/engine.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sim/config.h"
#include "traces/synthetic.h"

namespace kvtier {

namespace {
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least q of the samples at or below it.
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}
}  // namespace

Simulation::~Simulation() = default;

Simulation::Simulation(json& cfg) : cfg_(cfg) {
  hw_ = parse_hardware(cfg_["hardware"], "hardware");
  topo_ = std::make_unique<Topology>(hw_);
  model_ = parse_llm(cfg_["model"], "model");
  const json& w = cfg_["workload"];
  batch_ = static_cast<uint32_t>(get_int(w, "batch"));
  ctx_ = static_cast<uint32_t>(get_int(w, "context_tokens"));
  steps_ = static_cast<uint32_t>(get_int(w, "decode_steps"));
  bt_ = static_cast<uint32_t>(get_int(w, "block_tokens"));
  prefill_compute_ = w["prefill"] == "compute";

  json& pol = cfg_["policies"];
  const json defaults = {{"eviction", "lru"}, {"promotion", "on_access"}, {"placement", "top"},
                         {"prefetch", "none"}, {"evaluation", "trace"}};
  for (auto it = pol.begin(); it != pol.end(); ++it)
    if (!defaults.contains(it.key()) && !is_annotation_key(it.key())) {
      std::vector<std::string> fams;
      for (auto d = defaults.begin(); d != defaults.end(); ++d) fams.push_back(d.key());
      std::string hint = nearest(it.key(), fams);
      throw ConfigError("policies." + it.key() + ": unknown policy family" +
                        (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
  for (auto d = defaults.begin(); d != defaults.end(); ++d)
    if (!pol.contains(d.key())) pol[d.key()] = *d;
  evict_ = Registry<EvictionPolicy>::instance().create(pol["eviction"], "policies.eviction");
  promote_ = Registry<PromotionPolicy>::instance().create(pol["promotion"], "policies.promotion");
  place_ = Registry<PlacementPolicy>::instance().create(pol["placement"], "policies.placement");
  prefetch_ = Registry<PrefetchPolicy>::instance().create(pol["prefetch"], "policies.prefetch");
  eval_ = Registry<EvaluationPolicy>::instance().create(pol["evaluation"], "policies.evaluation");

  // The trace.
  const uint64_t seed = cfg_["sim"]["seed"].get<uint64_t>();
  json& tr = cfg_["workload"]["trace"];
  const std::string kind = tr.value("kind", "");
  if (kind == "synthetic") {
    trace_ = std::make_unique<SyntheticAttention>(tr, "workload.trace", model_.layers, ctx_, steps_, bt_, seed);
    trace_name_ = "synthetic trace";
  } else if (kind == "file") {
    resolve_params(tr, {str("path", nullptr, "attention trace file (format v1, docs/formats.md)")}, "workload.trace",
                   {"kind"});
    std::string path = find_data_file(tr["path"].get<std::string>(), "", "workload.trace.path");
    trace_ = std::make_unique<JsonlAttentionReader>(path);
    trace_name_ = path;
    const auto& h = trace_->header();
    auto check = [&](const char* what, uint64_t in_trace, uint64_t in_cfg, const char* key, bool at_least) {
      if (at_least ? in_trace < in_cfg : in_trace != in_cfg)
        throw ConfigError(path + ": the trace has " + what + " " + std::to_string(in_trace) + " but " + key + " is " +
                          std::to_string(in_cfg));
    };
    check("layers", h.layers, model_.layers, "model.layers", false);
    check("block_tokens", h.block_tokens, bt_, "workload.block_tokens", false);
    check("context_tokens", h.context_tokens, ctx_, "workload.context_tokens", false);
    check("steps", h.steps, steps_, "workload.decode_steps (at most)", true);
  } else if (kind == "none") {
    if (pol["evaluation"]["name"] == "trace")
      throw ConfigError("workload.trace: kind \"none\" needs policies.evaluation other than \"trace\"");
  } else {
    throw ConfigError("workload.trace.kind: expected \"synthetic\", \"file\" or \"none\", got " + tr.value("kind", json()).dump());
  }

  // Blocks and tiers.
  gpu_dev_ = static_cast<size_t>(hw_.device_index(hw_.gpu));
  const DeviceModel& gpu = *hw_.devices[gpu_dev_].model;
  gpu_flops_ = gpu.flops();
  gpu_mem_Bps_ = gpu.memory_Bps();
  gpu_launch_s_ = gpu.launch_overhead_s();
  if (gpu_flops_ <= 0 || gpu_mem_Bps_ <= 0)
    throw ConfigError("hardware.gpu: device '" + hw_.gpu + "' cannot run attention (no FLOP/s or memory bandwidth)");
  t_.batch = batch_;
  t_.layers = model_.layers;
  t_.block_tokens = bt_;
  t_.blocks_per_seq_layer = blocks_at(steps_ - 1);
  t_.block_bytes = uint64_t(bt_) * model_.kv_bytes_per_token_layer();
  const double bb = static_cast<double>(t_.block_bytes);
  const uint64_t total_blocks = uint64_t(batch_) * model_.layers * t_.blocks_per_seq_layer;
  if (total_blocks >= kNoBlock) throw ConfigError("workload: too many KV blocks (" + std::to_string(total_blocks) + ")");
  uint64_t capacity_blocks = 0;
  for (size_t i = 0; i < hw_.tiers.size(); ++i) {
    size_t d = static_cast<size_t>(hw_.device_index(hw_.tiers[i]));
    tier_dev_.push_back(d);
    double cap = hw_.devices[d].model->capacity_bytes();
    std::string why;
    if (d == gpu_dev_) {
      gpu_tier_ = true;
      cap -= model_.weight_bytes();
      why = " after " + std::to_string(model_.weight_bytes() / 1e9) + " GB of weights";
    }
    TierInfo ti;
    ti.name = hw_.tiers[i];
    ti.kind = hw_.devices[d].kind;
    ti.capacity_blocks = cap > 0 ? static_cast<uint64_t>(cap / bb) : 0;
    if (ti.capacity_blocks == 0)
      throw ConfigError("hardware.devices." + ti.name + ": capacity" + why + " holds no KV block of " +
                        std::to_string(t_.block_bytes) + " bytes (" + std::to_string(bt_) + " tokens)");
    capacity_blocks += ti.capacity_blocks;
    t_.tiers.push_back(ti);
  }
  if (t_.tiers.size() >= kDropped) throw ConfigError("hardware.tiers: too many tiers");
  if (!gpu_tier_ && model_.weight_bytes() > gpu.capacity_bytes())
    throw ConfigError("hardware.devices." + hw_.gpu + ": the model's weights (" + std::to_string(model_.weight_bytes() / 1e9) +
                      " GB) do not fit in the GPU");
  if (!evict_->drops() && total_blocks > capacity_blocks)
    throw ConfigError("hardware.tiers: the KV needs " + std::to_string(total_blocks) + " blocks of " +
                      std::to_string(t_.block_bytes) + " bytes but the tiers hold " + std::to_string(capacity_blocks) +
                      "; add capacity or use an eviction policy that drops");
  // Every route the engine may use must exist; this also reports unreachable devices now.
  for (size_t d : tier_dev_)
    if (d != gpu_dev_) {
      topo_->route(d, gpu_dev_);
      topo_->route(gpu_dev_, d);
    }
  for (size_t i = 0; i + 1 < tier_dev_.size(); ++i) topo_->route(tier_dev_[i], tier_dev_[i + 1]);

  t_.tier.assign(total_blocks, kNotCreated);
  t_.last_access.assign(total_blocks, 0);
  t_.access_count.assign(total_blocks, 0);
  t_.mass.assign(total_blocks, 0.f);
  t_.last_mass.assign(total_blocks, 0.f);
  t_.created.assign(total_blocks, 0);
  t_.dirty.assign(total_blocks, 0);
  evict_->setup(t_);
  promote_->setup(t_);
  place_->setup(t_);
  prefetch_->setup(t_);
  eval_->setup(t_);
}

Stream& Simulation::stream(size_t from, size_t to) {
  const size_t n = hw_.devices.size();
  auto& s = streams_[from * n + to];
  if (!s) throw std::logic_error("kvtier: no stream " + hw_.devices[from].name + "->" + hw_.devices[to].name);
  return *s;
}

void Simulation::add_dep(std::vector<JobId>& deps, JobId j) {
  if (j != kNoJob && (deps.empty() || deps.back() != j)) deps.push_back(j);
}

void Simulation::move(BlockId b, TierId from, TierId to) {
  evict_->on_remove(b, from);
  --t_.tiers[from].used_blocks;
  t_.tier[b] = to;
  auto& ti = t_.tiers[to];
  if (++ti.used_blocks > peak_blocks_[to]) peak_blocks_[to] = ti.used_blocks;
  evict_->on_insert(b, to);
}

void Simulation::demote(BlockId v, TierId from) {
  JobId& j = move_job_[from];
  if (j == kNoJob) j = board_->create();
  move_bytes_[from] += static_cast<double>(t_.block_bytes);
  if (!board_->done(pending_[v])) add_dep(move_deps_[from], pending_[v]);
  move(v, from, static_cast<TierId>(from + 1));
  pending_[v] = j;
  ++demoted_blocks_;
}

bool Simulation::make_room(TierId t) {
  while (t_.tiers[t].used_blocks >= t_.tiers[t].capacity_blocks) {
    BlockId v = evict_->victim(t);
    if (v == kNoBlock) return false;
    if (evict_->drops()) {
      evict_->on_remove(v, t);
      --t_.tiers[t].used_blocks;
      t_.tier[v] = kDropped;
      ++dropped_blocks_;
      continue;
    }
    if (t + 1u >= t_.tiers.size() || !make_room(static_cast<TierId>(t + 1))) return false;
    demote(v, t);
  }
  return true;
}

void Simulation::flush_moves() {
  for (size_t t = 0; t + 1 < t_.tiers.size(); ++t) {
    if (move_job_[t] == kNoJob) continue;
    const size_t to = tier_dev_[t + 1];
    if (hw_.devices[to].model->is_storage()) ssd_bytes_written_ += move_bytes_[t];
    stream(tier_dev_[t], to).submit(TransferJob{move_job_[t], tier_dev_[t], to, move_bytes_[t], std::move(move_deps_[t])});
    move_job_[t] = kNoJob;
    move_bytes_[t] = 0;
    move_deps_[t].clear();
  }
}

void Simulation::flush_writes() {
  for (size_t t = 0; t < t_.tiers.size(); ++t) {
    if (write_job_[t] == kNoJob) continue;
    const size_t to = tier_dev_[t];
    if (hw_.devices[to].model->is_storage()) ssd_bytes_written_ += write_bytes_[t];
    stream(gpu_dev_, to).submit(TransferJob{write_job_[t], gpu_dev_, to, write_bytes_[t], std::move(write_deps_[t])});
    write_job_[t] = kNoJob;
    write_bytes_[t] = 0;
    write_deps_[t].clear();
  }
}

// A new block: placement picks a tier, eviction makes room (trying lower
// tiers if every block of the chosen one is pinned).
void Simulation::allocate(BlockId b, TierId* tier_out) {
  TierId t = place_->place(b, t_);
  if (t >= t_.tiers.size()) throw std::logic_error("placement policy returned a tier that does not exist");
  while (!make_room(t)) {
    if (t + 1u >= t_.tiers.size())
      throw ConfigError("hardware.tiers: no room for a new KV block in any tier (all blocks pinned or tiers full)");
    ++t;
  }
  t_.tier[b] = t;
  t_.created[b] = t_.clock;
  if (++t_.tiers[t].used_blocks > peak_blocks_[t]) peak_blocks_[t] = t_.tiers[t].used_blocks;
  evict_->on_insert(b, t);
  *tier_out = t;
}

void Simulation::compute(double seconds) {
  const double t0 = sg4::Engine::get_clock();
  sg4::ExecPtr e = sg4::this_actor::exec_init(seconds * gpu_host_->get_speed());
  e->set_host(gpu_host_);
  e->start();
  e->wait();
  const double t1 = sg4::Engine::get_clock();
  gpu_busy_s_ += t1 - t0;
  if (timeline_->enabled()) timeline_->event(Timeline::Streams, gpu_track_, "compute", t0, t1, 0);
}

void Simulation::prefill() {
  const uint32_t ctx_blocks = (ctx_ + bt_ - 1) / bt_;
  const double T = ctx_;
  for (uint32_t l = 0; l < model_.layers; ++l) {
    t_.clock = 0;
    if (prefill_compute_) {
      // Weights once, every prompt token through them, causal attention over T^2/2 pairs.
      double flops = model_.weight_flops_per_token_layer() * T * batch_ +
                     2.0 * T * T * model_.heads * model_.head_dim * batch_;
      double bytes = model_.weight_bytes_per_layer() + T * batch_ * model_.kv_bytes_per_token_layer();
      compute(gpu_launch_s_ + std::max(flops / gpu_flops_, bytes / gpu_mem_Bps_));
    }
    for (uint32_t s = 0; s < batch_; ++s)
      for (uint32_t i = 0; i < ctx_blocks; ++i) {
        BlockId b = t_.id(s, l, i);
        TierId t;
        allocate(b, &t);
        if (!prefill_compute_ || (gpu_tier_ && t == 0)) continue;
        JobId& j = write_job_[t];
        if (j == kNoJob) j = board_->create();
        write_bytes_[t] += static_cast<double>(t_.block_bytes);
        pending_[b] = j;
      }
    if (prefill_compute_) {
      flush_writes();
      flush_moves();
    } else {
      // KV assumed in place: settle the moves without simulating them.
      for (size_t t = 0; t < t_.tiers.size(); ++t) {
        if (move_job_[t] != kNoJob) board_->finish(move_job_[t]);
        move_job_[t] = kNoJob;
        move_bytes_[t] = 0;
        move_deps_[t].clear();
      }
    }
  }
}

void Simulation::select(uint64_t k) {
  const uint32_t L = model_.layers;
  const uint32_t step = static_cast<uint32_t>(k / L), layer = static_cast<uint32_t>(k % L);
  t_.clock = k + 1;
  t_.step = step;
  t_.layer = layer;
  t_.now_s = sg4::Engine::get_clock();
  Slot& slot = ring_[k % ring_.size()];
  slot.waits.clear();
  const std::vector<uint32_t>* tb = nullptr;
  const std::vector<float>* tm = nullptr;
  double rec_mass = 0;
  if (trace_) {
    if (!trace_->next(rec_)) throw ConfigError(trace_name_ + ": ends before step " + std::to_string(step));
    tb = &rec_.blocks;
    tm = &rec_.mass;
    for (size_t i = 0; i < rec_.blocks.size(); ++i) {
      mass_of_[rec_.blocks[i]] = rec_.mass[i];
      rec_mass += rec_.mass[i];
    }
  }
  const uint32_t n = blocks_at(step);
  // The block that receives this step's token exists from the moment the
  // step is selected: attention reads the new token too.
  for (uint32_t s = 0; s < batch_; ++s) {
    BlockId nb = t_.id(s, layer, n - 1);
    if (t_.tier[nb] == kNotCreated) {
      TierId t;
      allocate(nb, &t);
    }
  }
  sel_.clear();
  // Pass 1: what attention uses, stamped first so that none of it is evicted
  // while pass 2 makes room.
  for (uint32_t s = 0; s < batch_; ++s) {
    idx_.clear();
    SelectInput in{step, layer, s, n, tb, tm};
    eval_->select(in, t_, idx_);
    total_mass_ += rec_mass;
    for (uint32_t i : idx_) {
      if (i >= n) throw std::logic_error("evaluation policy selected block " + std::to_string(i) + " of " + std::to_string(n));
      BlockId b = t_.id(s, layer, i);
      const float m = trace_ ? mass_of_[i] : 0.f;
      ++accesses_;
      if (t_.tier[b] == kDropped) {
        ++dropped_accesses_;
        continue;
      }
      used_mass_ += m;
      t_.last_access[b] = t_.clock;
      ++t_.access_count[b];
      t_.mass[b] += m;
      t_.last_mass[b] = m;
      evict_->on_access(b, t_.tier[b]);
      sel_.push_back(b);
    }
  }
  if (trace_)
    for (uint32_t b : rec_.blocks) mass_of_[b] = 0.f;

  // Pass 2: fetch what is below the GPU, one transfer per source tier.
  const double bb = static_cast<double>(t_.block_bytes);
  for (BlockId b : sel_) {
    const TierId t = t_.tier[b];
    ++hits_[t];
    if (gpu_tier_ && t == 0) {
      if (!board_->done(pending_[b])) slot.waits.push_back(pending_[b]);
      continue;
    }
    JobId& fj = fetch_job_[t];
    if (fj == kNoJob) fj = board_->create();
    fetch_bytes_[t] += bb;
    if (!board_->done(pending_[b])) add_dep(fetch_deps_[t], pending_[b]);
    if (gpu_tier_ && promote_->promote(b, t, t_) && make_room(0)) {
      move(b, t, 0);
      pending_[b] = fj;
      ++promoted_blocks_;
    }
  }
  for (size_t t = 0; t < t_.tiers.size(); ++t) {
    if (fetch_job_[t] == kNoJob) continue;
    fetched_bytes_ += fetch_bytes_[t];
    stream(tier_dev_[t], gpu_dev_)
        .submit(TransferJob{fetch_job_[t], tier_dev_[t], gpu_dev_, fetch_bytes_[t], std::move(fetch_deps_[t])});
    slot.waits.push_back(fetch_job_[t]);
    fetch_job_[t] = kNoJob;
    fetch_bytes_[t] = 0;
    fetch_deps_[t].clear();
  }
  flush_moves();
  slot.kv_blocks = sel_.size();
}

// The new token's KV of one layer: into the sequence's last block, which is
// allocated when the token starts a new block; written down if that block
// does not live on the GPU.
void Simulation::append(uint64_t k) {
  const uint32_t L = model_.layers;
  const uint32_t step = static_cast<uint32_t>(k / L), layer = static_cast<uint32_t>(k % L);
  const uint32_t token = ctx_ + step;
  const double tok_bytes = static_cast<double>(model_.kv_bytes_per_token_layer());
  for (uint32_t s = 0; s < batch_; ++s) {
    BlockId b = t_.id(s, layer, token / bt_);
    const TierId t = t_.tier[b];
    if (t == kDropped || (gpu_tier_ && t == 0)) continue;
    JobId& j = write_job_[t];
    if (j == kNoJob) j = board_->create();
    write_bytes_[t] += tok_bytes;
    if (!board_->done(pending_[b])) add_dep(write_deps_[t], pending_[b]);
    pending_[b] = j;
    t_.dirty[b] = 1;
  }
  flush_writes();
  flush_moves();
}

void Simulation::drive() {
  prefill();
  prefill_end_ = sg4::Engine::get_clock();
  decode_start_ = prefill_end_;
  const uint64_t N = uint64_t(steps_) * model_.layers;
  const uint64_t depth = prefetch_->depth();
  ring_.assign(depth + 1, Slot{});
  uint64_t next = 0;
  for (uint64_t k = 0; k < N; ++k) {
    t_.pin_stamp = k + 1;
    while (next < N && next <= k + depth) select(next++);
    Slot& slot = ring_[k % ring_.size()];
    for (JobId j : slot.waits) board_->wait(j);
    const double kv_bytes = static_cast<double>(slot.kv_blocks) * static_cast<double>(t_.block_bytes);
    const double tokens = static_cast<double>(slot.kv_blocks) * bt_;
    double flops = model_.weight_flops_per_token_layer() * batch_ + 4.0 * tokens * model_.heads * model_.head_dim;
    double bytes = model_.weight_bytes_per_layer() + kv_bytes;
    compute(gpu_launch_s_ + std::max(flops / gpu_flops_, bytes / gpu_mem_Bps_));
    append(k);
    if (k % model_.layers == model_.layers - 1) step_end_.push_back(sg4::Engine::get_clock());
  }
  for (auto& s : streams_)
    if (s) s->stop();
}

json Simulation::run(const std::string& timeline_path) {
  start_simgrid();
  platform_ = std::make_unique<Platform>(hw_, *topo_);
  board_ = std::make_unique<JobBoard>();
  timeline_ = std::make_unique<Timeline>();
  if (!timeline_path.empty()) timeline_->open(timeline_path);
  gpu_host_ = platform_->host(gpu_dev_);
  gpu_track_ = timeline_->track(Timeline::Streams, hw_.gpu + " compute");
  for (auto& st : platform_->stats()) st.track = timeline_->track(Timeline::Links, st.name);
  const size_t n = hw_.devices.size(), nt = t_.tiers.size();
  streams_.resize(n * n);
  auto want = [&](size_t a, size_t b) {
    if (a == b || streams_[a * n + b]) return;
    streams_[a * n + b] = std::make_unique<Stream>(hw_.devices[a].name + "->" + hw_.devices[b].name, *platform_, *board_, *timeline_);
  };
  for (size_t i = 0; i < nt; ++i) {
    want(tier_dev_[i], gpu_dev_);
    want(gpu_dev_, tier_dev_[i]);
    if (i + 1 < nt) want(tier_dev_[i], tier_dev_[i + 1]);
  }
  for (auto& s : streams_)
    if (s) s->start();
  pending_.assign(t_.size(), kNoJob);
  mass_of_.assign(t_.blocks_per_seq_layer, 0.f);
  fetch_bytes_.assign(nt, 0);
  move_bytes_.assign(nt, 0);
  write_bytes_.assign(nt, 0);
  fetch_job_.assign(nt, kNoJob);
  move_job_.assign(nt, kNoJob);
  write_job_.assign(nt, kNoJob);
  fetch_deps_.assign(nt, {});
  move_deps_.assign(nt, {});
  write_deps_.assign(nt, {});
  hits_.assign(nt + 1, 0);
  peak_blocks_.assign(nt, 0);

  // An exception must not escape an actor (SimGrid would abort): keep it,
  // end every actor, and rethrow once the engine has returned.
  std::exception_ptr failure;
  sg4::Actor::create(hw_.gpu + " compute", platform_->controller(), [this, &failure] {
    try {
      drive();
    } catch (...) {
      failure = std::current_exception();
      sg4::Actor::kill_all();
    }
  });
  sg4::Engine::get_instance()->run();
  if (failure) std::rethrow_exception(failure);
  const double end = sg4::Engine::get_clock();
  timeline_->close();

  // Metrics: names are the contract in shared/design/ARCHITECTURE.md.
  std::vector<double> lat;
  double prev = decode_start_;
  for (double e : step_end_) {
    lat.push_back(e - prev);
    prev = e;
  }
  const double decode_s = step_end_.empty() ? 0 : step_end_.back() - decode_start_;
  json m;
  m["simulated_time_s"] = end;
  m["decode_time_s"] = decode_s;
  m["decode_tokens_per_s"] = decode_s > 0 ? double(batch_) * steps_ / decode_s : 0.0;
  m["mean_step_latency_s"] = lat.empty() ? 0.0 : std::accumulate(lat.begin(), lat.end(), 0.0) / double(lat.size());
  m["p50_step_latency_s"] = percentile(lat, 0.50);
  m["p99_step_latency_s"] = percentile(lat, 0.99);
  // TTFT: the first token comes out of prefill; without simulated prefill it
  // is the first decode step.
  m["ttft_s"] = prefill_compute_ ? prefill_end_ : (lat.empty() ? 0.0 : lat.front());
  m["gpu_busy_fraction"] = end > 0 ? gpu_busy_s_ / end : 0.0;
  m["attention_recall"] = trace_ ? (total_mass_ > 0 ? used_mass_ / total_mass_ : 1.0)
                                 : (accesses_ ? 1.0 - double(dropped_accesses_) / double(accesses_) : 1.0);
  m["block_accesses"] = accesses_;
  m["blocks_promoted"] = promoted_blocks_;
  m["blocks_demoted"] = demoted_blocks_;
  m["blocks_dropped"] = dropped_blocks_;
  m["fetched_bytes"] = fetched_bytes_;
  m["ssd_bytes_written"] = ssd_bytes_written_;
  m["kv_block_bytes"] = t_.block_bytes;
  m["tiers"] = json::object();
  for (size_t t = 0; t < nt; ++t) {
    json& tj = m["tiers"][t_.tiers[t].name];
    tj["hit_rate"] = accesses_ ? double(hits_[t]) / double(accesses_) : 0.0;
    tj["peak_bytes"] = double(peak_blocks_[t]) * double(t_.block_bytes);
    tj["capacity_bytes"] = double(t_.tiers[t].capacity_blocks) * double(t_.block_bytes);
  }
  m["links"] = json::object();
  for (const auto& st : platform_->stats()) {
    json& lj = m["links"][st.name];
    lj["bytes"] = st.bytes;
    lj["busy_fraction"] = end > 0 ? st.busy_s / end : 0.0;
  }
  return m;
}

}  // namespace kvtier
