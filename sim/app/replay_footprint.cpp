#include "sim/app/replay_footprint.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

#include "sim/core/config.h"
#include "sim/core/footprint.h"

namespace kvtier {

namespace {

constexpr uint64_t kSampleRequests = 2048;

// Lines per byte of a text trace, from its first lines.
double lines_per_byte(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  double lines = 0, bytes = 0;
  while (lines < double(kSampleRequests) && std::getline(in, line)) {
    lines += 1;
    bytes += double(line.size()) + 1;
  }
  return bytes > 0 ? lines / bytes : 0;
}

double file_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? double(st.st_size) : 0;
}

// Heap bytes of the block id map per distinct block (the map built as the
// loader builds it, its buckets included), measured on 2^16 entries.
double id_map_bytes_per_block() {
  constexpr uint64_t n = 1 << 16;
  const double before = heap_bytes_in_use();
  std::unordered_map<uint64_t, uint32_t> m;
  for (uint64_t i = 0; i < n; ++i) m.try_emplace(i * 0x9E3779B97F4A7C15ull, uint32_t(i));
  return (heap_bytes_in_use() - before) / double(n);
}

// Heap bytes per distinct block of a replay session configured as `c` over
// `total` blocks: two sessions of different sizes, each tier's capacity the
// same share of them, every block referenced twice (so that what a policy
// grows while it runs, ghost lists and their maps, is grown), the
// difference over the blocks between.
double session_bytes_per_block(const ReplayConfig& run, double total) {
  ReplayConfig c = run;
  double extra = 0;
  if (replay_needs_next(c)) {
    // A policy that reads the future cannot run as a session: measured as
    // LRU, plus the next-reference time and the policy's heap entry.
    for (auto& t : c.tiers) t.policy = json{{"name", "lru"}};
    extra = 8 + 16;
  }
  constexpr uint64_t small = 4096, large = 4 * 4096;
  auto measure = [&](uint64_t blocks) {
    ReplayConfig copy = c;
    for (auto& t : copy.tiers) {
      const double share = total > 0 ? double(t.capacity_blocks) / total : 1.0;
      t.capacity_blocks = std::max<uint64_t>(1, std::min<uint64_t>(blocks, uint64_t(share * double(blocks))));
    }
    const double before = heap_bytes_in_use();
    ReplaySession s(copy, blocks);
    std::vector<uint32_t> req(8);
    for (int pass = 0; pass < 2; ++pass)
      for (uint64_t b = 0; b < blocks; b += req.size()) {
        for (size_t i = 0; i < req.size(); ++i) req[i] = uint32_t((b + i) % blocks);
        s.request(req.data(), req.size());
      }
    return heap_bytes_in_use() - before;
  };
  const double a = measure(small), b = measure(large);
  return std::max(0.0, (b - a) / double(large - small)) + extra;
}

std::string count(double n) { return std::to_string(static_cast<uint64_t>(n)); }

}  // namespace

ReplayInputShape estimate_replay_input(const std::function<std::unique_ptr<RequestSource>()>& open,
                                       const std::string& trace_path, double total_requests, const std::string& knob) {
  ReplayInputShape s;
  s.knob = knob;
  auto src = open();
  Request r;
  double k = 0, refs = 0;
  std::unordered_set<uint64_t> distinct;
  while (k < double(kSampleRequests) && src->next(r)) {
    k += 1;
    refs += double(r.blocks.size());
    distinct.insert(r.blocks.begin(), r.blocks.end());
  }
  if (k == 0) return s;
  double n = total_requests;
  if (n <= 0) n = std::max(k, file_bytes(trace_path) * lines_per_byte(trace_path));
  s.requests = n;
  s.refs = refs / k * n;
  s.blocks = double(distinct.size()) / k * n;
  return s;
}

double commit_replay_input(const ReplayInputShape& s, bool stream) {
  if (!stream)
    commit_footprint({"the block stream (" + count(s.refs) + " references x 4 bytes, " + count(s.requests) +
                          " requests x 16 bytes)",
                      s.knob, 4 * s.refs + 16 * s.requests});
  commit_footprint({"the block ids (" + count(s.blocks) + " distinct blocks x 8 bytes)", s.knob, 8 * s.blocks});
  const double per_block = id_map_bytes_per_block();
  const double map = s.blocks * per_block;
  commit_footprint({"the block id map (" + count(s.blocks) + " distinct blocks x " + count(per_block) + " bytes)",
                    s.knob, map});
  return map;
}

void commit_replay_state(const std::vector<ReplayConfig>& runs, double blocks, double refs, bool at_once,
                         double released) {
  double bytes = 0, per_block_max = 0;
  bool next = false;
  for (const ReplayConfig& c : runs) {
    const double per_block = session_bytes_per_block(c, blocks);
    per_block_max = std::max(per_block_max, per_block);
    bytes = at_once ? bytes + per_block * blocks : std::max(bytes, per_block * blocks);
    next = next || replay_needs_next(c);
  }
  const std::string knob = at_once ? "--capacity, --policy (" + count(double(runs.size())) +
                                         " runs, each with a cache of its own with --stream)"
                                   : "--capacity, --policy (the cache state of a run)";
  commit_footprint({"the cache state (" + count(double(at_once ? runs.size() : 1)) + " run(s) x " + count(blocks) +
                        " blocks x " + count(per_block_max) + " bytes" +
                        (released > 0 ? ", less the id map it replaces)" : ")"),
                    knob, std::max(0.0, bytes - released)});
  if (next)  // next-reference times: 8 bytes per reference, 16 per block
    commit_footprint({"the next-reference times (" + count(refs) + " references)",
                      "--policy belady (next-reference times of every reference)", 8 * refs + 16 * blocks});
}

void commit_stack_distances(double blocks) {
  commit_footprint({"the LRU stack distances (" + count(blocks) + " blocks x 40 bytes)",
                    "--stack-distance (its tree over the distinct blocks)", 40 * blocks});
}

}  // namespace kvtier
