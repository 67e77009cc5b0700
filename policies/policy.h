// The policy families. Each is an interface plus a registry; an implementation
// is one file under policies/<family>/ with one KVTIER_REGISTER line.
//
// Lifecycle (after MQSim): construct from resolved params -> setup(table) once
// the shape is known -> event callbacks during the run.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "models/registry.h"
#include "policies/block_table.h"

namespace kvtier {

// Which block leaves a full tier, and whether it is demoted one tier down or
// dropped. Callbacks keep the policy's own order (lists, counters) current.
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual void setup(const BlockTable& table) = 0;
  virtual void on_insert(BlockId b, TierId t) = 0;  // b now lives in t
  virtual void on_access(BlockId b, TierId t) = 0;  // attention used b while in t
  virtual void on_remove(BlockId b, TierId t) = 0;  // b left t
  // A block to move out of full tier t, never a pinned one; kNoBlock if all
  // are pinned (the engine then streams instead of caching).
  virtual BlockId victim(TierId t) = 0;
  // True: victims are discarded (H2O, StreamingLLM) and their attention mass
  // is lost; false: they are demoted to the next tier down.
  virtual bool drops() const { return false; }
};
KVTIER_REGISTRY_FAMILY(EvictionPolicy, "eviction policy")

// Whether a block that attention reads from a lower tier moves up into the
// top tier (a cache) or is read through a staging buffer and stays (offload).
class PromotionPolicy {
 public:
  virtual ~PromotionPolicy() = default;
  virtual void setup(const BlockTable& table) { (void)table; }
  virtual bool promote(BlockId b, TierId from, const BlockTable& table) = 0;
};
KVTIER_REGISTRY_FAMILY(PromotionPolicy, "promotion policy")

// Where a newly allocated block (prefill or decode) goes.
class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual void setup(const BlockTable& table) { (void)table; }
  virtual TierId place(BlockId b, const BlockTable& table) = 0;
};
KVTIER_REGISTRY_FAMILY(PlacementPolicy, "placement policy")

// How far ahead (in layers) the engine selects and fetches: 0 fetches a
// layer's blocks only when the GPU reaches it; d overlaps the fetch for layer
// l+d with the compute of layer l.
class PrefetchPolicy {
 public:
  virtual ~PrefetchPolicy() = default;
  virtual void setup(const BlockTable& table) { (void)table; }
  virtual uint32_t depth() const = 0;
};
KVTIER_REGISTRY_FAMILY(PrefetchPolicy, "prefetch policy")

// What the evaluator is given for one (step, layer, sequence).
struct SelectInput {
  uint32_t step = 0, layer = 0, seq = 0;
  uint32_t n_blocks = 0;                          // blocks that exist now (0 .. n_blocks-1)
  const std::vector<uint32_t>* trace_blocks = nullptr;  // what attention used, per the trace (null: no trace)
  const std::vector<float>* trace_mass = nullptr;
};

// Importance evaluation: which blocks a step actually loads. Writes block
// indices (within the sequence and layer) to `out`, which the engine clears.
class EvaluationPolicy {
 public:
  virtual ~EvaluationPolicy() = default;
  virtual void setup(const BlockTable& table) { (void)table; }
  virtual void select(const SelectInput& in, const BlockTable& table, std::vector<uint32_t>& out) = 0;
};
KVTIER_REGISTRY_FAMILY(EvaluationPolicy, "evaluation policy")

}  // namespace kvtier
