// Helpers shared by the trace-file tests: per-process temporary paths and a
// small v2 trace with several sequences, head groups and prompt records.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "traces/attention_trace.h"

namespace trace_files {

inline std::string tmp(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kvtier_trace_files." + std::to_string(getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

// 3 steps x 2 layers x 3 sequences, 2 head groups, prompt records; 20-token
// context in 8-token blocks (3 prompt blocks, 3 or 4 blocks during decode).
inline kvtier::AttentionHeader small_header() {
  kvtier::AttentionHeader h;
  h.version = 2;
  h.layers = 2;
  h.steps = 3;
  h.block_tokens = 8;
  h.context_tokens = 20;
  h.sequences = 3;
  h.has_prompt = true;
  h.origin = {{"test", "small"}};
  return h;
}

// Writes small_header()'s records to `w`: masses that differ per record.
template <class Writer>
void write_small(Writer& w) {
  using namespace kvtier;
  const AttentionHeader h = small_header();
  for (uint32_t l = 0; l < h.layers; ++l)
    for (uint32_t s = 0; s < h.sequences; ++s) w.prompt(l, s, {0.5f, 0.25f + 0.01f * s, 0.25f - 0.01f * s});
  AttentionRecord r;
  std::vector<float> g;
  for (uint32_t step = 0; step < h.steps; ++step)
    for (uint32_t l = 0; l < h.layers; ++l)
      for (uint32_t s = 0; s < h.sequences; ++s) {
        r.step = step;
        r.layer = l;
        r.seq = s;
        const uint32_t n = h.blocks_at(step);
        r.blocks = {n - 1, 0, (s + step) % (n - 1) == 0 ? 1u : (s + step) % (n - 1)};
        const float a = 0.1f * (1 + s) + 0.01f * step + 0.001f * l;
        r.mass = {a, 0.3f, 0.7f - a};
        g.clear();
        for (float m : r.mass) g.push_back(m * 0.5f);
        for (float m : r.mass) g.push_back(m * 1.5f);
        w.write(r, &g);
      }
  w.close();
}

}  // namespace trace_files
