// The transfer planner: a layer's block moves between two endpoints become
// one transfer (a Batch), submitted to the Stream of that device pair when
// the layer's planning is done. Endpoints are tiers 0..n-1 and the GPU as
// endpoint n (where the GPU's memory is a tier, tier 0 is the GPU too).
// Bytes on the wire are as stored in the lower tier of the two as far as the
// processor running the codec: crossing between a plain and a compressed
// tier costs a codec pass, on the CPU in host memory (compressed bytes
// between the tier and the CPU, uncompressed ones from there to the GPU) or
// on the GPU beside the next kernel (compressed bytes all the way).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <unordered_map>
#include <vector>

#include "sim/core/counters.h"
#include "sim/core/engine_setup.h"
#include "sim/core/job.h"
#include "sim/platform/streams.h"

namespace kvtier {

class PipelineStages;

class TransferPlanner final : public MoveSink {
 public:
  TransferPlanner(const EngineSetup& s, EngineCounters& c, Platform& platform, JobBoard& board, Timeline& timeline);

  // One stream per ordered pair of devices the engine moves data between,
  // one work queue per scoring/codec device (from == to), then `extra`
  // pairs. With one copy engine per direction, every copy between the GPU
  // and host-side memory of one direction goes through a single stream.
  void make_streams(const std::vector<std::pair<size_t, size_t>>& extra);
  // A tensor-parallel instance (before make_streams): `ranks[d]` are the
  // devices that play device d's part for ranks 1..T-1 (a rank's GPU for the
  // first rank's GPU, the host memory or drive nearest it for the first
  // rank's). Every move() then runs once per rank, each rank's shard on its
  // own devices and streams, at once; the move is done when all are.
  void mirror(std::vector<std::vector<size_t>> ranks) { mirrors_ = std::move(ranks); }
  // Every rank's part of a move() runs as one folded flow where the
  // platform can fold the ranks' layouts of its two ends (Platform::folded);
  // the same times, one SimGrid flow instead of one per rank.
  void fold_ranks(bool on) { fold_ = on; }
  // Writes into device `dev` (another instance's share of a KV pool, on a
  // drive like tier `tier`'s) wear as writes into that tier: this engine
  // wrote them.
  void wears_as(size_t dev, size_t tier) { wear_alias_.emplace_back(dev, tier); }
  // A move() between a pair without a stream makes the pair's stream then
  // (a KV pool's demotions between other instances' shares: which pairs a
  // run uses is known only as it runs, and a stream per possible pair is
  // instances squared actors).
  void streams_on_demand() { on_demand_ = true; }
  void start();
  void stop();  // streams end once their queues are drained
  Stream& stream(size_t from_dev, size_t to_dev);
  // A whole move from device `from` to device `to` outside the block
  // table's batches (serving's swaps, prefix loads and cache writes): one
  // transfer on that pair's stream after `deps`, named `what` on the
  // timeline, of layer `layer` (-1: all). Bytes written into a drive wear it.
  JobId move(size_t from, size_t to, double bytes, std::vector<JobId> deps, const char* what, int32_t layer = -1);
  // The same on ranks first .. first+count-1 only (a pipeline stage's
  // GPUs, rank 0 being the instance's first GPU), each its share to its
  // peer: a copy between GPUs, no drive written.
  JobId move_ranks(size_t first, size_t count, size_t from, size_t to, double bytes, std::vector<JobId> deps,
                   const char* what, int32_t layer = -1);
  // One pipeline stage's share of a move from the instance's first GPU to
  // another's: each of the stage's ranks its part to its peer (without
  // stages, every rank's: a whole move).
  JobId move_stage(const PipelineStages* stages, size_t stage, size_t from, size_t to, double bytes, const char* what,
                   int32_t layer = -1);
  // Hidden states, and CPU attention's query and output (policies.weights):
  // copies of activations, which FlexGen issues on the kernels' own CUDA
  // stream, so they queue apart from the KV's and the weights' transfers
  // (behind them only through a GPU's single copy engine).
  Stream& activations(bool to_host);

  size_t gpu_ep() const { return s_.tiers(); }
  // Adds `raw_bytes` (uncompressed) of a block of `layer` to the transfer
  // from endpoint from_ep to to_ep; the transfer waits for `wait_for`
  // (whatever is still moving the block) unless that is done.
  JobId add(size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes, JobId wait_for) override;
  // A predicted block of `layer` read from tier `from` into the GPU tier, off
  // the critical path; bytes and codec work as add().
  JobId add_prefetch(size_t from, uint32_t layer, double raw_bytes, JobId wait_for) override;
  JobId add_run(size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes, uint32_t pieces, const JobId* waits,
                size_t n) override;
  // The open transfer from_ep -> to_ep, if any, also waits for j.
  void depend(size_t from_ep, size_t to_ep, JobId j);
  // The open transfer of predicted blocks from tier `from`, if any, also waits for j.
  void depend_prefetch(size_t from, JobId j);
  // The ids of every open transfer.
  void open_ids(std::vector<JobId>& out) const;
  // Settles every open transfer without simulating it (KV assumed in place).
  void settle();
  // Submits every open transfer. Transfers into the GPU are the layer's
  // critical ones: what they end with goes to `waits` (if given), and GPU
  // codec work for them to `gpu_codec_s`; other GPU codec work waits for
  // the next kernel (take_gpu_codec_s).
  void flush(std::vector<JobId>* waits, double* gpu_codec_s);
  // Bytes submitted into the GPU endpoint (not its tier) since the last call:
  // what lands in staging buffers, held there until the kernel reading it ends.
  double take_staged_bytes() {
    const double b = staged_bytes_;
    staged_bytes_ = 0;
    return b;
  }
  double take_gpu_codec_s() {
    const double s = gpu_codec_s_;
    gpu_codec_s_ = 0;
    return s;
  }

  struct Batch;
  // A representative layer (serving.kv_layers): while recording, every batch
  // a flush submits is also kept as issued (its endpoints, whether it was
  // critical, its bytes, pieces and codec work, and every job it was asked
  // to wait for, done or not), so that another layer's can be issued again.
  struct Issued;
  void record(bool on) { recording_ = on; }
  // The batches issued since the last call.
  void take_issued(std::vector<Issued>& into) {
    into.swap(issued_);
    issued_.clear();
  }
  // A job logged batch `batch` was asked to wait for, as another layer's: a
  // batch of the same log (its index there), or a job named outright.
  struct Asked {
    uint32_t batch = 0;
    uint32_t in_log = UINT32_MAX;
    JobId job = kNoJob;
  };
  // Issues `log` again as another layer's: new jobs, each waiting for what
  // its original waited for as `asked` names it for that layer (in the
  // log's order of batches; those of its jobs not yet done), submitted
  // as a flush submits them (waits and GPU codec work as flush). Appends
  // (original, new) job pairs to `ids`, all of them made before any
  // dependency is named (a batch may wait for one issued after it).
  void reissue(const std::vector<Issued>& log, const std::vector<Asked>& asked, std::vector<JobId>* waits,
               double* gpu_codec_s, std::vector<std::pair<JobId, JobId>>& ids);

  struct Batch {
    JobId id = kNoJob;
    double bytes = 0;      // on the wire at the GPU's side (compressed where the tier stores compressed)
    double stored = 0;     // as the lower tier stores them
    uint32_t pieces = 0;   // blocks (or block parts) added
    double codec_s = 0;    // (de)compression work for these bytes
    bool decompress = false;
    bool host_codec_at_gpu = false;  // a CPU codec at the GPU's side: the copy moves uncompressed bytes
    uint32_t threads = 0;            // a CPU codec's threads (CompressionSpec::threads)
    std::vector<JobId> deps;
    // What a raw byte of `layer` adds (the codec of a tier pair and layer
    // does not change): on the wire, as stored, codec seconds.
    uint32_t layer = UINT32_MAX;
    double wire_f = 1, stored_f = 1, codec_Bps = 0;
    std::vector<JobId> asked;  // while recording: every job it was asked to wait for
  };
  struct Issued {
    size_t from_ep = 0, to_ep = 0;
    bool critical = false;
    Batch batch;
  };

 private:
  void mirror_streams();
  // The per-byte factors of bt for its endpoints and `layer`.
  void open_layer(Batch& bt, size_t from_ep, size_t to_ep, uint32_t layer) const;
  // The open batch bt, if any, also waits for j (kept as asked while recording).
  void depend_batch(Batch& bt, JobId j);
  // Throws std::logic_error if j is another open batch that waits for bt:
  // bt waiting for it too would be a cycle, which SimGrid reports only as a
  // deadlock with no hint of the batches or the layer.
  [[gnu::noinline]] void check_no_cycle(const Batch& bt, JobId j) const;
  // The endpoints of one of batches_ or prefetch_batches_, and as a message names them.
  std::pair<size_t, size_t> batch_ends(const Batch& bt) const;
  std::string endpoints(const Batch& bt) const;
  bool is_prefetch(const Batch& bt) const {
    return &bt >= prefetch_batches_.data() && &bt < prefetch_batches_.data() + prefetch_batches_.size();
  }
  [[gnu::noinline]] void accumulate(Batch& bt, size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes,
                                    JobId wait_for);
  void submit(Batch& bt, size_t a, size_t b, bool critical, std::vector<JobId>* waits, double* gpu_codec_s);
  void submit_through_host(Batch& bt, size_t a, size_t b);
  double cpu_pool_s(const Batch& bt) const;
  // `bytes` written into tier `tier` (whose device is a drive): its flash wears.
  void record_write(size_t tier, double bytes);
  size_t ep_dev(size_t ep) const { return ep == s_.tiers() ? s_.gpu_dev : s_.tier_dev[ep]; }

  const EngineSetup& s_;
  std::vector<std::vector<size_t>> mirrors_;  // by device: its part on ranks 1..T-1 (empty: one rank)
  std::vector<std::pair<size_t, size_t>> wear_alias_;  // (device, tier): see wears_as
  bool on_demand_ = false;
  bool fold_ = false;
  // By (from, to) device: the folded pair of their layouts, or nullptr.
  std::unordered_map<uint64_t, const Platform::FoldedPair*> folds_;
  const Platform::FoldedPair* fold_of(size_t from, size_t to);
  // Each rank's ends of a copy from `from` to `to` (rank 0's first), where
  // the platform routes some rank's copy between nodes through an adapter
  // view (Platform::fabric_ends); null where every rank's ends are its devices.
  const std::vector<std::pair<size_t, size_t>>* ends_of(size_t from, size_t to);
  std::unordered_map<uint64_t, std::vector<std::pair<size_t, size_t>>> ends_;
  bool started_ = false;
  // The stream of (from, to) for rank `rank` (0: the first rank's, shared
  // with the planner's other uses).
  Stream& move_stream(size_t from, size_t to, size_t rank = 0);
  EngineCounters& c_;
  Platform& platform_;
  JobBoard& board_;
  Timeline& timeline_;
  std::vector<std::unique_ptr<Stream>> owned_;
  // By (from, to) device, only the pairs a run copies between (a table of
  // every pair is 16 million entries on a 4,096-device cluster); pairs may
  // share a stream (GPU copy engines).
  std::unordered_map<uint64_t, Stream*> streams_;
  std::vector<std::unordered_map<uint64_t, Stream*>> rank_streams_;  // ranks 1..T-1: theirs, by (from, to)
  static uint64_t pair_key(size_t from, size_t to) { return (uint64_t(from) << 32) | uint64_t(to); }
  Stream* find_stream(size_t from, size_t to) const {
    const auto it = streams_.find(pair_key(from, to));
    return it == streams_.end() ? nullptr : it->second;
  }
  Stream* act_in_ = nullptr;      // activations host -> GPU
  Stream* act_out_ = nullptr;     // activations GPU -> host
  std::vector<Batch> batches_;           // (n+1) x (n+1) endpoints
  size_t eps_ = 0;                       // n+1: a row of batches_ (add's index, per block)
  std::vector<Batch> prefetch_batches_;  // per tier: predicted blocks
  double gpu_codec_s_ = 0;               // GPU codec work waiting for the next kernel
  double staged_bytes_ = 0;              // into the GPU endpoint, since take_staged_bytes
  bool recording_ = false;
  std::vector<Issued> issued_;
};

}  // namespace kvtier
