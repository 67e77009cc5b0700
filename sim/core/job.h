// Jobs: the unit of simulated work the engine waits on (a transfer, a
// kernel, a codec pass), named by an id. The KV store decides what must
// move and hands each move to a MoveSink; the transfer planner
// (sim/platform/) is the sink of a real run, a recording sink the sink of a
// unit test, so the store needs no SimGrid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvtier {

using JobId = uint32_t;
constexpr JobId kNoJob = 0;

// Adds j to deps unless it is no job or already the last one there.
inline void add_dep(std::vector<JobId>& deps, JobId j) {
  if (j != kNoJob && (deps.empty() || deps.back() != j)) deps.push_back(j);
}

// Where the KV store's moves go. Endpoints are tiers 0..n-1 and the GPU as
// endpoint n.
class MoveSink {
 public:
  virtual ~MoveSink() = default;
  // `raw_bytes` (uncompressed) of a block of `layer` move from endpoint
  // from_ep to to_ep once `wait_for` (whatever is still moving the block)
  // is done; the job that moves them.
  virtual JobId add(size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes, JobId wait_for) = 0;
  // A predicted block of `layer` read from tier `from` into the GPU tier
  // (endpoint 0), off the critical path; the job that moves it.
  virtual JobId add_prefetch(size_t from, uint32_t layer, double raw_bytes, JobId wait_for) = 0;
  // A run of `pieces` blocks of `layer`, `raw_bytes` each, moving from
  // from_ep to to_ep as one copy once every job of waits[0..n) (what was
  // still moving each block) is done: add() of each block in turn.
  virtual JobId add_run(size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes, uint32_t pieces,
                        const JobId* waits, size_t n) = 0;
  // Whether job j has finished (kNoJob has). Asked several times for every
  // block moved, so it reads the sink's flags inline rather than through a
  // virtual call.
  bool done(JobId j) const { return (*done_)[j] != 0; }

 protected:
  // `done_flags[j]` is nonzero once job j has finished; kNoJob's (index 0)
  // is set, and every job a sink hands out has its entry.
  explicit MoveSink(const std::vector<uint8_t>& done_flags) : done_(&done_flags) {}

 private:
  const std::vector<uint8_t>* done_;
};

}  // namespace kvtier
