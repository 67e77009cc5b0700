#include "sim/app/cli_replay.h"

#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <unordered_map>

#include "models/llm.h"
#include "policies/policy.h"
#include "sim/app/replay_footprint.h"
#include "sim/core/config.h"
#include "sim/core/footprint.h"
#include "sim/core/progress.h"
#include "sim/replay/replay.h"
#include "sim/replay/replay_instances.h"
#include "sim/core/result.h"
#include "traces/oracle_general.h"
#include "traces/request_synthetic.h"

namespace fs = std::filesystem;

namespace kvtier {
namespace {

struct ReplayCli {
  std::string trace, synthetic, model = "llama-13b", out, csv, semantics = "block", admission = "always", max_memory,
      warmup, route = "round_robin";
  std::vector<std::string> policies, capacities, tiers, policy_params;
  uint32_t block_tokens = 0, repeat = 1, instances = 1;
  bool inclusive = false, no_promote = false, stack = false, timing = false, quiet = false, stream = false;
};

struct ExportCli {
  std::string trace, synthetic, format = "oracleGeneral", out, max_memory;
  uint32_t object_size = 1, repeat = 1;
  bool dense = false;
};

// The input as given where something is there (the reader says what is
// wrong with a folder), else where find_data_file finds it: a misspelt name
// gets the nearest existing one in the error.
std::string input_path(const std::string& path, const std::string& where) {
  std::error_code ec;
  if (fs::exists(path, ec)) return path;
  return find_data_file(path, "", where);
}

std::unique_ptr<RequestSource> open_input(const std::string& trace, const std::string& synthetic) {
  if (!synthetic.empty()) {
    const std::string path = input_path(synthetic, "--synthetic");
    json p = load_json_file(path);
    return std::make_unique<SyntheticRequests>(p, synthetic);
  }
  if (trace.empty()) throw ConfigError("give a request trace file or --synthetic GENERATOR.json");
  return open_request_trace(input_path(trace, "request trace"));
}

LlmSpec load_model(const std::string& m) {
  std::string path = m;
  if (path.find('/') == std::string::npos && path.find(".json") == std::string::npos)
    path = "configs/models/" + m + ".json";
  json j = load_json_file(find_data_file(path, "", "--model"));
  return parse_llm(j, "--model " + m);
}

// "1000" blocks, "12GiB" / "500MB" / "1e9B" bytes, "10%" of the distinct blocks.
uint64_t parse_capacity(const std::string& s, uint64_t block_bytes, uint64_t distinct) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  std::string unit = s.substr(pos);
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 0},          {"blocks", 0},    {"%", -1},        {"B", 1},         {"KB", 1e3},
      {"MB", 1e6},      {"GB", 1e9},      {"TB", 1e12},     {"KiB", 1024.0},  {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  auto it = std::find_if(units.begin(), units.end(), [&](const auto& u) { return u.first == unit; });
  if (pos == 0 || it == units.end() || !(v > 0) || !std::isfinite(v))
    throw ConfigError("capacity '" + s +
                      "': expected a positive number of blocks, bytes with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, "
                      "TiB) or a percentage of the distinct blocks (10%)");
  if (it->second < 0 && v > 100)
    throw ConfigError("capacity '" + s + "': a percentage of the distinct blocks is at most 100% (" +
                      std::to_string(distinct) + " blocks hold every one); give blocks or bytes for more");
  double blocks = it->second == 0 ? v : it->second < 0 ? v / 100.0 * double(distinct) : v * it->second / double(block_bytes);
  if (blocks < 1) throw ConfigError("capacity '" + s + "' is less than one block");
  if (blocks > 1e15) throw ConfigError("capacity '" + s + "' is more than 1e15 blocks");
  return uint64_t(std::floor(blocks + 1e-9));
}

json policy_json(const std::string& name, const std::vector<std::string>& params) {
  json p{{"name", name}};
  for (const auto& a : params) {  // NAME.KEY=VALUE
    size_t dot = a.find('.'), eq = a.find('=');
    if (dot == std::string::npos || eq == std::string::npos || eq < dot)
      throw ConfigError("--policy-param '" + a + "': expected POLICY.KEY=VALUE, e.g. lfu.keep_history=false");
    if (a.substr(0, dot) != name) continue;
    std::string v = a.substr(eq + 1);
    json jv;
    size_t byte = 0;
    bool syntax = false;
    const std::string err = parse_json_limited(v, jv, byte, syntax);
    if (!err.empty() && !syntax) throw ConfigError("--policy-param '" + a.substr(0, eq) + "': " + err);
    if (!err.empty()) jv = v;  // bare words are strings
    p[a.substr(dot + 1, eq - dot - 1)] = jv;
  }
  return p;
}

std::vector<std::string> split_list(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const auto& s : in) {
    size_t a = 0;
    while (a <= s.size()) {
      size_t b = s.find(',', a);
      if (b == std::string::npos) b = s.size();
      if (b > a) out.push_back(s.substr(a, b - a));
      a = b + 1;
    }
  }
  return out;
}

// Tokens in the last of r's blocks: the prompt's tokens beyond its full
// blocks; a full block where the lengths do not say (or disagree with the
// block count).
uint32_t tail_tokens(const Request& r, uint32_t block_tokens) {
  const uint64_t n = r.blocks.size();
  if (n == 0 || block_tokens == 0) return block_tokens;
  const uint64_t full = (n - 1) * uint64_t(block_tokens);
  if (r.input_tokens > full && r.input_tokens <= full + block_tokens) return uint32_t(r.input_tokens - full);
  return block_tokens;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Every option checked, and every policy name, before the trace is read.
std::vector<std::string> checked_policies(const ReplayCli& o) {
  if (o.semantics != "block" && o.semantics != "prefix")
    throw ConfigError("--semantics: expected block or prefix, got '" + o.semantics + "'");
  if (o.admission != "always" && o.admission != "second")
    throw ConfigError("--admission: expected always or second, got '" + o.admission + "'");
  if (o.repeat < 1) throw ConfigError("--repeat: expected at least 1");
  std::vector<std::string> policies = split_list(o.policies);
  for (const auto& p : policies) Registry<EvictionPolicy>::instance().find(p, "--policy");
  for (const auto& a : o.policy_params)
    if (a.find('.') == std::string::npos || a.find('=') == std::string::npos)
      throw ConfigError("--policy-param '" + a + "': expected POLICY.KEY=VALUE, e.g. lfu.keep_history=false");
  if (o.stream && o.stack) throw ConfigError("--stream: not with --stack-distance");
  if (o.instances > 1 && (o.stream || o.stack))
    throw ConfigError(std::string("--instances: not with ") + (o.stream ? "--stream" : "--stack-distance") +
                      " (each instance's cache is replayed in memory)");
  parse_replay_route(o.route, "--route");
  return policies;
}

// The block stream of the input. With --stream, a first pass numbers the
// blocks (memory: the distinct blocks; `dense` maps each block id to its
// number) and the replay reads the source again; otherwise the dense stream
// is kept in memory (4 bytes per reference) and replayed from there.
struct Input {
  BlockStream s;
  TailTokens tails;  // per request in memory; empty with --stream (computed as it is read again)
  std::unordered_map<uint64_t, uint32_t> dense;
  uint64_t n_refs = 0;
};

// The input's shape at its end, estimated from its first requests.
ReplayInputShape estimate_input(const std::string& trace, const std::string& synthetic) {
  double total = 0;
  std::string knob = "the request trace " + trace + " (its size)";
  if (!synthetic.empty()) {
    json p = load_json_file(input_path(synthetic, "--synthetic"));
    SyntheticRequests probe(p, synthetic);  // resolves the defaults into p
    total = double(get_int(p, "requests"));
    knob = "requests (" + synthetic + ")";
  }
  return estimate_replay_input([&] { return open_input(trace, synthetic); }, trace, total, knob);
}
ReplayInputShape commit_input(const ReplayCli& o) { return estimate_input(o.trace, o.synthetic); }

// A reservation of an estimated count (a tenth over, as committed), or none
// where the estimate is beyond what can be allocated.
template <typename Container>
void reserve_estimate(Container& c, double n) {
  if (!(n > 0) || n * 1.1 > 4e9) return;
  try {
    c.reserve(static_cast<size_t>(n * 1.1));
  } catch (const std::exception&) {
    // The container grows as it is filled instead.
  }
}

Input read_input(const ReplayCli& o, const ReplayInputShape& shape) {
  Input in;
  auto src = open_input(o.trace, o.synthetic);
  BlockStream& s = in.s;
  if (!src->has_blocks()) load_block_stream(*src);  // throws: no block ids
  s.name = src->name();
  s.block_tokens = src->block_tokens();
  reserve_estimate(in.dense, shape.blocks);
  reserve_estimate(s.ids, shape.blocks);
  if (!o.stream) {
    reserve_estimate(s.refs, shape.refs);
    reserve_estimate(s.request_end, shape.requests);
    reserve_estimate(s.arrival_s, shape.requests);
  }
  Request r;
  while (src->next(r)) {
    for (uint64_t b : r.blocks) {
      auto [it, fresh] = in.dense.try_emplace(b, uint32_t(s.ids.size()));
      if (fresh) {
        if (s.ids.size() >= 0xFFFFFFFEull) throw ConfigError(s.name + ": more than 2^32 - 2 distinct blocks");
        s.ids.push_back(b);
      }
      if (!o.stream) s.refs.push_back(it->second);
    }
    if (!o.stream) in.tails.push_back(tail_tokens(r, o.block_tokens ? o.block_tokens : s.block_tokens));
    in.n_refs += r.blocks.size();
    ++s.requests;
    if (!o.stream) {
      s.request_end.push_back(s.refs.size());
      s.arrival_s.push_back(r.arrival_s);
    }
  }
  if (!o.stream) {
    // Only --stream reads the source again: the map goes, and its pages go
    // back to the system, so that the runs' cache state takes its place
    // (the estimate counts the larger of the two).
    std::unordered_map<uint64_t, uint32_t>().swap(in.dense);  // its buckets too (clear() keeps them)
    malloc_trim(0);
  }
  return in;
}

// Every --policy-param names a policy this replay runs: one for a policy
// that is not run would change nothing.
void check_policy_params(const ReplayCli& o, const std::vector<std::string>& policies, const ReplayConfig& base) {
  std::vector<std::string> run = policies;
  if (run.empty())
    for (const auto& t : base.tiers) run.push_back(t.policy.value("name", ""));
  for (const auto& a : o.policy_params) {
    const std::string name = a.substr(0, a.find('.'));
    if (std::find(run.begin(), run.end(), name) != run.end()) continue;
    std::string list;
    for (const auto& r : run) list += (list.empty() ? "" : ", ") + r;
    throw ConfigError("--policy-param '" + a + "': " + name + " is not a policy of this replay (it runs " + list +
                      "); give it with -p " + name + " or --tier NAME:CAPACITY:" + name);
  }
}

// --warmup: a count of requests, or a percentage of them (of the stream
// played --repeat times). At least one request must be left to count.
uint64_t parse_warmup(const std::string& w, uint64_t requests) {
  if (w.empty()) return 0;
  size_t pos = 0;
  double v = -1;
  try {
    v = std::stod(w, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  const std::string unit = w.substr(pos);
  if (pos == 0 || !(unit.empty() || unit == "%") || !(v >= 0) || !std::isfinite(v) ||
      (unit.empty() && v != std::floor(v)) || (unit == "%" && v >= 100))
    throw ConfigError("--warmup '" + w + "': expected a number of requests (1000) or a percentage of them below 100% (10%)");
  const double n = unit == "%" ? std::floor(v / 100.0 * double(requests)) : v;
  if (n >= double(requests))
    throw ConfigError("--warmup '" + w + "': the input has " + std::to_string(requests) +
                      " requests (--repeat included); a warm-up must leave some to count");
  return uint64_t(n);
}

// --tier NAME:CAPACITY[:POLICY].
ReplayTierSpec parse_tier(const std::string& spec, const ReplayConfig& base, const BlockStream& s,
                          const std::vector<std::string>& policy_params) {
  size_t a = spec.find(':');
  if (a == std::string::npos || a == 0)
    throw ConfigError("--tier '" + spec + "': expected NAME:CAPACITY[:POLICY], e.g. gpu:4GiB:lru");
  size_t b = spec.find(':', a + 1);
  ReplayTierSpec t;
  t.name = spec.substr(0, a);
  std::string cap = spec.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
  t.capacity_blocks = parse_capacity(cap, base.block_bytes, s.blocks());
  std::string pol = b == std::string::npos ? "lru" : spec.substr(b + 1);
  Registry<EvictionPolicy>::instance().find(pol, "--tier " + spec);
  t.policy = policy_json(pol, policy_params);
  t.where = "--policy-param " + pol;  // its parameters come from there
  return t;
}

// The replay every run starts from: block size, semantics and the
// hierarchy (--tier ..., or one tier "cache").
ReplayConfig base_config(const ReplayCli& o, const LlmSpec& model, const BlockStream& s, bool have_capacities) {
  ReplayConfig base;
  base.block_tokens = o.block_tokens ? o.block_tokens : s.block_tokens;
  base.block_bytes = model.kv_bytes_per_token() * base.block_tokens;
  base.inclusive = o.inclusive;
  base.promote = !o.no_promote;
  base.admission = o.admission == "second" ? ReplayAdmission::Second : ReplayAdmission::Always;
  base.semantics = o.semantics == "prefix" ? ReplaySemantics::Prefix : ReplaySemantics::Block;
  base.repeat = o.repeat;
  base.warmup_requests = parse_warmup(o.warmup, s.requests * o.repeat);
  for (const auto& spec : o.tiers) base.tiers.push_back(parse_tier(spec, base, s, o.policy_params));
  if (base.tiers.empty()) {
    if (!have_capacities) throw ConfigError("replay: give --capacity (one or more) or --tier NAME:CAPACITY[:POLICY]");
    base.tiers.push_back({"cache", 0, json{{"name", "lru"}}, ""});
  }
  return base;
}

// One run: the base with the top tier's capacity `c0` and, unless `p` is
// empty (each tier's own), policy `p` in every tier.
ReplayConfig run_config(const ReplayConfig& base, const std::string& p, uint64_t c0,
                        const std::vector<std::string>& policy_params) {
  ReplayConfig c = base;
  c.tiers[0].capacity_blocks = c0;
  if (!p.empty())
    for (auto& t : c.tiers) {
      t.policy = policy_json(p, policy_params);
      t.where = "--policy-param " + p;
    }
  return c;
}

// The runs' results as report.json's "runs" and the CSV rows.
struct Runs {
  json runs = json::array();
  std::string csv = csv_header();
  uint64_t replayed = 0;

  // A run's result; `references` is what replaying it read.
  void add(const ReplayResult& r, const ReplayConfig& c, const char* method, uint64_t references) {
    replayed += references;
    json j = to_json(r, c);
    j["method"] = method;
    runs.push_back(j);
    csv += csv_rows(r, c);
  }
};

// --stack-distance: one LRU stack pass gives every capacity's hits.
void replay_by_stack(const ReplayCli& o, const Input& in, const ReplayConfig& base,
                     const std::vector<uint64_t>& cap_blocks, const std::vector<std::string>& policies, Runs& out) {
  for (const auto& p : policies)
    if (!(p.empty() || p == "lru")) throw ConfigError("--stack-distance: only for lru, not '" + p + "'");
  for (const auto& t : base.tiers)
    if (policies[0].empty() && t.policy["name"] != "lru") throw ConfigError("--stack-distance: every tier must use lru");
  if (base.inclusive || !base.promote || base.admission != ReplayAdmission::Always)
    throw ConfigError("--stack-distance: needs exclusive tiers with promotion and admission always (one LRU stack)");
  const BlockStream& s = in.s;
  StackDistances sd =
      lru_stack_distances(s, base.semantics, base.repeat, base.block_tokens, base.warmup_requests, &in.tails);
  for (uint64_t c0 : cap_blocks) {
    ReplayConfig c = base;
    c.tiers[0].capacity_blocks = c0;
    ReplayResult r;
    r.references = sd.references;
    r.requests = sd.requests;
    r.tokens = sd.tokens;
    uint64_t below = 0;
    for (auto& t : c.tiers) {
      t.policy = policy_json("lru", o.policy_params);
      resolve_params(t.policy, Registry<EvictionPolicy>::instance().find("lru", "lru").params, "lru", {"name"});
      uint64_t upto = below + t.capacity_blocks;
      const uint64_t hits = sd.hits_within(upto) - sd.hits_within(below);
      const uint64_t room = sd.short_within(upto) - sd.short_within(below);
      ReplayTierResult tr{t.name, t.policy, t.capacity_blocks, hits, hits * base.block_tokens - room, 0};
      r.tiers.push_back(tr);
      below = upto;
    }
    r.misses = r.references - r.hits();
    out.add(r, c, "stack_distance", 0);  // the one stack pass read them for every capacity
  }
  out.replayed += sd.references;
}

// --stream: every run's session fed request by request from the source,
// read again for each repetition.
void replay_streamed(const ReplayCli& o, const Input& in, const ReplayConfig& base,
                     const std::vector<uint64_t>& cap_blocks, const std::vector<std::string>& policies, Runs& out) {
  std::vector<std::unique_ptr<ReplayConfig>> configs;
  std::vector<std::unique_ptr<ReplaySession>> sessions;
  for (const auto& p : policies)
    for (uint64_t c0 : cap_blocks) {
      configs.push_back(std::make_unique<ReplayConfig>(run_config(base, p, c0, o.policy_params)));
      sessions.push_back(std::make_unique<ReplaySession>(*configs.back(), in.s.blocks()));
    }
  std::vector<uint32_t> buf;
  Request r;
  Progress progress("replay", double(in.n_refs) * base.repeat, "references");
  double done = 0;
  for (uint32_t rep = 0; rep < base.repeat; ++rep) {
    auto again = open_input(o.trace, o.synthetic);
    while (again->next(r)) {
      progress.update(done += double(r.blocks.size()));
      buf.clear();
      for (uint64_t b : r.blocks) {
        auto it = in.dense.find(b);
        if (it == in.dense.end()) throw ConfigError(in.s.name + ": changed while it was read (a block id not seen before)");
        buf.push_back(it->second);
      }
      const uint32_t tail = tail_tokens(r, base.block_tokens);
      for (auto& ss : sessions) ss->request(buf.data(), buf.size(), tail);
    }
  }
  for (size_t k = 0; k < sessions.size(); ++k) {
    const ReplayResult res = sessions[k]->result();
    out.add(res, *configs[k], "simulation", res.references);
  }
}

// The stream in memory, replayed once per run.
void replay_in_memory(const ReplayCli& o, const Input& in, const ReplayConfig& base,
                      const std::vector<uint64_t>& cap_blocks, const std::vector<std::string>& policies, Runs& out) {
  const BlockStream& s = in.s;
  std::unique_ptr<NextReferences> next;
  Progress progress("replay", double(policies.size() * cap_blocks.size()), "runs");
  double done = 0;
  for (const auto& p : policies)
    for (uint64_t c0 : cap_blocks) {
      progress.update(done++);
      ReplayConfig c = run_config(base, p, c0, o.policy_params);
      if (o.instances > 1) {
        const InstancesResult ir =
            replay_instances(s, c, o.instances, parse_replay_route(o.route, "--route"), &in.tails);
        out.add(ir.total, c, "simulation", ir.total.references);
        out.runs.back()["instances"] = o.instances;
        out.runs.back()["route"] = o.route;
        out.runs.back()["requests_per_instance"] = ir.requests;
        continue;
      }
      if (!next && replay_needs_next(c)) next = std::make_unique<NextReferences>(next_references(s, c.repeat));
      const ReplayResult res = replay(s, c, next.get(), &in.tails);
      out.add(res, c, "simulation", res.references);
    }
}

// report.json (--out), the CSV (--csv), both or neither; or the JSON on
// stdout when neither is asked for.
void write_replay(const ReplayCli& o, const json& out, const Runs& runs) {
  std::string text = out.dump(2) + "\n";
  {
    StagedOutputs outputs;  // both files or neither
    if (!o.csv.empty()) outputs.write(o.csv, runs.csv, "--csv");
    if (!o.out.empty()) outputs.write(o.out, text, "--out");
    outputs.commit();
  }
  if (o.out.empty() && o.csv.empty()) {
    std::cout << text;
    return;
  }
  if (o.quiet) return;
  for (const auto& r : runs.runs) {
    std::cout << "kvtier: " << r["tiers"][0]["policy"]["name"].get<std::string>();
    for (const auto& t : r["tiers"])
      std::cout << "  " << t["name"].get<std::string>() << " " << t["capacity_blocks"].get<uint64_t>()
                << " blocks: hit ratio " << t["hit_ratio"].get<double>();
    std::cout << "  miss ratio " << r["miss_ratio"].get<double>() << ", byte miss ratio "
              << r["byte_miss_ratio"].get<double>() << "\n";
  }
  if (!o.out.empty()) std::cout << "kvtier: wrote " << o.out << "\n";
  if (!o.csv.empty()) std::cout << "kvtier: wrote " << o.csv << "\n";
}

int run_replay(ReplayCli& o) {
  Progress::enable(!o.quiet && isatty(STDERR_FILENO));  // a long replay shows where it is on a terminal
  auto t0 = std::chrono::steady_clock::now();
  LlmSpec model = load_model(o.model);
  std::vector<std::string> policies = checked_policies(o);
  if (!o.max_memory.empty()) set_memory_limit(parse_memory_size(o.max_memory, "--max-memory"));
  const ReplayInputShape shape = commit_input(o);
  const double map_bytes = commit_replay_input(shape, o.stream);
  const Input in = read_input(o, shape);

  const BlockStream& s = in.s;
  double load_s = seconds_since(t0);
  std::vector<std::string> caps = split_list(o.capacities);
  const ReplayConfig base = base_config(o, model, s, !caps.empty());
  std::vector<uint64_t> cap_blocks;
  for (const auto& c : caps) cap_blocks.push_back(parse_capacity(c, base.block_bytes, s.blocks()));
  if (cap_blocks.empty()) cap_blocks.push_back(base.tiers[0].capacity_blocks);
  check_policy_params(o, policies, base);
  if (policies.empty()) policies.push_back("");  // each tier's own
  if (o.stack) {
    commit_stack_distances(double(s.blocks()));
  } else {
    std::vector<ReplayConfig> run_configs;
    for (const auto& p : policies)
      for (uint64_t c0 : cap_blocks)
        for (uint32_t i = 0; i < o.instances; ++i) run_configs.push_back(run_config(base, p, c0, o.policy_params));
    // In memory the id map is gone before the runs: their state takes its place.
    commit_replay_state(run_configs, double(s.blocks()), double(in.n_refs), o.stream, o.stream ? 0 : map_bytes);
  }

  Runs runs;
  auto t1 = std::chrono::steady_clock::now();
  if (o.stack) replay_by_stack(o, in, base, cap_blocks, policies, runs);
  else if (o.stream) replay_streamed(o, in, base, cap_blocks, policies, runs);
  else replay_in_memory(o, in, base, cap_blocks, policies, runs);
  double replay_s = seconds_since(t1);

  json out{{"kvtier_version", KVTIER_VERSION},
           {"command", "replay"},
           {"trace", s.name},
           {"requests", s.requests * base.repeat},
           {"references", in.n_refs * base.repeat},
           {"distinct_blocks", s.blocks()},
           {"repeat", base.repeat},
           {"warmup_requests", base.warmup_requests},
           {"model", model.name},
           {"block_tokens", base.block_tokens},
           {"block_bytes", base.block_bytes},
           {"semantics", o.semantics},
           {"inclusive", base.inclusive},
           {"promote", base.promote},
           {"admission", o.admission},
           {"resources", footprint_json()},
           {"runs", runs.runs}};
  write_replay(o, out, runs);
  if (o.timing)
    std::cerr << "kvtier: load " << load_s << " s, replay " << replay_s << " s, "
              << double(runs.replayed) / replay_s / 1e6 << " M references/s over " << runs.runs.size() << " run(s)\n";
  return 0;
}

int run_export(const ExportCli& o) {
  if (o.format != "oracleGeneral")
    throw ConfigError("--format: expected oracleGeneral (libCacheSim's binary trace), got '" + o.format + "'");
  if (o.out.empty()) throw ConfigError("--out: give the output file");
  if (o.repeat < 1) throw ConfigError("--repeat: expected at least 1");
  if (!o.max_memory.empty()) set_memory_limit(parse_memory_size(o.max_memory, "--max-memory"));
  // Held at once: the block stream and its ids as replay holds them, and
  // the next reference of every reference (8 bytes) and first one of every block (8).
  const ReplayInputShape shape = estimate_input(o.trace, o.synthetic);
  commit_replay_input(shape, false);
  commit_footprint({"the next-reference positions (" + std::to_string(uint64_t(shape.refs)) + " references)",
                    shape.knob, 8 * shape.refs + 8 * shape.blocks});
  auto src = open_input(o.trace, o.synthetic);
  BlockStream s = load_block_stream(*src);
  OracleGeneralOptions opt;
  opt.object_size = o.object_size;
  opt.repeat = o.repeat;
  opt.dense_ids = o.dense;
  StagedOutputs staged;  // nothing partial is left on an error or a signal
  uint64_t n = write_oracle_general(staged.stage(o.out, "--out"), s, opt);
  staged.commit();
  std::cout << "kvtier: wrote " << n << " block references (" << s.blocks() << " distinct blocks) to " << o.out
            << "\n";
  return 0;
}

}  // namespace

int request_trace_stats(const std::string& given, const std::string& json_out) {
  const std::string path = input_path(given, "trace stats");
  RequestTraceKind k = detect_request_trace(path);
  if (k == RequestTraceKind::Unknown)
    throw ConfigError(path + ":1: not a request trace (expected a Mooncake JSONL or Azure LLM inference CSV)");
  auto src = open_request_trace(path);
  RequestStats st = request_stats(*src);
  json out{{"trace", path}, {"kind", to_string(k)}};
  out.update(to_json(st));
  if (!json_out.empty()) write_file_atomic(json_out, out.dump(2) + "\n");
  std::printf("%s (%s)\n", path.c_str(), to_string(k));
  std::printf("  requests             %llu over %.1f s\n", (unsigned long long)st.requests, st.duration_s);
  std::printf("  mean input tokens    %.1f\n", st.mean_input_tokens);
  std::printf("  mean output tokens   %.1f\n", st.mean_output_tokens);
  if (st.has_blocks) {
    std::printf("  block references     %llu (%u-token blocks)\n", (unsigned long long)st.block_refs,
                src->block_tokens());
    std::printf("  distinct blocks      %llu\n", (unsigned long long)st.distinct_blocks);
    std::printf("  unbounded hit ratio  %.4f (%llu hits; prefix semantics %.4f)\n", st.unbounded_hit_ratio(),
                (unsigned long long)st.unbounded_hits, st.unbounded_prefix_hit_ratio());
  } else {
    std::printf("  block ids            none (lengths only)\n");
  }
  return 0;
}

std::function<int()> add_request_trace_commands(CLI::App& app, CLI::App& trace) {
  auto ro = std::make_shared<ReplayCli>();
  auto* rp = app.add_subcommand(
      "replay", "replay a request trace's KV blocks through cache tiers, no timing: hit ratios (docs/replay.md)");
  rp->add_option("trace", ro->trace, "request trace: Mooncake JSONL (block ids) or a file of the synthetic generator");
  rp->add_option("--synthetic", ro->synthetic, "generate the requests: generator parameters JSON (docs/replay.md)");
  rp->add_option("--policy,-p", ro->policies,
                 "eviction policy for every tier (repeatable or comma-separated: one run each); default lru or the "
                 "--tier's own");
  rp->add_option("--policy-param", ro->policy_params, "POLICY.KEY=VALUE, e.g. lfu.keep_history=false (repeatable)");
  rp->add_option("--capacity,-c", ro->capacities,
                 "capacity of the top tier: blocks, bytes (12GiB) or % of distinct blocks; repeatable or "
                 "comma-separated: one run each");
  rp->add_option("--warmup", ro->warmup,
                 "replay this many requests (or this % of them) before counting: hit and miss ratios of a warm cache");
  rp->add_option("--tier", ro->tiers, "a tier NAME:CAPACITY[:POLICY], top first (repeatable)");
  rp->add_option("--model", ro->model, "model preset or file: KV bytes per token for byte capacities and bytes served")
      ->capture_default_str();
  rp->add_option("--block-tokens", ro->block_tokens, "tokens per block (default: the trace's, 512 for Mooncake)")
      ->check(CLI::Range(1u, 65536u));
  rp->add_option("--semantics", ro->semantics, "block: every reference counts; prefix: hits up to a request's first miss")
      ->capture_default_str();
  rp->add_option("--admission", ro->admission, "always, or second: cache a block only from its second reference")
      ->capture_default_str();
  rp->add_flag("--inclusive", ro->inclusive, "inclusive tiers (default exclusive)");
  rp->add_flag("--no-promote", ro->no_promote, "a hit below the top tier stays where it is");
  rp->add_flag("--stack-distance", ro->stack, "LRU only: every capacity from one pass of stack distances");
  rp->add_option("--repeat", ro->repeat, "play the stream this many times back to back (same block ids)")
      ->check(CLI::Range(1u, 1000u));
  rp->add_flag("--stream", ro->stream,
               "memory bounded by the distinct blocks: read the trace twice instead of keeping its references "
               "(not with belady or --stack-distance)");
  rp->add_option("--instances", ro->instances,
                 "the caches of this many serving instances, each tier's capacity split equally among them, requests "
                 "routed by --route (1: one pooled cache of the whole capacity)")
      ->check(CLI::Range(1u, 4096u));
  rp->add_option("--route", ro->route,
                 "with --instances: round_robin, or longest_prefix (the instance caching the longest run of the "
                 "request's leading blocks, among those given at most twice the least-used one's requests)")
      ->capture_default_str();
  rp->add_option("--max-memory", ro->max_memory,
                 "refuse a replay estimated to need more memory than this (512M, 4G; default: the machine's "
                 "available memory less a tenth)");
  rp->add_option("--out,-o", ro->out, "write the JSON result here (default: print it)");
  rp->add_option("--csv", ro->csv, "write one CSV row per run and tier here");
  rp->add_flag("--timing", ro->timing, "print load and replay times and references per second on stderr");
  rp->add_flag("--quiet,-q", ro->quiet, "with --out/--csv: print nothing on success");

  auto eo = std::make_shared<ExportCli>();
  auto* ex = trace.add_subcommand("export", "write a request trace's block references for other cache simulators");
  ex->add_option("trace", eo->trace, "request trace with block ids (Mooncake JSONL)");
  ex->add_option("--synthetic", eo->synthetic, "generate the requests: generator parameters JSON");
  ex->add_option("--format", eo->format, "oracleGeneral: libCacheSim's 24-byte binary records")->capture_default_str();
  ex->add_option("--out,-o", eo->out, "output file")->required();
  ex->add_option("--object-size", eo->object_size, "size field of every record (1: capacities count blocks)")
      ->capture_default_str();
  ex->add_option("--repeat", eo->repeat, "write the stream this many times back to back (same ids)")
      ->check(CLI::Range(1u, 1000u));
  ex->add_option("--max-memory", eo->max_memory,
                 "refuse an export whose estimated memory exceeds this (e.g. 4G; default: the machine's available "
                 "memory less a tenth)");
  ex->add_flag("--dense-ids", eo->dense, "object ids 0..n-1 in order of first reference instead of the trace's ids");

  return [rp, ro, ex, eo]() -> int {
    if (*rp) return run_replay(*ro);
    if (*ex) return run_export(*eo);
    return -1;
  };
}

}  // namespace kvtier
