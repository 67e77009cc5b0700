#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <iterator>

#include "tests/traces/request_files.h"
#include "traces/oracle_general.h"

using namespace kvtier;

namespace {
struct ExportedRecord {
  uint32_t ts;
  uint64_t id;
  uint32_t size;
  int64_t next;
};
std::vector<ExportedRecord> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(b.size() % 24 == 0);
  std::vector<ExportedRecord> out;
  for (size_t o = 0; o < b.size(); o += 24) {
    ExportedRecord r;
    std::memcpy(&r.ts, &b[o], 4);  // little-endian host
    std::memcpy(&r.id, &b[o + 4], 8);
    std::memcpy(&r.size, &b[o + 12], 4);
    std::memcpy(&r.next, &b[o + 16], 8);
    out.push_back(r);
  }
  return out;
}
}  // namespace

TEST_CASE("oracleGeneral export: 24-byte records with ids, sizes and next-access times") {
  std::string p = kvtier::test::request_file(
      "ex.jsonl",
      "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [50, 7]}\n"
      "{\"timestamp\": 2500, \"input_length\": 1536, \"output_length\": 1, \"hash_ids\": [50, 7, 8]}\n");
  auto src = open_request_trace(p);
  BlockStream s = load_block_stream(*src);
  std::string out = kvtier::test::request_file("ex.bin", "");
  OracleGeneralOptions o;
  o.object_size = 4096;
  CHECK(write_oracle_general(out, s, o) == 5);
  auto r = read_records(out);
  REQUIRE(r.size() == 5);
  CHECK(r[0].id == 50);
  CHECK(r[1].id == 7);
  CHECK(r[4].id == 8);
  CHECK(r[0].ts == 0);
  CHECK(r[2].ts == 2);  // whole seconds
  CHECK(r[0].size == 4096);
  CHECK(r[0].next == 2);
  CHECK(r[1].next == 3);
  CHECK(r[2].next == -1);
  CHECK(r[4].next == -1);

  o.repeat = 2;
  o.dense_ids = true;
  CHECK(write_oracle_general(out, s, o) == 10);
  r = read_records(out);
  CHECK(r[1].id == 1);
  CHECK(r[4].id == 2);
  CHECK(r[2].next == 5);   // block 50 opens the second playback
  CHECK(r[4].next == 9);
  CHECK(r[9].next == -1);
  CHECK(r[5].ts == 3);     // shifted by the last arrival + 1 s
}

TEST_CASE("oracleGeneral export: an unwritable path is an error and leaves nothing") {
  std::string p = kvtier::test::request_file(
      "ex2.jsonl", "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n");
  auto src = open_request_trace(p);
  BlockStream s = load_block_stream(*src);
  CHECK_THROWS_WITH(write_oracle_general("/nonexistent-dir/x.bin", s, {}),
                    Catch::StartsWith("/nonexistent-dir/x.bin: cannot write"));
}
