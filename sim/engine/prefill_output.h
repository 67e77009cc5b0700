// Prompt KV computed on the GPU and written below it (single-batch prefill,
// and serving iterations' prefill chunks): it stays in GPU memory until its
// write lands, beside the GPU tier's KV, so prefill runs a layer in kernels
// of as many sequences as that memory holds, and each kernel waits for the
// rooms its output takes to be written out first. Owns the writes still in
// flight and those waits; counts the peaks.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "sim/core/counters.h"
#include "sim/core/engine_setup.h"
#include "sim/core/job.h"
#include "sim/kv/kv_store.h"
#include "sim/platform/streams.h"

namespace kvtier {

class PrefillOutput {
 public:
  // Prompt KV computed in one prefill kernel and written below the GPU: the
  // writes carrying it, and its bytes.
  struct StagedWrites {
    std::vector<JobId> jobs;
    double bytes = 0;
  };
  PrefillOutput(const EngineSetup& s, EngineCounters& c, KvStore& kv, JobBoard& board);
  // How many sequences, from s0, the next prefill kernel of a layer runs,
  // each writing up to `per_seq` bytes below the GPU (waiting for earlier
  // writes to make room where it must).
  uint32_t chunk(uint32_t s0, double per_seq);
  // A kernel's output, held on the GPU until its writes land.
  void note(StagedWrites&& w);
  // The rooms handed out since the last call: the next kernel waits for the
  // writes out of them (wait_rooms).
  void take_room_waits() { kv_.take_room_waits(room_waits_); }
  void wait_rooms();
  double gpu_tier_bytes() const;  // the KV the GPU tier holds now
  // A representative layer (serving.kv_layers): the GPU tier's blocks of
  // the other layers as the full run has them now, beside the block table's.
  void represent_gpu_blocks(double more) { gpu_blocks_more_ = more; }

 private:
  // What is still being written; drops the writes that have landed.
  double staged_bytes();
  const EngineSetup& s_;
  EngineCounters& c_;
  KvStore& kv_;
  const BlockTable& t_;
  JobBoard& board_;
  double gpu_tier_fraction_ = 0;  // stored / raw bytes of a GPU tier block, over layers
  std::deque<StagedWrites> staged_;  // output still being written down, oldest first
  double staged_sum_ = 0;
  double gpu_blocks_more_ = 0;
  std::vector<JobId> room_waits_;  // writes out of the rooms the last kernel's output took
};

}  // namespace kvtier
