// Format v2: per-sequence records, head groups and prompt records through the
// JSON-lines writer and reader and the binary container, round trips byte for
// byte, and v1 files still read.
#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>

#include "trace_files.h"
#include "traces/attention_binary.h"
#include "traces/attention_source.h"
#include "traces/synthetic.h"

using namespace kvtier;
using namespace trace_files;

namespace {
struct Rec {
  AttentionRecord r;
  std::vector<float> g;
};
std::vector<Rec> read_all(AttentionFileSource& src) {
  std::vector<Rec> out;
  Rec x;
  while (src.next(x.r)) {
    x.g = src.group_mass();
    out.push_back(x);
  }
  return out;
}
}  // namespace

TEST_CASE("v2 JSON lines: sequences, head groups and prompt records read back as written") {
  const std::string p = tmp("small.jsonl");
  {
    JsonlTraceWriter w(p, small_header(), 2);
    write_small(w);
  }
  JsonlTraceReader r(p);
  CHECK(r.header().version == 2);
  CHECK(r.header().sequences == 3);
  CHECK(r.header().has_prompt);
  CHECK(r.head_groups() == 2);
  REQUIRE(r.prompt(2, 1) != nullptr);
  CHECK((*r.prompt(2, 1))[1] == 0.27f);
  CHECK(r.prompt(3, 0) == nullptr);
  auto recs = read_all(r);
  REQUIRE(recs.size() == 3 * 2 * 3);
  CHECK(recs[4].r.step == 0);
  CHECK(recs[4].r.layer == 1);
  CHECK(recs[4].r.seq == 1);
  CHECK(recs[4].r.mass[0] == 0.2f + 0.001f);
  REQUIRE(recs[4].g.size() == 6);
  CHECK(recs[4].g[3] == recs[4].r.mass[0] * 1.5f);
}

TEST_CASE("JSON lines -> binary -> JSON lines is byte-identical, and binary -> JSON lines -> binary too") {
  const std::string a = tmp("rt_a.jsonl"), b = tmp("rt_b.trace"), c = tmp("rt_c.jsonl"), d = tmp("rt_d.trace");
  {
    JsonlTraceWriter w(a, small_header(), 2);
    write_small(w);
  }
  auto copy = [](AttentionFileSource& src, AttentionWriter& w) {
    const auto& h = src.header();
    for (uint32_t l = 0; l < h.layers; ++l)
      for (uint32_t s = 0; s < h.sequences; ++s)
        if (auto* p = src.prompt(s, l)) w.prompt(l, s, *p);
    AttentionRecord r;
    while (src.next(r)) w.write(r, &src.group_mass());
    w.close();
  };
  for (MassEncoding enc : {MassEncoding::F32, MassEncoding::F16}) {
    {
      JsonlTraceReader in(a);
      BinaryTraceWriter w(b, in.header(), in.head_groups(), enc);
      copy(in, w);
    }
    {
      BinaryTraceReader in(b);
      CHECK(in.mass_encoding() == enc);
      JsonlTraceWriter w(c, in.header(), in.head_groups());
      copy(in, w);
    }
    {
      JsonlTraceReader in(c);
      BinaryTraceWriter w(d, in.header(), in.head_groups(), enc);
      copy(in, w);
    }
    CHECK(slurp(b) == slurp(d));  // the kept values survive the text form exactly
    if (enc == MassEncoding::F32) CHECK(slurp(a) == slurp(c));
    CHECK(slurp(b).size() < slurp(a).size());
  }
}

TEST_CASE("f16 masses: each within 2^-11 relative of the float32 value") {
  const std::string a = tmp("q.jsonl"), b = tmp("q.trace");
  {
    JsonlTraceWriter w(a, small_header(), 2);
    write_small(w);
  }
  {
    JsonlTraceReader in(a);
    BinaryTraceWriter w(b, in.header(), 2, MassEncoding::F16);
    const auto& h = in.header();
    for (uint32_t l = 0; l < h.layers; ++l)
      for (uint32_t s = 0; s < h.sequences; ++s) w.prompt(l, s, *in.prompt(s, l));
    AttentionRecord r;
    while (in.next(r)) w.write(r, &in.group_mass());
    w.close();
  }
  JsonlTraceReader exact(a);
  BinaryTraceReader quant(b);
  AttentionRecord x, y;
  uint64_t n = 0;
  while (exact.next(x)) {
    REQUIRE(quant.next(y));
    CHECK(x.blocks == y.blocks);
    for (size_t i = 0; i < x.mass.size(); ++i) CHECK(std::fabs(y.mass[i] - x.mass[i]) <= x.mass[i] * 0x1p-11f);
    ++n;
  }
  CHECK_FALSE(quant.next(y));
  CHECK(n == 18);
}

TEST_CASE("v1 files still read, through the factory, and round-trip through the binary container") {
  json p = json::object();
  SyntheticAttention gen(p, "t", 3, 300, 4, 64, 5);
  AttentionHeader h = gen.header();
  h.has_prompt = false;  // v1 has no prompt records
  const std::string v1 = tmp("v1.jsonl"), bin = tmp("v1.trace"), back = tmp("v1_back.jsonl");
  {
    JsonlAttentionWriter w(v1, h);
    AttentionRecord r;
    while (gen.next(r)) w.write(r);
    w.close();
  }
  auto src = open_attention_file(v1);
  CHECK(src->header().version == 1);
  CHECK(src->header().sequences == 1);
  {
    BinaryTraceWriter w(bin, src->header(), 1);
    AttentionRecord r;
    while (src->next(r)) {
      CHECK(r.seq == kAllSequences);
      w.write(r);
    }
    w.close();
  }
  CHECK(is_binary_trace(bin));
  auto b = open_attention_file(bin);
  {
    JsonlTraceWriter w(back, b->header(), 1);
    AttentionRecord r;
    while (b->next(r)) w.write(r);
    w.close();
  }
  CHECK(slurp(v1) == slurp(back));
}

TEST_CASE("the factory knows every kind and checks a file's shape against the run") {
  const std::string p = tmp("shape.trace");
  {
    BinaryTraceWriter w(p, small_header(), 2);
    write_small(w);
  }
  json f = {{"kind", "file"}, {"path", p}};
  auto src = make_attention_source(f, "workload.trace", 2, 20, 3, 8, 1, 1);
  REQUIRE(src);
  CHECK(src->header().sequences == 3);
  json f2 = {{"kind", "file"}, {"path", p}};
  CHECK_THROWS_WITH(make_attention_source(f2, "workload.trace", 4, 20, 3, 8, 1, 1),
                    Catch::Contains(p) && Catch::Contains("layers 2 but model.layers is 4"));
  json s = {{"kind", "synthetic"}};
  CHECK(make_attention_source(s, "workload.trace", 2, 100, 3, 16, 1, 1)->header().has_prompt);
  json pt = {{"kind", "patterns"}};
  CHECK(make_attention_source(pt, "workload.trace", 2, 100, 3, 16, 4, 1)->header().sequences == 4);
  json none = {{"kind", "none"}};
  CHECK(make_attention_source(none, "workload.trace", 2, 100, 3, 16, 1, 1) == nullptr);
  json bad = {{"kind", "magic"}};
  CHECK_THROWS_WITH(make_attention_source(bad, "workload.trace", 2, 100, 3, 16, 1, 1),
                    Catch::Contains("workload.trace.kind") && Catch::Contains("patterns"));
}

// A full disk (the writer's file is /dev/full): the first write that fails
// stops the writer with a ConfigError, long before the records run out, and
// the unfinished file is gone.
TEST_CASE("trace writers stop at the first failed write and leave nothing behind") {
  std::error_code ec;
  if (!std::filesystem::exists("/dev/full", ec)) {
    WARN("skipped: this system has no /dev/full");
    return;
  }
  AttentionHeader h = small_header();
  AttentionRecord rec;
  rec.layer = 0;
  rec.blocks.assign(64, 1);
  rec.mass.assign(64, 0.01f);
  for (int binary = 0; binary < 2; ++binary) {
    const std::string p = tmp(binary ? "full.trace" : "full.jsonl");
    std::filesystem::remove(p + ".tmp", ec);
    std::filesystem::create_symlink("/dev/full", p + ".tmp");
    uint64_t written = 0;
    bool stopped = false;
    try {
      std::unique_ptr<AttentionWriter> w;
      if (binary)
        w = std::make_unique<BinaryTraceWriter>(p, h, 1, MassEncoding::F32, 1, 4096);
      else
        w = std::make_unique<JsonlTraceWriter>(p, h);
      for (; written < 1000000; ++written) {
        rec.step = static_cast<uint32_t>(written);
        w->write(rec);
      }
      w->close();
    } catch (const ConfigError& e) {
      stopped = true;
      CHECK(std::string(e.what()).find("write failed") != std::string::npos);
    }
    CHECK(stopped);
    CHECK(written < 1000);  // stopped within a few stdio buffers, not at close
    CHECK_FALSE(std::filesystem::exists(p, ec));
    CHECK_FALSE(std::filesystem::is_symlink(p + ".tmp", ec));
  }
}
