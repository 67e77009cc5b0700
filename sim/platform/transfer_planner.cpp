#include "sim/platform/transfer_planner.h"

#include <unordered_map>
#include "sim/platform/pipeline_stages.h"
#include "sim/platform/weight_stream.h"

#include <algorithm>
#include <stdexcept>

namespace kvtier {

TransferPlanner::TransferPlanner(const EngineSetup& s, EngineCounters& c, Platform& platform, JobBoard& board,
                                 Timeline& timeline)
    : MoveSink(board.done_flags()), s_(s), c_(c), platform_(platform), board_(board), timeline_(timeline) {
  const size_t nt = s_.tiers();
  eps_ = nt + 1;
  batches_.assign(eps_ * eps_, Batch{});
  prefetch_batches_.assign(nt, Batch{});
}

void TransferPlanner::make_streams(const std::vector<std::pair<size_t, size_t>>& extra) {
  const Hardware& hw = s_.hw;
  const size_t gpu = s_.gpu_dev;
  streams_.clear();
  const bool one_engine = hw.devices[gpu].model->copy_engines() == 1;
  Stream* engine_in = nullptr;
  Stream* engine_out = nullptr;
  auto make = [&](const std::string& name) {
    owned_.push_back(std::make_unique<Stream>(name, platform_, board_, timeline_));
    return owned_.back().get();
  };
  auto want = [&](size_t a, size_t b) {
    if (find_stream(a, b)) return;
    if (one_engine && a != b && (a == gpu || b == gpu)) {
      const size_t other = a == gpu ? b : a;
      if (hw.devices[other].model->role() == DeviceRole::Memory) {
        Stream*& e = b == gpu ? engine_in : engine_out;
        if (!e) e = make(hw.gpu + (b == gpu ? " copy engine in" : " copy engine out"));
        streams_[pair_key(a, b)] = e;
        return;
      }
    }
    streams_[pair_key(a, b)] = make(a == b ? hw.devices[a].name + " work" : hw.devices[a].name + "->" + hw.devices[b].name);
  };
  std::vector<size_t> eps = s_.tier_dev;
  eps.push_back(gpu);
  for (size_t a : eps)
    for (size_t b : eps)
      if (a != b) want(a, b);
  if (s_.cpu_dev >= 0) want(static_cast<size_t>(s_.cpu_dev), static_cast<size_t>(s_.cpu_dev));
  // A CPU codec works through host memory (submit_through_host): the cores
  // read and write the compressed bytes where they are in host memory (a
  // drive's in the staging buffer) and the restored ones in the staging
  // buffer, which the GPU's copies read and write.
  if (s_.staging_dev >= 0 && s_.cpu_dev >= 0) {
    const size_t host = static_cast<size_t>(s_.staging_dev), cpu = static_cast<size_t>(s_.cpu_dev);
    auto copies = [&](size_t a, size_t b) {
      if (a != b) want(a, b);
    };
    for (size_t t = 0; t < s_.tiers(); ++t) {
      bool host_codec = false;
      for (uint32_t l = 0; l < s_.kv_layers(); ++l) {
        const CompressionSpec& c = s_.codec[t * s_.kv_layers() + l];
        host_codec = host_codec || (!c.on_gpu && c.stored_fraction() < 1.0);
      }
      const size_t d = s_.tier_dev[t];
      if (!host_codec || d == gpu) continue;
      const size_t packed = hw.devices[d].model->is_storage() ? host : d;
      copies(d, host);
      copies(host, d);
      copies(packed, cpu);
      copies(cpu, packed);
      copies(host, cpu);
      copies(cpu, host);
      copies(host, gpu);
      copies(gpu, host);
    }
  }
  if (s_.fpga_dev >= 0) want(static_cast<size_t>(s_.fpga_dev), static_cast<size_t>(s_.fpga_dev));
  // KV pulled from other GPUs (disaggregated prefill) comes in through one
  // stream, one pull at a time, in arrival order: a stream (an actor) per
  // source GPU gave a decode instance of a 64-prefill-instance cluster 512
  // actors, past what SimGrid's contexts can map.
  Stream* peer_in = nullptr;
  for (const auto& [a, b] : extra) {
    if (b == gpu && a != gpu && hw.devices[a].kind == "gpu" && !find_stream(a, b)) {
      if (!peer_in) peer_in = make(hw.gpu + " peer copies in");
      streams_[pair_key(a, b)] = peer_in;
    } else {
      want(a, b);
    }
  }
  mirror_streams();
  if (s_.weights && s_.weights->homes().dram >= 0) {
    const size_t host = static_cast<size_t>(s_.weights->homes().dram);
    const std::string& hn = hw.devices[host].name;
    act_in_ = one_engine ? find_stream(host, gpu) : make("activations " + hn + "->" + hw.gpu);
    act_out_ = one_engine ? find_stream(gpu, host) : make("activations " + hw.gpu + "->" + hn);
  }
}

// Each other rank's streams, shared between pairs as the first rank's are
// (one copy engine a direction). A rank's streams are its own even where
// its devices are another rank's too (two GPUs' shares written from one
// host memory to one drive): each rank's process copies its share at the
// same time as the others, not after them.
void TransferPlanner::mirror_streams() {
  if (mirrors_.empty()) return;
  const size_t ranks = mirrors_[s_.gpu_dev].size();
  rank_streams_.assign(ranks, {});
  // The first rank's pairs in (from, to) order, so that streams are made in
  // the same order every run.
  std::vector<std::pair<uint64_t, Stream*>> pairs(streams_.begin(), streams_.end());
  std::sort(pairs.begin(), pairs.end());
  for (size_t r = 0; r < ranks; ++r) {
    std::unordered_map<Stream*, Stream*> made;
    for (const auto& [k, st] : pairs) {
      const size_t a = static_cast<size_t>(k >> 32), b = static_cast<size_t>(k & 0xffffffffu);
      if (mirrors_[a].empty() || mirrors_[b].empty()) continue;
      const size_t ma = mirrors_[a][r], mb = mirrors_[b][r];
      if (rank_streams_[r].count(pair_key(ma, mb))) continue;
      Stream*& m = made[st];
      if (!m) {
        owned_.push_back(std::make_unique<Stream>(s_.hw.devices[ma].name + "->" + s_.hw.devices[mb].name, platform_,
                                                  board_, timeline_));
        m = owned_.back().get();
      }
      rank_streams_[r][pair_key(ma, mb)] = m;
    }
  }
}

Stream& TransferPlanner::activations(bool to_host) {
  Stream* st = to_host ? act_out_ : act_in_;
  if (!st) throw std::logic_error("kvtier: no activation stream (policies.weights has no host memory)");
  return *st;
}

void TransferPlanner::start() {
  for (auto& st : owned_) st->start();
  started_ = true;
}

Stream& TransferPlanner::move_stream(size_t from, size_t to, size_t rank) {
  std::unordered_map<uint64_t, Stream*>& map = rank == 0 ? streams_ : rank_streams_[rank - 1];
  if (const auto it = map.find(pair_key(from, to)); it != map.end()) return *it->second;
  if (!on_demand_) {
    if (rank == 0) return stream(from, to);  // throws: no such stream
    throw std::logic_error("kvtier: no stream " + s_.hw.devices[from].name + "->" + s_.hw.devices[to].name +
                           " for rank " + std::to_string(rank));
  }
  owned_.push_back(std::make_unique<Stream>(s_.hw.devices[from].name + "->" + s_.hw.devices[to].name, platform_, board_,
                                            timeline_));
  Stream* st = owned_.back().get();
  map[pair_key(from, to)] = st;
  if (started_) st->start();
  return *st;
}

void TransferPlanner::stop() {
  for (auto& st : owned_) st->stop();
}

Stream& TransferPlanner::stream(size_t from, size_t to) {
  Stream* st = find_stream(from, to);
  if (!st) throw std::logic_error("kvtier: no stream " + s_.hw.devices[from].name + "->" + s_.hw.devices[to].name);
  return *st;
}

// Per block moved (every promotion and write down): the common case, an
// open batch of this layer with no codec, nothing to wait for and nothing
// recorded, is its three sums and no more (no registers saved for the
// rest, which accumulate does out of line). The sums are accumulate's, in
// the same order, so the bytes are the same doubles.
JobId TransferPlanner::add(size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes, JobId wait_for) {
  Batch& bt = batches_[from_ep * eps_ + to_ep];
  if (bt.id == kNoJob || bt.layer != layer || bt.codec_Bps > 0 || recording_ || !board_.done(wait_for)) {
    accumulate(bt, from_ep, to_ep, layer, raw_bytes, wait_for);
    return bt.id;
  }
  bt.bytes += raw_bytes * bt.wire_f;
  bt.stored += raw_bytes * bt.stored_f;
  ++bt.pieces;
  return bt.id;
}

void TransferPlanner::open_layer(Batch& bt, size_t from_ep, size_t to_ep, uint32_t layer) const {
  const size_t n = s_.tiers();
  const size_t low = (from_ep == n) ? to_ep : (to_ep == n) ? from_ep : std::max(from_ep, to_ep);
  const size_t high = (from_ep == n || to_ep == n) ? n : std::min(from_ep, to_ep);
  const CompressionSpec& c = s_.codec[low * s_.kv_layers() + layer];
  const double f = c.stored_fraction();
  // A host (CPU) codec runs in host memory: between a compressed tier and
  // the GPU the compressed bytes go as far as the CPU and the uncompressed
  // ones cross PCIe (submit_through_host). A GPU codec (quantization, nvCOMP)
  // moves the compressed bytes all the way and runs on the GPU.
  const bool host_codec_at_gpu = f < 1.0 && !c.on_gpu && (high == n || (s_.gpu_tier && high == 0));
  bt.layer = layer;
  bt.wire_f = host_codec_at_gpu ? 1.0 : f;
  bt.stored_f = f;
  bt.host_codec_at_gpu = host_codec_at_gpu;
  bt.codec_Bps = 0;
  const bool high_plain = high == n || s_.fraction(high, layer) >= 1.0;
  if (f < 1.0 && high_plain) {
    const bool decompress = from_ep == low;
    bt.codec_Bps = decompress ? c.decompress_Bps : c.compress_Bps;
    bt.decompress = decompress;
    bt.threads = c.threads;
  }
}

// Per block: the factors are the batch's while its layer stays the same.
// Out of line: add's common case does not need it (above).
void TransferPlanner::accumulate(Batch& bt, size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes,
                                 JobId wait_for) {
  if (bt.id == kNoJob) bt.id = board_.create();
  if (bt.layer != layer) open_layer(bt, from_ep, to_ep, layer);
  bt.bytes += raw_bytes * bt.wire_f;
  bt.stored += raw_bytes * bt.stored_f;
  ++bt.pieces;
  if (bt.codec_Bps > 0) bt.codec_s += raw_bytes / bt.codec_Bps;
  if (!board_.done(wait_for)) {
    check_no_cycle(bt, wait_for);
    add_dep(bt.deps, wait_for);
  }
  if (recording_ && wait_for != kNoJob) add_dep(bt.asked, wait_for);
}

JobId TransferPlanner::add_run(size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes, uint32_t pieces,
                               const JobId* waits, size_t n) {
  Batch& bt = batches_[from_ep * eps_ + to_ep];
  accumulate(bt, from_ep, to_ep, layer, raw_bytes, n ? waits[0] : kNoJob);
  // Each piece's bytes in turn, as add() sums them (the same doubles).
  const double wire = raw_bytes * bt.wire_f, stored = raw_bytes * bt.stored_f;
  for (uint32_t p = 1; p < pieces; ++p) {
    bt.bytes += wire;
    bt.stored += stored;
    if (bt.codec_Bps > 0) bt.codec_s += raw_bytes / bt.codec_Bps;
  }
  bt.pieces += pieces - 1;
  for (size_t i = 1; i < n; ++i) {
    const JobId w = waits[i];
    if (!board_.done(w)) {
      check_no_cycle(bt, w);
      add_dep(bt.deps, w);
    }
    if (recording_ && w != kNoJob) add_dep(bt.asked, w);
  }
  return bt.id;
}

JobId TransferPlanner::add_prefetch(size_t from, uint32_t layer, double raw_bytes, JobId wait_for) {
  Batch& bt = prefetch_batches_[from];
  accumulate(bt, from, 0, layer, raw_bytes, wait_for);
  return bt.id;
}

void TransferPlanner::depend(size_t from_ep, size_t to_ep, JobId j) {
  depend_batch(batches_[from_ep * (s_.tiers() + 1) + to_ep], j);
}

void TransferPlanner::depend_prefetch(size_t from, JobId j) { depend_batch(prefetch_batches_[from], j); }

void TransferPlanner::depend_batch(Batch& bt, JobId j) {
  if (bt.id == kNoJob) return;
  if (j != kNoJob) check_no_cycle(bt, j);
  add_dep(bt.deps, j);
  if (recording_ && j != kNoJob) add_dep(bt.asked, j);
}

// Only direct cycles, two open batches each waiting for the other: the
// shape a block moved up and down within one layer's batches takes (a
// prefix-cache load written back before it landed and read up again:
// KvStore::load_cached), found with one look at the other batch's
// dependencies, on the path where a dependency is added only.
void TransferPlanner::check_no_cycle(const Batch& bt, JobId j) const {
  if (j == bt.id) return;
  const Batch* other = nullptr;
  for (const auto* v : {&batches_, &prefetch_batches_})
    for (const Batch& o : *v)
      if (o.id == j) other = &o;
  if (!other || std::find(other->deps.begin(), other->deps.end(), bt.id) == other->deps.end()) return;
  // A batch between the GPU's tier and the GPU moves nothing: submit
  // finishes it without waiting, so it closes no cycle.
  const auto [a_from, a_to] = batch_ends(bt);
  const auto [b_from, b_to] = batch_ends(*other);
  if (ep_dev(a_from) == ep_dev(a_to) || ep_dev(b_from) == ep_dev(b_to)) return;
  throw std::logic_error("kvtier: transfer planner: the open transfer " + endpoints(bt) + " of layer " +
                         std::to_string(bt.layer) + " would wait for the open transfer " + endpoints(*other) +
                         " of layer " + std::to_string(other->layer) +
                         ", which already waits for it: a dependency cycle (SimGrid would report a deadlock)");
}

std::pair<size_t, size_t> TransferPlanner::batch_ends(const Batch& bt) const {
  if (is_prefetch(bt)) return {static_cast<size_t>(&bt - prefetch_batches_.data()), 0};
  const size_t i = static_cast<size_t>(&bt - batches_.data());
  return {i / eps_, i % eps_};
}

// Tier names, with the endpoint numbers: where the GPU's memory is tier 0,
// the GPU is named twice (tier 0 and endpoint n, the staging buffers).
std::string TransferPlanner::endpoints(const Batch& bt) const {
  const size_t n = s_.tiers();
  const auto [from, to] = batch_ends(bt);
  auto name = [&](size_t ep) { return ep == n ? s_.hw.gpu : s_.hw.tiers[ep]; };
  return name(from) + "->" + name(to) + " (endpoints " + std::to_string(from) + "->" + std::to_string(to) +
         (is_prefetch(bt) ? ", predicted blocks)" : ")");
}

void TransferPlanner::open_ids(std::vector<JobId>& out) const {
  for (const auto& bt : batches_)
    if (bt.id != kNoJob) out.push_back(bt.id);
}

void TransferPlanner::settle() {
  for (auto& bt : batches_) {
    if (bt.id != kNoJob) board_.finish(bt.id);
    bt = Batch{};
  }
}

void TransferPlanner::submit(Batch& bt, size_t a, size_t b, bool critical, std::vector<JobId>* waits,
                             double* gpu_codec_s) {
  if (bt.id == kNoJob) return;
  if (recording_) issued_.push_back(Issued{a, b, critical && waits != nullptr, bt});
  const size_t n = s_.tiers();
  const size_t from = ep_dev(a), to = ep_dev(b);
  const bool on_gpu = s_.codec[std::max(a == n ? b : a, b == n ? a : b) * s_.kv_layers()].on_gpu;
  if (from == to) {  // GPU tier to GPU: nothing moves
    board_.finish(bt.id);
  } else if (bt.codec_s > 0 && !on_gpu && bt.host_codec_at_gpu) {
    submit_through_host(bt, a, b);
    if (critical && waits) waits->push_back(bt.id);
  } else {
    if (s_.hw.devices[to].model->is_storage()) record_write(b, bt.bytes);
    if (b == n || (s_.gpu_tier && b == 0)) c_.fetched_bytes += bt.bytes;
    if (b == n) staged_bytes_ += bt.bytes;
    // Codec work: on the GPU it joins the next attention kernel; on the
    // CPU it is its own job where the compressed data is, before a
    // compressing write to a lower tier and after a decompressing read
    // from one (between a compressed tier and the GPU, submit_through_host).
    const size_t cpu = static_cast<size_t>(s_.cpu_dev);
    JobId transfer_id = bt.id;
    if (bt.codec_s > 0 && !on_gpu) c_.cpu_codec_s += cpu_pool_s(bt);
    if (bt.codec_s > 0 && !on_gpu && !bt.decompress) {
      JobId cj = board_.create();
      TransferJob work{cj, 0, 0, 0, std::move(bt.deps), s_.cpu_dev, bt.codec_s, "compress"};
      work.threads = bt.threads;
      stream(cpu, cpu).submit(std::move(work));
      bt.deps = {cj};
    }
    TransferJob job{transfer_id, from, to, bt.bytes, std::move(bt.deps), -1, 0, "transfer"};
    // KV written from the GPU into pageable host memory (FlexGen's CPU
    // cache, or through it to disk) passes through the host's relay.
    if (s_.weights && !s_.weights->plan().pin_cache && from == s_.gpu_dev) job.relay_Bps = platform_.route(from, to).pageable_Bps;
    stream(from, to).submit(std::move(job));
    JobId ready = transfer_id;
    if (bt.codec_s > 0 && !on_gpu && bt.decompress) {
      ready = board_.create();
      TransferJob work{ready, 0, 0, 0, {transfer_id}, s_.cpu_dev, bt.codec_s, "decompress"};
      work.threads = bt.threads;
      stream(cpu, cpu).submit(std::move(work));
    }
    if (bt.codec_s > 0 && on_gpu) {
      if (critical && gpu_codec_s) *gpu_codec_s += bt.codec_s;
      else gpu_codec_s_ += bt.codec_s;
    }
    if (critical && waits) waits->push_back(ready);
  }
  bt = Batch{};
}

// Between a tier a CPU codec stores compressed and the GPU, the data passes
// through host memory, and it is compressed as far as the CPU. A read: the
// CPU's cores read the compressed bytes where they are in host memory (a
// drive first reads them into the staging buffer; a DRAM or CXL tier is
// read in place, over its own link), restore them into the staging buffer,
// and the GPU's copy takes them from there uncompressed. A write runs the
// other way. Each block is its own codec frame, so the stages overlap block
// by block, as double-buffered I/O does with its reads in flight together.
// The stages run as one activity each, side by side (sharing links and
// cores as they would), and the transfer is done when all are, plus the
// pipeline's fill: with K blocks and stage times s_i as they ran, sum(s) / K
// + (K - 1) / K x max(s), from max(s) (many blocks) to sum(s) (one block,
// store and forward).
void TransferPlanner::submit_through_host(Batch& bt, size_t a, size_t b) {
  const size_t n = s_.tiers();
  const bool read = b == n || (s_.gpu_tier && b == 0);
  const size_t tier_dev = ep_dev(read ? a : b), gpu = ep_dev(read ? b : a);
  const bool drive = s_.hw.devices[tier_dev].model->is_storage();
  const size_t staging = static_cast<size_t>(s_.staging_dev);
  const size_t cpu = static_cast<size_t>(s_.cpu_dev);
  // Where the cores find (or leave) the compressed bytes.
  const size_t packed = drive ? staging : tier_dev;
  const char* codec = read ? "decompress" : "compress";
  std::vector<JobId> stages;
  auto copy = [&](size_t from, size_t to, double bytes) {
    if (from == to) return;  // the staging buffer is the CPU's own memory: no copy
    const JobId id = board_.create();
    stream(from, to).submit(TransferJob{id, from, to, bytes, bt.deps, -1, 0, "transfer"});
    stages.push_back(id);
  };
  auto work = [&] {
    const JobId id = board_.create();
    TransferJob job{id, 0, 0, 0, bt.deps, s_.cpu_dev, bt.codec_s, codec};
    job.threads = bt.threads;
    stream(cpu, cpu).submit(std::move(job));
    stages.push_back(id);
  };
  c_.cpu_codec_s += cpu_pool_s(bt);
  if (read) {
    if (drive) copy(tier_dev, staging, bt.stored);
    copy(packed, cpu, bt.stored);
    work();
    copy(cpu, staging, bt.bytes);
    copy(staging, gpu, bt.bytes);
    c_.fetched_bytes += bt.bytes;
    if (b == n) staged_bytes_ += bt.bytes;
  } else {
    copy(gpu, staging, bt.bytes);
    copy(staging, cpu, bt.bytes);
    work();
    copy(cpu, packed, bt.stored);
    if (drive) {
      copy(staging, tier_dev, bt.stored);
      record_write(b, bt.stored);
    }
  }
  const double k = std::max<uint32_t>(1, bt.pieces);
  const JobId done = bt.id;
  JobBoard& board = board_;
  sg4::Actor::create("through host", platform_.controller(), [&board, stages, k, done] {
    double sum = 0, mx = 0;
    for (JobId j : stages) {
      board.wait(j);
      sum += board.duration(j);
      mx = std::max(mx, board.duration(j));
    }
    const double fill = (sum - mx) / k;
    if (fill > 0) sg4::this_actor::sleep_for(fill);
    board.finish(done);
  });
}

// A CPU codec's time alone on the cores it gets: its threads beyond the
// cpu device's cores wait for one.
double TransferPlanner::cpu_pool_s(const Batch& bt) const {
  const double cores = std::max(1, s_.hw.devices[static_cast<size_t>(s_.cpu_dev)].model->cores());
  const double threads = bt.threads > 0 ? double(bt.threads) : cores;
  return bt.codec_s * threads / std::min(threads, cores);
}

void TransferPlanner::record_write(size_t tier, double bytes) {
  c_.ssd_bytes_written += bytes;
  c_.wear[tier].record_write(bytes);
}

const Platform::FoldedPair* TransferPlanner::fold_of(size_t from, size_t to) {
  const auto [it, fresh] = folds_.emplace(pair_key(from, to), nullptr);
  if (!fresh) return it->second;
  std::vector<size_t> a{from}, b{to};
  a.insert(a.end(), mirrors_[from].begin(), mirrors_[from].end());
  b.insert(b.end(), mirrors_[to].begin(), mirrors_[to].end());
  it->second = platform_.folded(a, b);
  return it->second;
}

const std::vector<std::pair<size_t, size_t>>* TransferPlanner::ends_of(size_t from, size_t to) {
  if (!platform_.has_views() || mirrors_.empty()) return nullptr;
  const auto [it, fresh] = ends_.emplace(pair_key(from, to), std::vector<std::pair<size_t, size_t>>{});
  if (fresh) {
    std::vector<size_t> a{from}, b{to};
    a.insert(a.end(), mirrors_[from].begin(), mirrors_[from].end());
    b.insert(b.end(), mirrors_[to].begin(), mirrors_[to].end());
    const std::vector<size_t> ea = platform_.fabric_ends(a), eb = platform_.fabric_ends(b);
    bool any = false;
    for (size_t r = 0; r < a.size(); ++r) {
      const bool across = platform_.across(a[r], b[r]);
      it->second.emplace_back(across ? ea[r] : a[r], across ? eb[r] : b[r]);
      any = any || it->second.back() != std::make_pair(a[r], b[r]);
    }
    if (!any) it->second.clear();
  }
  return it->second.empty() ? nullptr : &it->second;
}

JobId TransferPlanner::move(size_t from, size_t to, double bytes, std::vector<JobId> deps, const char* what,
                            int32_t layer) {
  const JobId j = board_.create();
  const size_t ranks = mirrors_.empty() ? 0 : mirrors_[s_.gpu_dev].size();
  const Platform::FoldedPair* fold = ranks > 0 && fold_ ? fold_of(from, to) : nullptr;
  if (ranks > 0 && !fold) {
    board_.expect(j, static_cast<uint32_t>(ranks + 1));
    const std::vector<std::pair<size_t, size_t>>* ends = ends_of(from, to);
    for (size_t r = 0; r < ranks; ++r) {
      TransferJob m{j, mirrors_[from][r], mirrors_[to][r], bytes, deps, -1, 0, what};
      m.layer = layer;
      Stream& st = move_stream(m.from, m.to, r + 1);
      if (ends) std::tie(m.from, m.to) = (*ends)[r + 1];
      st.submit(std::move(m));
    }
  }
  TransferJob job{j, from, to, bytes, std::move(deps), -1, 0, what};
  job.layer = layer;
  job.fold = fold;
  Stream& first = move_stream(from, to);
  // A folded copy's hosts stand for the first rank's devices (Platform::folded).
  if (!fold)
    if (const std::vector<std::pair<size_t, size_t>>* ends = ranks > 0 ? ends_of(from, to) : nullptr)
      std::tie(job.from, job.to) = (*ends)[0];
  first.submit(std::move(job));
  // Tiers are distinct devices (hardware.tiers lists each once): one tier wears.
  // Every rank's shard is written (the tier stands for its ranks' drives).
  if (s_.hw.devices[to].model->is_storage()) {
    bool own = false;
    for (size_t t = 0; t < s_.tiers(); ++t)
      if (s_.tier_dev[t] == to) {
        record_write(t, bytes * double(ranks + 1));
        own = true;
      }
    for (const auto& [dev, t] : wear_alias_)
      if (!own && dev == to) {
        record_write(t, bytes * double(ranks + 1));
        break;
      }
  }
  return j;
}

JobId TransferPlanner::move_ranks(size_t first, size_t count, size_t from, size_t to, double bytes,
                                  std::vector<JobId> deps, const char* what, int32_t layer) {
  const JobId j = board_.create();
  board_.expect(j, static_cast<uint32_t>(count));
  const std::vector<std::pair<size_t, size_t>>* ends = ends_of(from, to);
  for (size_t r = first; r < first + count; ++r) {
    TransferJob m{j, r == 0 ? from : mirrors_[from][r - 1], r == 0 ? to : mirrors_[to][r - 1], bytes, deps, -1, 0, what};
    m.layer = layer;
    Stream& st = move_stream(m.from, m.to, r);
    if (ends) std::tie(m.from, m.to) = (*ends)[r];
    st.submit(std::move(m));
  }
  return j;
}

JobId TransferPlanner::move_stage(const PipelineStages* stages, size_t stage, size_t from, size_t to, double bytes,
                                  const char* what, int32_t layer) {
  if (!stages) return move(from, to, bytes, {}, what, layer);
  const size_t tp = stages->stage(stage).gpus.size();
  return move_ranks(stage * tp, tp, from, to, bytes, {}, what, layer);
}

void TransferPlanner::flush(std::vector<JobId>* waits, double* gpu_codec_s) {
  const size_t n = s_.tiers();
  // Demand fetches first: streams are FIFO, so predicted blocks queue behind them.
  for (size_t a = 0; a <= n; ++a)
    for (size_t b = 0; b <= n; ++b) {
      const bool into_gpu = a != n && (b == n || (s_.gpu_tier && b == 0 && a > 0));
      submit(batches_[a * (n + 1) + b], a, b, into_gpu, waits, gpu_codec_s);
    }
  for (size_t t = 0; t < n; ++t) submit(prefetch_batches_[t], t, 0, false, waits, gpu_codec_s);
}

void TransferPlanner::reissue(const std::vector<Issued>& log, const std::vector<Asked>& asked,
                              std::vector<JobId>* waits, double* gpu_codec_s, std::vector<std::pair<JobId, JobId>>& ids) {
  const bool recording = recording_;
  recording_ = false;  // what is issued again is no layer 0's
  const size_t first = ids.size();
  for (const Issued& is : log) ids.emplace_back(is.batch.id, board_.create());
  size_t n = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    const Issued& is = log[i];
    Batch bt = is.batch;
    bt.id = ids[first + i].second;
    bt.deps.clear();
    bt.asked.clear();
    for (; n < asked.size() && asked[n].batch == i; ++n) {
      const Asked& a = asked[n];
      const JobId m = a.in_log != UINT32_MAX ? ids[first + a.in_log].second : a.job;
      if (!board_.done(m)) add_dep(bt.deps, m);
    }
    submit(bt, is.from_ep, is.to_ep, is.critical, is.critical ? waits : nullptr, gpu_codec_s);
  }
  if (n != asked.size()) throw std::logic_error("reissue: asked jobs out of the log's order");
  recording_ = recording;
}

}  // namespace kvtier
