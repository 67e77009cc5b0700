#include "sim/replay/replay_instances.h"

#include <algorithm>
#include <memory>

namespace kvtier {

ReplayRoute parse_replay_route(const std::string& name, const std::string& where) {
  if (name == "round_robin") return ReplayRoute::RoundRobin;
  if (name == "longest_prefix") return ReplayRoute::LongestPrefix;
  throw ConfigError(where + ": expected round_robin or longest_prefix, got '" + name + "'");
}

const char* replay_route_name(ReplayRoute r) {
  switch (r) {
    case ReplayRoute::RoundRobin: return "round_robin";
    case ReplayRoute::LongestPrefix: return "longest_prefix";
  }
  return "";
}

namespace {

// An instance takes requests while it has at most this many times the
// least-used one's (plus one): the cluster's kv_aware router's default cap.
constexpr uint64_t kLoadCap = 2;

void add(ReplayResult& into, const ReplayResult& r) {
  into.references += r.references;
  into.requests += r.requests;
  into.misses += r.misses;
  into.tokens += r.tokens;
  if (into.tiers.empty()) {
    into.tiers = r.tiers;
    return;
  }
  for (size_t t = 0; t < r.tiers.size(); ++t) {
    into.tiers[t].capacity_blocks += r.tiers[t].capacity_blocks;
    into.tiers[t].hits += r.tiers[t].hits;
    into.tiers[t].hit_tokens += r.tiers[t].hit_tokens;
    into.tiers[t].bypassed += r.tiers[t].bypassed;
  }
}

}  // namespace

InstancesResult replay_instances(const BlockStream& s, const ReplayConfig& c, uint32_t n, ReplayRoute route,
                                 const TailTokens* tails) {
  if (n == 0) throw ConfigError("--instances: expected at least 1");
  if (n > 1 && c.warmup_requests > 0)
    throw ConfigError("--warmup: not with --instances above 1 (each instance's cache warms on its own requests)");
  if (replay_needs_next(c)) throw ConfigError("--instances: a policy that needs the future (belady) replays one cache");
  // Each instance's hierarchy: every tier's capacity split equally, the
  // remainder one block each to the first instances.
  std::vector<std::unique_ptr<ReplayConfig>> configs;
  std::vector<std::unique_ptr<ReplaySession>> sessions;
  for (uint32_t i = 0; i < n; ++i) {
    auto ci = std::make_unique<ReplayConfig>(c);
    for (auto& t : ci->tiers) {
      const uint64_t share = t.capacity_blocks / n + (i < t.capacity_blocks % n ? 1 : 0);
      if (share == 0)
        throw ConfigError("--instances: tier " + t.name + "'s " + std::to_string(t.capacity_blocks) +
                          " blocks leave some of the " + std::to_string(n) + " instances no block");
      t.capacity_blocks = share;
    }
    sessions.push_back(std::make_unique<ReplaySession>(*ci, s.blocks()));
    configs.push_back(std::move(ci));
  }
  InstancesResult out;
  out.requests.assign(n, 0);
  uint64_t turn = 0;
  for (uint32_t rep = 0; rep < c.repeat; ++rep) {
    uint64_t begin = 0;
    for (uint64_t r = 0; r < s.requests; ++r) {
      const uint64_t end = s.request_end[r];
      const uint32_t* refs = s.refs.data() + begin;
      const size_t len = static_cast<size_t>(end - begin);
      uint32_t to = 0;
      if (route == ReplayRoute::RoundRobin) {
        to = static_cast<uint32_t>(turn++ % n);
      } else {
        uint64_t least = out.requests[0];
        for (uint32_t i = 1; i < n; ++i) least = std::min(least, out.requests[i]);
        size_t best = 0;
        to = n;
        for (uint32_t i = 0; i < n; ++i) {
          if (out.requests[i] > kLoadCap * least + 1) continue;
          const ReplaySession& ss = *sessions[i];
          size_t held = 0;
          while (held < len && ss.holder(refs[held]) < ss.tiers()) ++held;
          if (to == n || held > best || (held == best && out.requests[i] < out.requests[to])) {
            best = held;
            to = i;
          }
        }
      }
      ++out.requests[to];
      sessions[to]->request(refs, len, tails && !tails->empty() ? (*tails)[r] : 0);
      begin = end;
    }
  }
  for (const auto& ss : sessions) add(out.total, ss->result());
  return out;
}

}  // namespace kvtier
