// Attention traces: for each decode step and layer, which KV blocks attention
// used and with what attention mass. Format v1 is JSON lines (docs/formats.md):
// a header object, then one record per (step, layer) in step-major order.
// Sources stream records one at a time, so a trace of any length replays in
// bounded memory.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

struct AttentionHeader {
  uint32_t version = 1;
  uint32_t layers = 0;
  uint32_t steps = 0;
  uint32_t block_tokens = 0;
  uint32_t context_tokens = 0;
  json model;   // the model shape it was captured or generated for (informative)
  json origin;  // generator parameters or capture details (informative)

  // Blocks that exist during decode step s: the context plus the s tokens
  // generated before it plus the one being generated.
  uint32_t blocks_at(uint32_t step) const { return (context_tokens + step + block_tokens) / block_tokens; }
};

struct AttentionRecord {
  uint32_t step = 0;
  uint32_t layer = 0;
  std::vector<uint32_t> blocks;  // block indices within the sequence and layer
  std::vector<float> mass;       // attention mass of each, same length
};

class AttentionSource {
 public:
  virtual ~AttentionSource() = default;
  virtual const AttentionHeader& header() const = 0;
  // Fills the next record; false at the end. Records come in (step, layer)
  // order. Throws ConfigError on malformed input, naming where.
  virtual bool next(AttentionRecord& rec) = 0;
};

// Reads format v1 from a file; every error names the file and line.
class JsonlAttentionReader : public AttentionSource {
 public:
  explicit JsonlAttentionReader(const std::string& path);
  const AttentionHeader& header() const override { return header_; }
  bool next(AttentionRecord& rec) override;

 private:
  [[noreturn]] void fail(const std::string& what) const;
  std::string path_;
  std::ifstream in_;
  std::string line_;
  uint64_t line_no_ = 0;
  AttentionHeader header_;
  uint32_t expect_step_ = 0, expect_layer_ = 0;
  std::vector<uint32_t> seen_;  // stamp per block index, to reject duplicates without allocating
  uint32_t stamp_ = 0;
};

// Writes format v1 to `path` atomically: a temporary file renamed on close().
class JsonlAttentionWriter {
 public:
  JsonlAttentionWriter(const std::string& path, const AttentionHeader& h);
  ~JsonlAttentionWriter();
  void write(const AttentionRecord& rec);
  void close();

 private:
  std::string path_, tmp_;
  std::ofstream out_;
  bool closed_ = false;
};

json header_to_json(const AttentionHeader& h);

}  // namespace kvtier
