#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/traces/request_files.h"
#include "traces/request_trace.h"

using namespace kvtier;
using kvtier::test::read_error;
using kvtier::test::request_file;


TEST_CASE("azure: lengths and arrival times relative to the first request, no block ids") {
  std::string p = request_file("az.csv",
                               "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                               "2023-11-16 18:17:03.9799600,4808,10\r\n"
                               "2023-11-16 18:17:05.4799600,3180,8\r\n"
                               "2023-11-17 00:00:00.0,1,0\r\n");
  CHECK(detect_request_trace(p) == RequestTraceKind::Azure);
  auto src = open_request_trace(p);
  CHECK_FALSE(src->has_blocks());
  Request r;
  REQUIRE(src->next(r));
  CHECK(r.arrival_s == 0.0);
  CHECK(r.input_tokens == 4808);
  CHECK(r.output_tokens == 10);
  CHECK(r.blocks.empty());
  REQUIRE(src->next(r));
  CHECK(r.arrival_s == Approx(1.5).margin(1e-6));
  REQUIRE(src->next(r));
  CHECK(r.arrival_s == Approx(5 * 3600 + 42 * 60 + 56.02004).margin(1e-4));  // across midnight
  CHECK_FALSE(src->next(r));
}

TEST_CASE("azure: the code trace's figures") {
  REQUIRE(std::filesystem::exists(kvtier::test::kAzureFull));
  auto src = open_request_trace(kvtier::test::kAzureFull);
  RequestStats s = request_stats(*src);
  CHECK(s.requests == 8819);
  CHECK_FALSE(s.has_blocks);
  CHECK(s.block_refs == 0);
  CHECK(s.mean_input_tokens == Approx(2047.8).margin(0.1));
  CHECK(s.mean_output_tokens == Approx(27.9).margin(0.1));
  CHECK(s.duration_s == Approx(3435.9).margin(0.1));
}

TEST_CASE("azure: no block stream to replay") {
  std::string p = request_file("az2.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,48,1\n");
  auto src = open_request_trace(p);
  CHECK_THROWS_WITH(load_block_stream(*src), Catch::Contains(p + ": the requests carry no block ids"));
}

TEST_CASE("azure: bad input is one line naming the file, the line and what was expected") {
  const std::string h = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  const std::string ok = "2023-11-16 18:17:03.9799600,4808,10\n";
  struct Case {
    const char* name;
    std::string text, expect;
  };
  std::vector<Case> cases = {
      {"header.csv", "time,context,generated\n" + ok, ":1: expected the Azure LLM inference CSV header"},
      {"empty.csv", "", ": empty file"},
      {"noreq.csv", h, ":1: no requests after the header"},
      {"fields.csv", h + ok + "2023-11-16 18:17:04.0,12\n", ":3: expected 3 fields"},
      {"negative.csv", h + ok + "2023-11-16 18:17:04.0,-12,3\n", ":3: ContextTokens: expected a non-negative integer"},
      {"fraction.csv", h + ok + "2023-11-16 18:17:04.0,12,3.5\n", ":3: GeneratedTokens: expected a non-negative"},
      {"time.csv", h + ok + "yesterday,12,3\n", ":3: TIMESTAMP: expected a date and time"},
      {"backwards.csv", h + ok + "2023-11-16 18:17:01.0,12,3\n", ":3: timestamp 2023-11-16 18:17:01.0 is before"},
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
