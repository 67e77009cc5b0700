#include "sim/core/validation_cache.h"

#include "sim/core/engine_setup.h"

namespace kvtier {

namespace {

// Entries kept at once: a sweep of many hardware variants or policy shapes
// starts over rather than grow (one hardware entry is tens of kB).
constexpr size_t kMaxHardware = 256;
constexpr size_t kMaxPolicyShapes = 4096;

}  // namespace

std::shared_ptr<const ParsedHardware> ValidationCache::hardware(const nlohmann::json& given) {
  const size_t h = std::hash<nlohmann::json>{}(given);
  auto range = hardware_.equal_range(h);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second.first == given) return it->second.second;
  auto p = std::make_shared<ParsedHardware>();
  p->resolved = given;
  p->hw = parse_hardware(p->resolved, "hardware");
  p->text = p->resolved.dump();
  if (hardware_.size() >= kMaxHardware) hardware_.clear();
  hardware_.emplace(h, std::make_pair(given, p));
  return p;
}

double ValidationCache::policy_state_bytes(const EnginePolicies& pol, const BlockTable& shape) {
  // What state_bytes_per_block reads of the shape (layers and blocks are
  // capped there, so most shapes share an entry).
  std::string key = pol.spec().dump();
  for (uint64_t v : {uint64_t(std::min<uint32_t>(shape.layers, 4)), uint64_t(std::min<uint32_t>(shape.blocks_per_seq_layer, 128)),
                     uint64_t(shape.block_tokens), shape.block_bytes})
    key += "|" + std::to_string(v);
  for (const TierInfo& t : shape.tiers) key += "|" + t.name + "|" + t.kind + "|" + std::to_string(t.capacity_blocks);
  if (auto it = policy_state_.find(key); it != policy_state_.end()) return it->second;
  const double bytes = pol.state_bytes_per_block(shape);
  if (policy_state_.size() >= kMaxPolicyShapes) policy_state_.clear();
  policy_state_.emplace(std::move(key), bytes);
  return bytes;
}

}  // namespace kvtier
