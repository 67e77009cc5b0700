#include "sim/engine/invariants.h"

#include <cmath>

#include "sim/platform/sim_clock.h"

namespace kvtier {

InvariantChecker::InvariantChecker(const EngineSetup& s, const KvStore& kv, JobBoard& board, Platform& platform)
    : s_(s), kv_(kv), board_(board), platform_(platform) {
  submitted_.assign(platform_.stats().size(), 0.0);
  Stream::observe([this](const TransferJob& j) {
    if (j.exec_on >= 0 || j.from == j.to) return;
    if (j.fold) {
      for (const PlatformRoute* r : j.fold->ranks)
        for (uint32_t st : r->stats) submitted_[st] += j.bytes;
      return;
    }
    for (uint32_t st : platform_.route(j.from, j.to).stats) submitted_[st] += j.bytes;
  });
}

InvariantChecker::~InvariantChecker() { Stream::observe(nullptr); }

void InvariantChecker::fail(const std::string& what) const {
  throw InvariantError("invariant violated at simulated time " + std::to_string(sim_now()) + " s: " + what);
}

void InvariantChecker::check_time(const char* where) {
  const double now = sim_now();
  if (now < last_t_) fail(std::string(where) + ": time went back from " + std::to_string(last_t_) + " to " + std::to_string(now));
  last_t_ = now;
}

void InvariantChecker::before_attention(uint32_t step, uint32_t layer, const std::vector<BlockId>& on_gpu) {
  check_time("attention");
  const BlockTable& t = kv_.table();
  for (BlockId b : on_gpu) {
    if (t.tier(b) != 0)
      fail("step " + std::to_string(step) + " layer " + std::to_string(layer) + ": block " + std::to_string(b) +
           " (sequence " + std::to_string(t.seq_of(b)) + ", index " + std::to_string(t.index_of(b)) +
           ") is used by attention but lives in " +
           (t.tier(b) < t.tiers.size() ? "tier " + t.tiers[t.tier(b)].name : std::string("no tier")) +
           ", not on the GPU (" + t.tiers[0].name + ")");
    if (!board_.done(kv_.pending(b)))
      fail("step " + std::to_string(step) + " layer " + std::to_string(layer) + ": block " + std::to_string(b) +
           " is used by attention while a transfer into " + t.tiers[0].name + " is still moving it");
  }
}

void InvariantChecker::after_step(uint32_t step, const std::vector<uint32_t>* created_per_seq) {
  check_time("step end");
  const BlockTable& t = kv_.table();
  const size_t nt = t.tiers.size();
  count_.assign(nt, 0);
  for (BlockId b = 0; b < t.size(); ++b) {
    const TierId own = t.tier(b);
    const uint8_t copies = t.copies(b);
    if (!t.held(b)) {  // a chunk of the block table no sequence holds
      if (own != kNotCreated || copies)
        fail("after step " + std::to_string(step) + ": block " + std::to_string(b) +
             " belongs to no sequence (its chunk of the block table is free) but lives in a tier or has copies");
      continue;
    }
    const uint32_t created = created_per_seq ? (*created_per_seq)[t.seq_of(b)] : s_.blocks_at(step);
    auto where = [&] {
      return "after step " + std::to_string(step) + ": block " + std::to_string(b) + " (sequence " +
             std::to_string(t.seq_of(b)) + ", layer " + std::to_string(t.layer_of(b)) + ", index " +
             std::to_string(t.index_of(b)) + ")";
    };
    if (own == kNotCreated) {
      if (t.index_of(b) < created) fail(where() + " should exist (the sequences have " + std::to_string(created) + " blocks) but was never created");
      if (copies) fail(where() + " was never created but has copies");
      continue;
    }
    if (t.state[b].layer != t.layer_of(b))
      fail(where() + ": its record says layer " + std::to_string(t.state[b].layer) + ", which a write down would name");
    if (own == kDropped) {
      if (copies) fail(where() + " was dropped but still has copies");
      continue;
    }
    if (own >= nt) fail(where() + " is in tier " + std::to_string(own) + ", which does not exist");
    ++count_[own];
    for (TierId c = 0; c < nt; ++c)
      if (copies >> c & 1u) {
        if (c <= own) fail(where() + " lives in " + t.tiers[own].name + " and has a copy in " + t.tiers[c].name + ", which is not below it");
        ++count_[c];
      }
    if (copies >> nt) fail(where() + " has copies in tiers that do not exist");
  }
  for (size_t i = 0; i < nt; ++i) {
    const TierInfo& ti = t.tiers[i];
    if (count_[i] != ti.used_blocks)
      fail("after step " + std::to_string(step) + ": tier " + ti.name + " counts " + std::to_string(ti.used_blocks) +
           " blocks in use but holds " + std::to_string(count_[i]) + " (blocks and copies)");
    if (ti.occupied_blocks() > ti.capacity_blocks)
      fail("after step " + std::to_string(step) + ": tier " + ti.name + " holds " + std::to_string(ti.occupied_blocks()) +
           " blocks, above its capacity of " + std::to_string(ti.capacity_blocks));
  }
}

void InvariantChecker::at_end() {
  check_time("end");
  const auto& stats = platform_.stats();
  for (size_t i = 0; i < stats.size(); ++i)
    if (std::fabs(submitted_[i] - stats[i].bytes) > 1e-9 * std::max(1.0, submitted_[i]))
      fail("link " + stats[i].name + ": transfers routed over it carry " + std::to_string(submitted_[i]) +
           " bytes but " + std::to_string(stats[i].bytes) + " crossed it (a transfer never ran, or ran elsewhere)");
}

}  // namespace kvtier
