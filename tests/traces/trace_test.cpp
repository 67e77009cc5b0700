// Attention trace format v1: the synthetic generator, the writer and the
// streaming reader, and the reader's errors.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "traces/attention_trace.h"
#include "traces/synthetic.h"

using namespace kvtier;
namespace fs = std::filesystem;

namespace {
std::string tmp_path(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("kvtier_trace_test." + std::to_string(getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

SyntheticAttention make_gen(uint64_t seed, json p = json::object()) {
  return SyntheticAttention(p, "trace", 4, 1000, 6, 128, seed);
}
}  // namespace

TEST_CASE("synthetic trace: sinks and recent window always, ~heavy_fraction more, masses sum to 1") {
  auto g = make_gen(7);
  AttentionRecord r;
  uint64_t n = 0;
  while (g.next(r)) {
    ++n;
    const uint32_t blocks = g.header().blocks_at(r.step);
    CHECK(std::count(r.blocks.begin(), r.blocks.end(), 0u) == 1);           // the sink
    CHECK(std::count(r.blocks.begin(), r.blocks.end(), blocks - 1) == 1);  // the newest block
    double total = 0;
    for (float m : r.mass) total += m;
    CHECK(total == Approx(1.0).epsilon(1e-5));
    for (uint32_t b : r.blocks) CHECK(b < blocks);
  }
  CHECK(n == 6 * 4);
}

TEST_CASE("synthetic trace: same seed same records, other seed other records") {
  auto a = make_gen(1), b = make_gen(1), c = make_gen(2);
  AttentionRecord ra, rb, rc;
  bool differs = false;
  while (a.next(ra)) {
    REQUIRE(b.next(rb));
    REQUIRE(c.next(rc));
    CHECK(ra.blocks == rb.blocks);
    CHECK(ra.mass == rb.mass);
    differs = differs || ra.blocks != rc.blocks;
  }
  CHECK(differs);
}

TEST_CASE("a written trace reads back identically") {
  auto g = make_gen(3);
  std::string path = tmp_path("roundtrip.jsonl");
  {
    JsonlAttentionWriter w(path, g.header());
    AttentionRecord r;
    while (g.next(r)) w.write(r);
    w.close();
  }
  auto again = make_gen(3);
  JsonlAttentionReader rd(path);
  CHECK(rd.header().layers == 4);
  CHECK(rd.header().context_tokens == 1000);
  AttentionRecord x, y;
  while (again.next(x)) {
    REQUIRE(rd.next(y));
    CHECK(x.step == y.step);
    CHECK(x.layer == y.layer);
    CHECK(x.blocks == y.blocks);
    CHECK(x.mass == y.mass);
  }
  CHECK_FALSE(rd.next(y));
}

TEST_CASE("an unfinished writer leaves no file behind") {
  std::string path = tmp_path("unfinished.jsonl");
  fs::remove(path);
  {
    auto g = make_gen(1);
    JsonlAttentionWriter w(path, g.header());
  }
  CHECK_FALSE(fs::exists(path));
  CHECK_FALSE(fs::exists(path + ".tmp"));
}

TEST_CASE("reader errors name file and line") {
  auto write = [](const std::string& name, const std::string& text) {
    std::string p = tmp_path(name);
    std::ofstream(p) << text;
    return p;
  };
  const std::string hdr =
      R"({"format":"kvtier-attention-trace","version":1,"layers":2,"steps":1,"block_tokens":128,"context_tokens":256})";
  auto err = [](const std::string& p) -> std::string {
    try {
      JsonlAttentionReader r(p);
      AttentionRecord rec;
      while (r.next(rec)) {
      }
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  std::string p = write("bad_json.jsonl", hdr + "\n{\"step\":0,\"layer\":0,\"blocks\":[0],\"mass\":[1]}\n{oops\n");
  CHECK_THAT(err(p), Catch::Contains(p + ":3:"));
  p = write("bad_order.jsonl", hdr + "\n{\"step\":0,\"layer\":1,\"blocks\":[0],\"mass\":[1]}\n");
  CHECK_THAT(err(p), Catch::Contains(p + ":2: expected step 0 layer 0"));
  p = write("bad_block.jsonl", hdr + "\n{\"step\":0,\"layer\":0,\"blocks\":[9],\"mass\":[1]}\n");
  CHECK_THAT(err(p), Catch::Contains(p + ":2: blocks[0] = 9 does not exist"));
  p = write("bad_mass.jsonl", hdr + "\n{\"step\":0,\"layer\":0,\"blocks\":[0,1],\"mass\":[1]}\n");
  CHECK_THAT(err(p), Catch::Contains(p + ":2: \"mass\""));
  p = write("short.jsonl", hdr + "\n{\"step\":0,\"layer\":0,\"blocks\":[0],\"mass\":[1]}\n");
  CHECK_THAT(err(p), Catch::Contains(p + ":2: trace ends early"));
  p = write("not_a_trace.jsonl", "{\"hello\": 1}\n");
  CHECK_THAT(err(p), Catch::Contains(p + ":1:"));
  CHECK_THAT(err(tmp_path("does_not_exist.jsonl")), Catch::Contains("cannot open"));
}
