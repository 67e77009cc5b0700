// A tier's KV room given directly (hardware.kv_capacity), as vLLM's
// num_gpu_blocks_override / kv_cache_memory_bytes and Vidur's block count
// give it, instead of the room worked out from the device's memory, the
// weights and the reserve. A size in bytes ("40GB", "37.5GiB") or a count of
// blocks (an integer): a block is workload.block_tokens tokens of every
// layer, uncompressed, as vLLM counts its blocks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

struct KvCapacity {
  double bytes = 0;     // a size, or 0
  uint64_t blocks = 0;  // a count of blocks, or 0
  std::string text;     // as the config wrote it, for messages
  // The room in bytes; `block_bytes`: one block of every layer.
  double room_bytes(double block_bytes) const { return blocks ? double(blocks) * block_bytes : bytes; }
};

// Parses hardware.kv_capacity (`where`): tier name -> size or blocks; each
// name must be one of `tiers`.
std::map<std::string, KvCapacity> parse_kv_capacity(const json& v, const std::vector<std::string>& tiers,
                                                    const std::string& where);

// The KV room of tier `tier`: the one given, or `derived` (what the device
// holds after the weights, the reserve and the swap space, as `after` says)
// when none is. A given room above `derived` is a ConfigError: the device
// does not hold it.
double kv_room_bytes(const std::map<std::string, KvCapacity>& given, const std::string& tier, double derived,
                     double block_bytes, const std::string& after);

}  // namespace kvtier
