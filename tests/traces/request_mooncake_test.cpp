#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/traces/request_files.h"
#include "traces/request_trace.h"

using namespace kvtier;
using kvtier::test::read_error;
using kvtier::test::request_file;


TEST_CASE("mooncake: fields, block ids and arrival times in seconds") {
  std::string p = request_file("mc.jsonl",
                               "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 7, \"hash_ids\": [0, 1, 2]}\n"
                               "\n"
                               "{\"timestamp\": 1500, \"input_length\": 600, \"output_length\": 3, \"hash_ids\": [0, 9]}\n");
  CHECK(detect_request_trace(p) == RequestTraceKind::Mooncake);
  auto src = open_request_trace(p);
  CHECK(src->block_tokens() == 512);
  CHECK(src->has_blocks());
  Request r;
  REQUIRE(src->next(r));
  CHECK(r.arrival_s == 0.0);
  CHECK(r.input_tokens == 1100);
  CHECK(r.output_tokens == 7);
  CHECK(r.blocks == std::vector<uint64_t>{0, 1, 2});
  REQUIRE(src->next(r));
  CHECK(r.arrival_s == Approx(1.5));
  CHECK(r.blocks == std::vector<uint64_t>{0, 9});
  CHECK_FALSE(src->next(r));
}

TEST_CASE("mooncake: stats of the conversation trace match the paper (36.6% unbounded hit ratio)") {
  REQUIRE(std::filesystem::exists(kvtier::test::kMooncakeFull));
  auto src = open_request_trace(kvtier::test::kMooncakeFull);
  RequestStats s = request_stats(*src);
  CHECK(s.requests == 12031);
  CHECK(s.block_refs == 288500);
  CHECK(s.distinct_blocks == 182790);
  CHECK(s.unbounded_hits == 105710);
  CHECK(s.unbounded_hit_ratio() == Approx(0.366).margin(0.0005));
  CHECK(s.mean_input_tokens == Approx(12035).margin(1));
  CHECK(s.mean_output_tokens == Approx(343).margin(1));
  // Prefix semantics can only serve fewer.
  CHECK(s.unbounded_prefix_hits <= s.unbounded_hits);
}

TEST_CASE("mooncake: dense block stream keeps the reference order and request boundaries") {
  std::string p = request_file("dense.jsonl",
                               "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [50, 7]}\n"
                               "{\"timestamp\": 1, \"input_length\": 1536, \"output_length\": 1, \"hash_ids\": [50, 7, 8]}\n");
  auto src = open_request_trace(p);
  BlockStream s = load_block_stream(*src);
  CHECK(s.refs == std::vector<uint32_t>{0, 1, 0, 1, 2});
  CHECK(s.ids == std::vector<uint64_t>{50, 7, 8});
  CHECK(s.request_end == std::vector<uint64_t>{2, 5});
  NextReferences nr = next_references(s, 2);
  CHECK(nr.next_position(0, 0, 0) == 2);
  CHECK(nr.next_position(2, 0, 0) == 5);  // block 50 again at the start of the second playback
  CHECK(nr.next_position(4, 0, 2) == 9);
  CHECK(nr.next_position(4, 1, 2) == NextReferences::kNoNext);
}

TEST_CASE("mooncake: bad input is one line naming the file, the line and what was expected") {
  struct Case {
    const char* name;
    std::string text;
    std::string expect;
  };
  const std::string ok = "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1, 2]}\n";
  std::vector<Case> cases = {
      {"truncated.jsonl", ok + "{\"timestamp\": 5, \"input_length\": 600, \"outp", ":2: expected one JSON object"},
      {"missing.jsonl", ok + "{\"timestamp\": 5, \"input_length\": 600, \"hash_ids\": [1]}\n",
       ":2: missing field \"output_length\""},
      {"negative.jsonl", ok + "{\"timestamp\": 5, \"input_length\": -3, \"output_length\": 1, \"hash_ids\": []}\n",
       ":2: input_length: expected a non-negative integer"},
      {"fraction.jsonl", ok + "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 1.5, \"hash_ids\": [1]}\n",
       ":2: output_length: expected a non-negative integer"},
      {"backwards.jsonl", "{\"timestamp\": 9, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1]}\n" + ok,
       ":2: timestamp 0 ms is before the previous request's"},
      {"toolong.jsonl", ok + "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}\n",
       ":2: hash_ids: 3 blocks, but input_length 600 fills at most 2 blocks"},
      {"badid.jsonl", ok + "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1, -2]}\n",
       ":2: hash_ids[1]: expected a non-negative integer block id"},
      {"empty.jsonl", "", ": empty file"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      std::string p = request_file(c.name, c.text);
      std::string e = read_error(p);
      INFO(e);
      CHECK(e.find(p) == 0);
      CHECK(e.find(c.expect) != std::string::npos);
      CHECK(e.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("request traces: a file of another kind is named in the error") {
  std::string p = request_file("other.jsonl", "{\"kvtier-attention-trace\": 1}\n");
  CHECK(detect_request_trace(p) == RequestTraceKind::Unknown);
  CHECK_FALSE(is_request_trace(p));
  std::string e = read_error(p);
  CHECK(e.find(p + ":1: not a request trace") == 0);
  CHECK_FALSE(is_request_trace(request_file("nothing.jsonl", "")));
}
