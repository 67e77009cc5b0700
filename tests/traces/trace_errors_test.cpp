// Bad trace files: every error names the file and the record, for JSON lines
// and the binary container alike.
#include <catch2/catch.hpp>
#include <cmath>

#include "trace_files.h"
#include "traces/attention_binary.h"
#include "traces/attention_source.h"

using namespace kvtier;
using namespace trace_files;

namespace {
std::string small_binary(const std::string& name) {
  const std::string p = tmp(name);
  BinaryTraceWriter w(p, small_header(), 2);
  write_small(w);
  return p;
}
std::string small_jsonl(const std::string& name) {
  const std::string p = tmp(name);
  JsonlTraceWriter w(p, small_header(), 2);
  write_small(w);
  return p;
}
// Opens and reads every record; returns the error text, or "" if none.
std::string attention_read_error(const std::string& p) {
  try {
    auto s = open_attention_file(p);
    AttentionRecord r;
    while (s->next(r)) {
    }
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
// Replaces the first occurrence of `a` by `b` in the file's line `line` (1-based).
void edit_line(const std::string& p, int line, const std::string& a, const std::string& b) {
  std::string s = slurp(p);
  size_t pos = 0;
  for (int i = 1; i < line; ++i) pos = s.find('\n', pos) + 1;
  size_t at = s.find(a, pos);
  REQUIRE(at != std::string::npos);
  REQUIRE(at < s.find('\n', pos));
  s.replace(at, a.size(), b);
  spit(p, s);
}
}  // namespace

TEST_CASE("binary: a truncated file names the file and says truncated") {
  const std::string p = small_binary("trunc.trace");
  std::string s = slurp(p);
  for (size_t cut : {s.size() - 3, s.size() / 2, size_t(20)}) {
    spit(p, s.substr(0, cut));
    const std::string e = attention_read_error(p);
    CHECK_THAT(e, Catch::Contains(p) && Catch::Contains("truncated"));
  }
}

TEST_CASE("binary: a damaged chunk fails its checksum") {
  const std::string p = small_binary("crc.trace");
  std::string s = slurp(p);
  // The HEAD chunk starts at byte 12: tag, count, raw size, compressed size, then
  // its zstd frame, whose last 4 bytes are the content checksum.
  uint32_t comp = 0;
  for (int i = 0; i < 4; ++i) comp |= static_cast<uint32_t>(static_cast<unsigned char>(s[12 + 12 + i])) << (8 * i);
  s[12 + 16 + comp - 1] ^= 0x5A;
  spit(p, s);
  CHECK_THAT(attention_read_error(p), Catch::Contains(p) && Catch::Contains("chunk 1") && Catch::Contains("bad checksum"));
}

TEST_CASE("binary: a wrong container version and a wrong format version") {
  const std::string p = small_binary("ver.trace");
  std::string s = slurp(p);
  s[8] = 9;
  spit(p, s);
  CHECK_THAT(attention_read_error(p), Catch::Contains(p) && Catch::Contains("container version 9"));
  const std::string j = small_jsonl("ver.jsonl");
  edit_line(j, 1, "\"version\":2", "\"version\":3");
  CHECK_THAT(attention_read_error(j), Catch::Contains(j + ":1:") && Catch::Contains("unsupported version 3"));
}

TEST_CASE("JSON lines: block past the context, negative mass, NaN, records out of order") {
  // Line 1 header, lines 2-7 prompt records, line 8 the first decode record (step 0 layer 0 seq 0).
  std::string p = small_jsonl("past.jsonl");
  edit_line(p, 8, "\"blocks\":[2,", "\"blocks\":[3,");
  CHECK_THAT(attention_read_error(p), Catch::Contains(p + ":8:") && Catch::Contains("does not exist at step 0"));
  p = small_jsonl("neg.jsonl");
  edit_line(p, 9, "\"mass\":[0.2", "\"mass\":[-0.2");
  CHECK_THAT(attention_read_error(p), Catch::Contains(p + ":9:") && Catch::Contains(">= 0"));
  p = small_jsonl("nan.jsonl");
  edit_line(p, 9, "\"mass\":[0.2", "\"mass\":[NaN");
  CHECK_THAT(attention_read_error(p), Catch::Contains(p + ":9:") && Catch::Contains("not valid JSON"));
  p = small_jsonl("order.jsonl");
  edit_line(p, 9, "\"seq\":1", "\"seq\":2");
  CHECK_THAT(attention_read_error(p), Catch::Contains(p + ":9:") && Catch::Contains("expected step 0 layer 0 sequence 1"));
  p = small_jsonl("early.jsonl");
  std::string s = slurp(p);
  spit(p, s.substr(0, s.rfind('\n', s.size() - 2) + 1));
  CHECK_THAT(attention_read_error(p), Catch::Contains(p) && Catch::Contains("ends early"));
}

TEST_CASE("binary: NaN and negative masses and out-of-order records are refused when read") {
  auto h = small_header();
  h.sequences = 1;
  h.has_prompt = false;
  for (int bad = 0; bad < 3; ++bad) {
    const std::string p = tmp("badmass" + std::to_string(bad) + ".trace");
    {
      BinaryTraceWriter w(p, h, 1);
      AttentionRecord r;
      for (uint32_t step = 0; step < h.steps; ++step)
        for (uint32_t l = 0; l < h.layers; ++l) {
          r.step = step;
          r.layer = (bad == 2 && step == 1) ? 1 - l : l;
          r.seq = kAllSequences;
          r.blocks = {0, 1};
          r.mass = {0.5f, step == 2 && bad == 0 ? std::nanf("") : (step == 2 && bad == 1 ? -0.5f : 0.5f)};
          w.write(r);
        }
      w.close();
    }
    const std::string e = attention_read_error(p);
    CHECK_THAT(e, Catch::Contains(p) && Catch::Contains("record " + std::to_string(bad == 2 ? 2 : 4)));
    CHECK_THAT(e, Catch::Contains(bad == 2 ? "expected step 1 layer 0" : "expected a finite number >= 0"));
  }
}

TEST_CASE("a missing prompt record is an error, and a policy that needs one gets a named error") {
  std::string p = small_jsonl("noprompt.jsonl");
  std::string s = slurp(p);
  const size_t a = s.find('\n') + 1, b = s.find('\n', a) + 1;
  spit(p, s.substr(0, a) + s.substr(b));  // drop the first prompt record
  CHECK_THAT(attention_read_error(p), Catch::Contains(p) && Catch::Contains("missing the prompt record for layer 0 sequence 0"));

  auto h = small_header();
  h.has_prompt = false;
  h.sequences = 1;
  const std::string q = tmp("noprompt.trace");
  {
    BinaryTraceWriter w(q, h, 1);
    AttentionRecord r;
    for (uint32_t step = 0; step < h.steps; ++step)
      for (uint32_t l = 0; l < h.layers; ++l) {
        r.step = step;
        r.layer = l;
        r.blocks = {0};
        r.mass = {1.f};
        w.write(r);
      }
    w.close();
  }
  auto src = open_attention_file(q);
  CHECK_THROWS_WITH(require_prompt(*src, 5, 1, "the prefill placement"),
                    Catch::Contains(q) && Catch::Contains("no prompt record for layer 1 sequence 0") &&
                        Catch::Contains("the prefill placement"));
}

TEST_CASE("a writer that is not closed leaves no file behind") {
  const std::string p = tmp("unfinished.trace");
  std::filesystem::remove(p);
  {
    BinaryTraceWriter w(p, small_header(), 2);
    w.prompt(0, 0, {0.5f, 0.25f, 0.25f});
  }
  CHECK_FALSE(std::filesystem::exists(p));
  CHECK_FALSE(std::filesystem::exists(p + ".tmp"));
}
