#include "sim/engine/prefill_output.h"

#include <algorithm>
#include <cmath>

#include "sim/platform/platform.h"
#include "sim/platform/sim_clock.h"

namespace kvtier {

PrefillOutput::PrefillOutput(const EngineSetup& s, EngineCounters& c, KvStore& kv, JobBoard& board)
    : s_(s), c_(c), kv_(kv), t_(kv.table()), board_(board) {
  if (s_.gpu_tier)
    for (uint32_t l = 0; l < s_.model.layers; ++l) gpu_tier_fraction_ += s_.fraction(0, l) / s_.model.layers;
}

double PrefillOutput::gpu_tier_bytes() const {
  // Blocks still being written down from the GPU hold their memory until the write lands.
  const double blocks = static_cast<double>(t_.tiers[0].occupied_blocks()) + gpu_blocks_more_;
  return s_.gpu_tier ? blocks * static_cast<double>(t_.block_bytes) * gpu_tier_fraction_
                     : 0.0;
}

// Prompt KV computed on the GPU and still being written to its tier: drops
// the writes that have landed.
double PrefillOutput::staged_bytes() {
  while (!staged_.empty()) {
    const StagedWrites& w = staged_.front();
    for (JobId j : w.jobs)
      if (!board_.done(j)) return staged_sum_;
    staged_sum_ -= w.bytes;
    staged_.pop_front();
  }
  staged_sum_ = 0;  // no rounding left behind
  return 0;
}

// How many sequences, from s0, the next prefill kernel of this layer runs,
// each writing up to `per_seq` bytes below the GPU. All that are left if
// their output fits in the GPU memory the GPU tier and the writes still
// draining leave. Else double-buffered: kernels of half the memory the tier
// leaves, each once the writes before it leave it room, so that one
// kernel's output is written while the next computes. If the tier leaves
// less than two sequences' output, it gives up blocks (demoted by its
// eviction policy) for the rest of prefill: the output's buffers and the
// tier share one memory.
uint32_t PrefillOutput::chunk(uint32_t s0, double per_seq) {
  const uint32_t left = s_.batch - s0;
  auto budget = [&] { return s_.gpu_free_bytes - gpu_tier_bytes(); };
  auto room = [&] { return budget() - staged_bytes(); };
  if (per_seq <= 0 || double(left) * per_seq <= room()) return left;
  if (s_.gpu_tier && budget() < 2 * per_seq) {
    const double block = static_cast<double>(t_.block_bytes) * gpu_tier_fraction_;
    const uint64_t give = static_cast<uint64_t>(std::ceil((2 * per_seq - budget()) / block));
    // Blocks the tier cannot give up (pinned) keep their room; the staging
    // check at the end of the run reports an output that then does not fit.
    kv_.reserve_room(0, give);
  }
  const uint32_t k = static_cast<uint32_t>(std::max(1.0, std::min(double(left), std::floor(budget() / (2 * per_seq)))));
  while (!staged_.empty() && room() < k * per_seq) {
    const double t0 = sim_now();
    for (JobId j : staged_.front().jobs) board_.wait(j);
    c_.prefill_write_wait_s += sim_now() - t0;
  }
  return k;
}

void PrefillOutput::wait_rooms() {
  const double t0 = sim_now();
  for (JobId j : room_waits_) board_.wait(j);
  room_waits_.clear();
  c_.prefill_write_wait_s += sim_now() - t0;
}

void PrefillOutput::note(StagedWrites&& w) {
  if (w.bytes <= 0) return;
  const double staged = staged_bytes() + w.bytes;
  staged_sum_ = staged;
  staged_.push_back(std::move(w));
  c_.prefill_staging_peak_bytes = std::max(c_.prefill_staging_peak_bytes, staged);
  c_.gpu_kv_and_staging_peak_bytes = std::max(c_.gpu_kv_and_staging_peak_bytes, staged + gpu_tier_bytes());
}

}  // namespace kvtier
