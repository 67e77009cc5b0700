// The prefix caches of several serving instances, without timing: each
// instance has its own cache hierarchy (every tier's capacity split equally
// among the instances, so that the same total memory is compared), and each
// request goes to one instance by a routing rule. One instance is one cache
// of the whole memory, pooled: `kvtier replay --instances 1` and the plain
// replay give the same counts. What local caches lose against a pooled one
// is what a KV pool shared by every node (Mooncake's store) recovers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/replay/replay.h"

namespace kvtier {

// round_robin: requests in turn; longest_prefix: the instance whose cache
// holds the longest run of the request's leading blocks, among those given
// at most twice the requests of the least-used one (plus one), ties to the
// one given the fewest (KV-aware routing, as the cluster's kv_aware router
// with requests for load: without the cap, the first instance to cache a
// prefix every request shares, a system prompt, would be sent everything).
enum class ReplayRoute { RoundRobin, LongestPrefix };
ReplayRoute parse_replay_route(const std::string& name, const std::string& where);
const char* replay_route_name(ReplayRoute r);

struct InstancesResult {
  ReplayResult total;  // summed over the instances, tier by tier
  std::vector<uint64_t> requests;  // per instance: requests routed to it
};

// Replays `s` (played c.repeat times) through `n` instances' caches. Throws
// ConfigError where a tier's capacity leaves an instance less than a block,
// for a policy that needs the future, and for a warm-up (each instance's
// cache warms on its own requests).
InstancesResult replay_instances(const BlockStream& s, const ReplayConfig& c, uint32_t n, ReplayRoute route,
                                 const TailTokens* tails);

}  // namespace kvtier
