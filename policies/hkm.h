// HillInfer's hierarchical KV management (HKM), the pieces shared by the
// eviction, promotion and placement policies named "hkm":
//  - the hit-rate table: per block, a 16-bit history of the last 16 decode
//    steps (bit i set: attention used the block i steps ago); the hit rate
//    over a window of W <= 16 steps is popcount / W. HillInfer keeps 2 bytes
//    per token; we keep 2 bytes per block (all tokens of a block share it)
//    plus, as simulator bookkeeping, the step of the last update so the
//    history is shifted lazily. table_bytes() reports the paper's 2 B/token
//    so the engine can charge that memory to DRAM.
//  - time pinning: the newest alpha fraction of each (seq, layer)'s blocks
//    ("sequence" basis, as the issue asks), or the newest
//    alpha x warm-capacity / (batch x layers) blocks of each ("capacity"
//    basis, the seed's "alpha ~ 15% of capacity"), stay in the warm tier.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "models/param.h"
#include "policies/block_table.h"
#include "policies/common.h"

namespace kvtier {

class HitRateTable {
 public:
  void setup(size_t blocks, uint32_t window) {
    bits_.assign(blocks, 0);
    last_.assign(blocks, 0);
    window_ = window < 1 ? 1 : (window > 16 ? 16 : window);
    mask_ = window_ == 16 ? 0xFFFFu : uint16_t((1u << window_) - 1u);
  }
  // Attention used b at `step` (idempotent within a step).
  void hit(BlockId b, uint32_t step) {
    bits_[b] = uint16_t(history(b, step) | 1u);
    if (step > last_[b]) last_[b] = step;
  }
  // The 16-step history as seen at `step` (bit 0 = this step).
  uint16_t history(BlockId b, uint32_t step) const {
    uint32_t d = step > last_[b] ? step - last_[b] : 0;
    return d >= 16 ? 0 : uint16_t(bits_[b] << d);
  }
  // b's place holds a new block: no history.
  void forget(BlockId b) {
    bits_[b] = 0;
    last_[b] = 0;
  }
  uint32_t hits(BlockId b, uint32_t step) const { return bits_set(uint16_t(history(b, step) & mask_)); }
  double rate(BlockId b, uint32_t step) const { return double(hits(b, step)) / double(window_); }
  uint32_t window() const { return window_; }
  // Memory of HillInfer's table: 2 bytes per token.
  static uint64_t table_bytes(const BlockTable& t) { return 2ull * t.size() * t.block_tokens; }
  // The set bits of a 16-bit history, in a few inline operations: the
  // compiler's popcount builtin is a library call where the target has no
  // popcount instruction (x86-64's baseline), and a victim compares up to
  // `candidates` hit counts.
  static uint32_t bits_set(uint16_t h) {
    uint32_t x = h;
    x = x - ((x >> 1) & 0x5555u);
    x = (x & 0x3333u) + ((x >> 2) & 0x3333u);
    x = (x + (x >> 4)) & 0x0F0Fu;
    return (x + (x >> 8)) & 0x1Fu;
  }

 private:
  std::vector<uint16_t> bits_;
  std::vector<uint32_t> last_;
  uint32_t window_ = 16;
  uint16_t mask_ = 0xFFFF;
};

struct TimePin {
  double alpha = 0.2;
  bool of_capacity = false;
  TierId warm = 1;

  static ParamList params() {
    return {num("alpha", 0.2, "time pinning: fraction of the newest blocks kept in the warm tier (HillInfer: 0.15-0.20)", 0.0, 1.0),
            str("pin_basis", "sequence",
                "alpha is a fraction of each (seq, layer)'s blocks (sequence) or of the warm tier's capacity, shared "
                "equally by all (seq, layer)s (capacity)",
                {"sequence", "capacity"}),
            integer("warm_tier", 1, "index of the warm tier (host DRAM when the GPU is tier 0)", 0, 253)};
  }
  static TimePin from(const json& p) {
    TimePin tp;
    tp.alpha = get_num(p, "alpha");
    tp.of_capacity = p.at("pin_basis").get<std::string>() == "capacity";
    tp.warm = TierId(get_int(p, "warm_tier"));
    return tp;
  }
  // How many of the newest of n created blocks of a (seq, layer) are pinned.
  uint32_t count(uint32_t n, const BlockTable& t) const {
    if (n == 0 || alpha <= 0) return 0;
    double k;
    if (!of_capacity) {
      k = std::ceil(alpha * double(n) - 1e-9);
    } else {
      if (warm >= t.tiers.size() || n_groups(t) == 0) return 0;
      k = std::floor(alpha * double(t.tiers[warm].capacity_blocks) / double(n_groups(t)));
    }
    return k >= double(n) ? n : uint32_t(k);
  }
  // Is b among the pinned newest blocks of its (seq, layer), which has n
  // created blocks?
  bool pinned(BlockId b, uint32_t n, const BlockTable& t) const {
    uint32_t i = t.index_of(b);
    return i < n && i >= n - count(n, t);
  }
  // Same, finding n from the table (O(log blocks)).
  bool pinned(BlockId b, const BlockTable& t) const {
    uint32_t n = created_blocks(t, t.seq_of(b), t.layer_of(b));
    uint32_t i = t.index_of(b) + 1;
    return pinned(b, n > i ? n : i, t);
  }
};

}  // namespace kvtier
