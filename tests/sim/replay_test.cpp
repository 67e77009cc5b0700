#include <catch2/catch.hpp>
#include <array>
#include <map>
#include <set>

#include "sim/core/config.h"
#include "policies/policy.h"
#include "sim/replay/replay.h"
#include "traces/request_synthetic.h"

using namespace kvtier;

namespace {

BlockStream stream_of(const std::vector<std::vector<uint64_t>>& requests) {
  BlockStream s;
  s.block_tokens = 512;
  std::map<uint64_t, uint32_t> dense;
  for (const auto& r : requests) {
    for (uint64_t b : r) {
      auto [it, fresh] = dense.try_emplace(b, uint32_t(s.ids.size()));
      if (fresh) s.ids.push_back(b);
      s.refs.push_back(it->second);
    }
    s.request_end.push_back(s.refs.size());
    s.arrival_s.push_back(0);
    ++s.requests;
  }
  return s;
}

ReplayConfig one_tier(const std::string& policy, uint64_t cap) {
  ReplayConfig c;
  c.block_tokens = 512;
  c.block_bytes = 1;
  c.tiers.push_back({"cache", cap, json{{"name", policy}}, ""});
  return c;
}

uint64_t hits(const BlockStream& s, const std::string& policy, uint64_t cap, json params = json::object()) {
  ReplayConfig c = one_tier(policy, cap);
  c.tiers[0].policy.update(params);
  NextReferences nr = next_references(s, 1);
  return replay(s, c, &nr).hits();
}

BlockStream slice() {
  auto src = open_request_trace("tests/data/mooncake_conversation_head1500.jsonl");
  return load_block_stream(*src);
}

BlockStream synthetic() {
  json p = load_json_file("configs/replay/synthetic_chat_rag.json");
  SyntheticRequests g(p, "configs/replay/synthetic_chat_rag.json");
  return load_block_stream(g);
}

}  // namespace

// Expected hit counts from libCacheSim (github.com/1a1a11a/libCacheSim,
// develop at aa0fc40), built beside the project, on the same block stream:
//   kvtier trace export tests/data/mooncake_conversation_head1500.jsonl --out slice.bin
//   kvtier trace export --synthetic configs/replay/synthetic_chat_rag.json --out syn.bin
// then, for each policy and capacity, a loop of cache->get() over every
// request of the oracleGeneral reader (ignore_obj_size, object size 1,
// cache_size = capacity in blocks, empty start, every request counted: no
// warm-up), with LRU_init, FIFO_init, LFU_init, Clock_init, Sieve_init,
// ARC_init, S3FIFO_init, TwoQ_init and Belady_init at default parameters.
// (cachesim's own summary skips the requests at the first timestamp and
// rounds the miss ratio, hence the loop.) kvtier's lfu runs with
// keep_history=false and clock with its TTL inert (no decode steps).
struct Expected {
  const char* policy;
  uint64_t cap, hits;
};

TEST_CASE("replay: hit counts equal libCacheSim's on a slice of the Mooncake conversation trace") {
  BlockStream s = slice();
  REQUIRE(s.refs.size() == 41702);
  const std::vector<Expected> expected = {
      {"lru", 256, 1555},     {"lru", 2048, 1916},     {"lru", 8192, 7370},     {"fifo", 256, 1419},
      {"fifo", 2048, 1890},   {"fifo", 8192, 6809},    {"lfu", 256, 1651},      {"lfu", 2048, 2320},
      {"lfu", 8192, 7453},    {"clock", 256, 1555},    {"clock", 2048, 1964},   {"clock", 8192, 7074},
      {"sieve", 256, 1651},   {"sieve", 2048, 2320},   {"sieve", 8192, 7453},   {"arc", 256, 1651},
      {"arc", 2048, 2320},    {"arc", 8192, 7522},     {"s3fifo", 256, 1555},   {"s3fifo", 2048, 2698},
      {"s3fifo", 8192, 7085}, {"twoq", 256, 1553},     {"twoq", 2048, 2426},    {"twoq", 8192, 6990},
      {"belady", 256, 3909},  {"belady", 2048, 9656},  {"belady", 8192, 11068},
  };
  for (const auto& e : expected) {
    DYNAMIC_SECTION(e.policy << " " << e.cap) {
      json p = std::string(e.policy) == "lfu" ? json{{"keep_history", false}} : json::object();
      CHECK(hits(s, e.policy, e.cap, p) == e.hits);
    }
  }
}

TEST_CASE("replay: hit counts equal libCacheSim's on the synthetic chat + RAG stream") {
  BlockStream s = synthetic();
  REQUIRE(s.refs.size() == 25302);
  const std::vector<Expected> expected = {
      {"lru", 200, 1664},     {"lru", 1000, 6191},     {"lru", 4000, 12202},    {"fifo", 200, 1589},
      {"fifo", 1000, 5994},   {"fifo", 4000, 11539},   {"lfu", 200, 1377},      {"lfu", 1000, 3870},
      {"lfu", 4000, 10603},   {"clock", 200, 1720},    {"clock", 1000, 6254},   {"clock", 4000, 12157},
      {"sieve", 200, 1377},   {"sieve", 1000, 3870},   {"sieve", 4000, 10603},  {"arc", 200, 1982},
      {"arc", 1000, 6429},    {"arc", 4000, 11568},    {"s3fifo", 200, 1939},   {"s3fifo", 1000, 5727},
      {"s3fifo", 4000, 11384}, {"twoq", 200, 1721},    {"twoq", 1000, 5800},    {"twoq", 4000, 11648},
      {"belady", 200, 6887},  {"belady", 1000, 12208}, {"belady", 4000, 12938},
  };
  for (const auto& e : expected) {
    DYNAMIC_SECTION(e.policy << " " << e.cap) {
      json p = std::string(e.policy) == "lfu" ? json{{"keep_history", false}} : json::object();
      CHECK(hits(s, e.policy, e.cap, p) == e.hits);
    }
  }
}

TEST_CASE("replay: Belady serves at least as many hits as every other policy") {
  BlockStream s = synthetic();
  for (uint64_t cap : {100, 700, 3000}) {
    uint64_t opt = hits(s, "belady", cap);
    std::set<uint64_t> distinct;
    for (const char* p : {"lru", "fifo", "lfu", "clock", "sieve", "arc", "s3fifo", "twoq"}) {
      uint64_t h = hits(s, p, cap);
      CHECK(h <= opt);
      distinct.insert(h);
    }
    CHECK(distinct.size() >= 5);  // the policies are not all the same
  }
}

TEST_CASE("replay: LRU stack distances give every capacity's hits in one pass") {
  BlockStream s = synthetic();
  for (ReplaySemantics sem : {ReplaySemantics::Block, ReplaySemantics::Prefix}) {
    StackDistances sd = lru_stack_distances(s, sem, 2, 512);
    CHECK(sd.references == 2 * s.refs.size());
    for (uint64_t cap : {1, 64, 500, 3000, 20000}) {
      ReplayConfig c = one_tier("lru", cap);
      c.semantics = sem;
      c.repeat = 2;
      CHECK(sd.hits_within(cap) == replay(s, c, nullptr).hits());
    }
  }
  // Exclusive LRU tiers with promotion are one LRU stack split at the capacities.
  StackDistances sd = lru_stack_distances(s, ReplaySemantics::Block, 1, 512);
  ReplayConfig c = one_tier("lru", 300);
  c.tiers.push_back({"dram", 1200, json{{"name", "lru"}}, ""});
  ReplayResult r = replay(s, c, nullptr);
  CHECK(r.tiers[0].hits == sd.hits_within(300));
  CHECK(r.tiers[1].hits == sd.hits_within(1500) - sd.hits_within(300));
}

TEST_CASE("replay: the unbounded hit ratio of the conversation trace is 105710 of 288500 references") {
  auto src = open_request_trace("../shared/traces/mooncake_conversation_trace.jsonl");
  BlockStream s = load_block_stream(*src);
  ReplayConfig c = one_tier("lru", s.blocks());
  ReplayResult r = replay(s, c, nullptr);
  CHECK(r.references == 288500);
  CHECK(r.hits() == 105710);
}

TEST_CASE("replay: prefix semantics stop a request's hits at its first miss") {
  BlockStream s = stream_of({{1, 2, 3}, {1, 4, 3}});
  ReplayConfig c = one_tier("lru", 100);
  CHECK(replay(s, c, nullptr).hits() == 2);  // 1 and 3
  c.semantics = ReplaySemantics::Prefix;
  CHECK(replay(s, c, nullptr).hits() == 1);  // 3 comes after the miss on 4
}

TEST_CASE("replay: exclusive and inclusive tiers, promotion on hit") {
  // Capacities 1 and 2; stream A B A C B.
  BlockStream s = stream_of({{1}, {2}, {1}, {3}, {2}});
  ReplayConfig c = one_tier("lru", 1);
  c.tiers.push_back({"dram", 2, json{{"name", "lru"}}, ""});
  ReplayResult ex = replay(s, c, nullptr);
  CHECK(ex.tiers[0].hits == 0);
  CHECK(ex.tiers[1].hits == 2);  // A and B come back from the lower tier
  c.inclusive = true;
  ReplayResult in = replay(s, c, nullptr);
  CHECK(in.tiers[1].hits == 1);  // the lower tier also holds the top tier's copy, so B was pushed out
  CHECK(in.misses == 4);

  // Without promotion a block hit below stays there.
  BlockStream t = stream_of({{1}, {2}, {1}, {1}});
  ReplayConfig p = one_tier("lru", 1);
  p.tiers.push_back({"dram", 2, json{{"name", "lru"}}, ""});
  ReplayResult pr = replay(t, p, nullptr);
  CHECK(pr.tiers[0].hits == 1);
  CHECK(pr.tiers[1].hits == 1);
  p.promote = false;
  ReplayResult np = replay(t, p, nullptr);
  CHECK(np.tiers[0].hits == 0);
  CHECK(np.tiers[1].hits == 2);
}

TEST_CASE("replay: admission on second access") {
  BlockStream s = stream_of({{1}, {1}, {1}, {2}, {2}});
  ReplayConfig c = one_tier("lru", 10);
  CHECK(replay(s, c, nullptr).hits() == 3);
  c.admission = ReplayAdmission::Second;
  CHECK(replay(s, c, nullptr).hits() == 1);
}

TEST_CASE("replay: every registered eviction policy runs in replay within capacity") {
  BlockStream s = synthetic();
  uint64_t lru = hits(s, "lru", 500);
  for (const auto& kv : Registry<EvictionPolicy>::instance().entries()) {
    DYNAMIC_SECTION(kv.first) {
      ReplayConfig c = one_tier(kv.first, 500);
      c.tiers.push_back({"dram", 1500, json{{"name", kv.first}}, ""});
      NextReferences nr = next_references(s, 1);
      ReplayResult r = replay(s, c, &nr);
      CHECK(r.hits() + r.misses == r.references);
      CHECK(r.hits() > 0);
      CHECK(r.hits() <= s.refs.size() - s.blocks());
      (void)lru;
    }
  }
}

TEST_CASE("replay: bad configurations are errors") {
  BlockStream s = stream_of({{1}});
  ReplayConfig c = one_tier("lru", 0);
  CHECK_THROWS_WITH(replay(s, c, nullptr), Catch::Contains("capacity must be at least one block"));
  ReplayConfig d = one_tier("no-such-policy", 4);
  CHECK_THROWS_WITH(replay(s, d, nullptr), Catch::Contains("unknown eviction policy 'no-such-policy'"));
}

TEST_CASE("replay: a warm-up fills the cache but is not counted") {
  // A B | A B C A: after two warm-up requests, A and B hit, C misses, A hits.
  BlockStream s = stream_of({{1}, {2}, {1}, {2}, {3}, {1}});
  ReplayConfig c = one_tier("lru", 10);
  ReplayResult cold = replay(s, c, nullptr);
  CHECK(cold.references == 6);
  CHECK(cold.hits() == 3);
  c.warmup_requests = 2;
  ReplayResult warm = replay(s, c, nullptr);
  CHECK(warm.references == 4);
  CHECK(warm.requests == 4);
  CHECK(warm.hits() == 3);
  CHECK(warm.misses == 1);
  // The warm-up counts requests of the stream played back to back.
  c.repeat = 2;
  c.warmup_requests = 6;
  ReplayResult second = replay(s, c, nullptr);
  CHECK(second.references == 6);
  CHECK(second.hits() == 6);
  // The streamed session and the stack distances agree.
  ReplaySession session(c, s.blocks());
  for (uint32_t rep = 0; rep < 2; ++rep)
    for (uint64_t r = 0, i = 0; r < s.requests; ++r) {
      uint64_t end = s.request_end[r];
      session.request(s.refs.data() + i, end - i);
      i = end;
    }
  CHECK(session.result().references == 6);
  CHECK(session.result().hits() == 6);
  StackDistances sd = lru_stack_distances(s, ReplaySemantics::Block, 2, 512, 6);
  CHECK(sd.references == 6);
  CHECK(sd.hits_within(10) == 6);
  c.warmup_requests = 12;
  CHECK_THROWS_WITH(replay(s, c, nullptr), Catch::Contains("leaves none of the 12"));
}

TEST_CASE("replay: byte ratios count the tokens of partial last blocks") {
  // Blocks of 512 tokens; request 1 is 1.25 blocks (its last holds 128),
  // request 2 repeats its first block and adds a 256-token one.
  BlockStream s = stream_of({{1, 2}, {1, 3}, {2}});
  const TailTokens tails = {128, 256, 128};
  ReplayConfig c = one_tier("lru", 10);
  ReplayResult r = replay(s, c, nullptr, &tails);
  CHECK(r.references == 5);
  CHECK(r.tokens == 512 + 128 + 512 + 256 + 128);
  CHECK(r.hits() == 2);                         // 1 (512 tokens) and 2 (128)
  CHECK(r.tiers[0].hit_tokens == 512 + 128);
  json j = to_json(r, c);
  CHECK(j["miss_ratio"].get<double>() == Approx(3.0 / 5.0));
  CHECK(j["byte_miss_ratio"].get<double>() == Approx(1.0 - 640.0 / 1536.0));
  CHECK(j["prefill_tokens_saved"] == 640);
  // Without sizes every block is full: the byte ratio is the block ratio.
  ReplayResult full = replay(s, c, nullptr);
  CHECK(to_json(full, c)["byte_miss_ratio"].get<double>() == Approx(3.0 / 5.0));
  // Stack distances count the same tokens, at every capacity.
  BlockStream syn = synthetic();
  TailTokens st(syn.requests);
  for (uint64_t i = 0; i < st.size(); ++i) st[i] = uint32_t(1 + (i * 37) % 512);
  for (ReplaySemantics sem : {ReplaySemantics::Block, ReplaySemantics::Prefix}) {
    StackDistances sd = lru_stack_distances(syn, sem, 1, 512, 40, &st);
    for (uint64_t cap : {1, 64, 500, 3000}) {
      ReplayConfig k = one_tier("lru", cap);
      k.semantics = sem;
      k.warmup_requests = 40;
      ReplayResult rr = replay(syn, k, nullptr, &st);
      CHECK(sd.tokens == rr.tokens);
      CHECK(sd.hits_within(cap) == rr.hits());
      CHECK(sd.hits_within(cap) * 512 - sd.short_within(cap) == rr.tiers[0].hit_tokens);
    }
  }
}

namespace {

// Every insertion and removal, as the session tells them.
struct Recorder : ReplayObserver {
  std::vector<std::array<uint32_t, 3>> events;
  void entered(uint32_t b, uint32_t t) override { events.push_back({1, b, t}); }
  void left(uint32_t b, uint32_t t) override { events.push_back({0, b, t}); }
};

}  // namespace

TEST_CASE("a session sized by what its tiers hold gives every block's answer the full session gives", "[replay]") {
  for (const char* policy : {"lru", "fifo"})
    for (bool inclusive : {false, true})
      for (bool promote : {true, false}) {
        CAPTURE(policy, inclusive, promote);
        auto cfg = [&] {
          ReplayConfig c;
          for (uint64_t cap : {7, 23}) {
            ReplayTierSpec t;
            t.name = "t" + std::to_string(cap);
            t.capacity_blocks = cap;
            t.policy = json{{"name", policy}};
            c.tiers.push_back(t);
          }
          c.inclusive = inclusive;
          c.promote = promote;
          c.block_tokens = 16;
          return c;
        };
        ReplayConfig a = cfg(), b = cfg();
        const uint64_t blocks = 5000;
        ReplaySession full(a, blocks), compact(b, blocks, 7 + 23 + 1);
        REQUIRE(!full.compact());
        REQUIRE(compact.compact());
        Recorder ra, rb;
        full.observe(&ra);
        compact.observe(&rb);
        uint64_t x = 12345;
        for (int i = 0; i < 20000; ++i) {
          x = x * 6364136223846793005ULL + 1442695040888963407ULL;
          // Mostly a hot set, sometimes a block from the whole range.
          const uint32_t blk = (x >> 60) < 12 ? uint32_t((x >> 33) % 60) : uint32_t((x >> 33) % blocks);
          REQUIRE(full.holder(blk) == compact.holder(blk));
          REQUIRE(full.reference(blk) == compact.reference(blk));
        }
        CHECK(ra.events == rb.events);
        for (uint32_t u = 0; u < 2; ++u) {
          CHECK(full.used(u) == compact.used(u));
          CHECK(full.inserted(u) == compact.inserted(u));
        }
      }
  // A policy that remembers blocks after they leave (ARC's ghosts) keeps the full table.
  ReplayConfig c;
  ReplayTierSpec t;
  t.name = "arc";
  t.capacity_blocks = 8;
  t.policy = json{{"name", "arc"}};
  c.tiers.push_back(t);
  c.block_tokens = 16;
  ReplaySession arc(c, 1000, 9);
  CHECK(!arc.compact());
}
