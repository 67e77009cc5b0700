// Invariants of a single-batch run, checked while it runs when asked for
// (`kvtier run --check-invariants`, or KVTIER_CHECK_INVARIANTS=1 in the
// environment: the test suite sets it for every test). A violation stops
// the run with InvariantError, naming the step, layer, block and tier.
//
//  - no tier holds more blocks (its own and copies) than its capacity;
//  - every block is in exactly one state: not created yet, dropped, or
//    resident in one tier, with copies only in tiers below it; the blocks
//    and copies counted in each tier are the tier's use;
//  - every block a step's attention uses that lives on the GPU is there,
//    and nothing is still moving it, when the layer's kernel starts;
//  - simulated time never decreases;
//  - every transfer submitted ran, over its route: the bytes each link
//    carried equal the bytes of the transfers routed over it. (SimGrid's
//    link-load plugin is no independent witness here: with CM02's bandwidth
//    factors and shared-duplex links its integrated usage differs from the
//    bytes carried by up to 20% on the presets.)
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "sim/core/checks.h"
#include "sim/core/engine_setup.h"
#include "sim/kv/kv_store.h"
#include "sim/platform/platform.h"
#include "sim/platform/streams.h"

namespace kvtier {

struct InvariantError : std::runtime_error {
  using std::runtime_error::runtime_error;
};


class InvariantChecker {
 public:
  InvariantChecker(const EngineSetup& s, const KvStore& kv, JobBoard& board, Platform& platform);
  ~InvariantChecker();
  void before_attention(uint32_t step, uint32_t layer, const std::vector<BlockId>& on_gpu);
  // `created_per_seq`: the blocks each sequence must have (serving, where
  // they differ); null: every sequence has blocks_at(step).
  void after_step(uint32_t step, const std::vector<uint32_t>* created_per_seq = nullptr);
  void at_end();

 private:
  [[noreturn]] void fail(const std::string& what) const;
  void check_time(const char* where);
  const EngineSetup& s_;
  const KvStore& kv_;
  JobBoard& board_;
  Platform& platform_;
  double last_t_ = 0;
  std::vector<uint64_t> count_;
  std::vector<double> submitted_;  // per link: bytes of the transfers routed over it
};

}  // namespace kvtier
