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

// Header limits (docs/config.md, Limits): the counts a trace may declare, so
// that block indices and step numbers stay far from 32-bit wrap-around and
// what the header sizes is bounded before the trace is compared with the
// configuration that reads it.
constexpr uint64_t kMaxTraceContextTokens = 1u << 24;
constexpr uint64_t kMaxTraceSteps = 1u << 24;
constexpr uint64_t kMaxTraceBlockTokens = 1u << 16;
constexpr uint64_t kMaxTraceLayers = 1u << 12;
constexpr uint64_t kMaxTraceLayerSequences = 1u << 20;  // layers x sequences (prompt records)

// Throws ConfigError naming `where` unless a generated trace's shape is
// within the limits above (every count >= 1).
void check_trace_shape(const std::string& where, uint64_t layers, uint64_t context_tokens, uint64_t steps,
                       uint64_t block_tokens, uint64_t sequences);

struct AttentionHeader {
  uint32_t version = 1;
  uint32_t layers = 0;
  uint32_t steps = 0;
  uint32_t block_tokens = 0;
  uint32_t context_tokens = 0;
  // Sequences the trace distinguishes: 1 (format v1) means one pattern that
  // every sequence of a batch follows; S > 1 means per-sequence records, and
  // sequence s of a batch follows the trace's sequence s % S.
  uint32_t sequences = 1;
  // The trace carries the prompt's own attention (prompt()).
  bool has_prompt = false;
  json model;   // the model shape it was captured or generated for (informative)
  json origin;  // generator parameters or capture details (informative)

  // Blocks that exist during decode step s: the context plus the s tokens
  // generated before it plus the one being generated.
  uint32_t blocks_at(uint32_t step) const { return (context_tokens + step + block_tokens) / block_tokens; }
};

constexpr uint32_t kAllSequences = 0xFFFFFFFFu;

struct AttentionRecord {
  uint32_t step = 0;
  uint32_t layer = 0;
  // The sequence this record is for, or kAllSequences (every sequence; the
  // only kind in format v1). Per-sequence records of one (step, layer) come
  // in sequence order 0..sequences-1.
  uint32_t seq = kAllSequences;
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
  // The prompt's own attention in one layer (prefill): per prompt block
  // index 0..ceil(context/block)-1, the attention mass the prompt's queries
  // gave it, averaged over the queries (so it sums to 1). `seq` is the
  // trace's sequence (0..sequences-1). Null when the source has none. Valid
  // until the next call of prompt() (a generator computes it on demand, so
  // that its prompts are never all held at once) or until the source is
  // destroyed; available before and after the first next().
  virtual const std::vector<float>* prompt(uint32_t seq, uint32_t layer) const {
    (void)seq;
    (void)layer;
    return nullptr;
  }
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

// ---- Format v2 (docs/formats.md): per-sequence records, head groups, prompt
// records; and the sources and writers that every file format shares. ----

// A trace read from a file of any format (v1 or v2 JSON lines, the binary
// container). Beyond AttentionSource it keeps the prompt records and the
// per-head-group masses of the last record, and checks every record against
// the header (order, block range, duplicates, mass), naming file and record.
class AttentionFileSource : public AttentionSource {
 public:
  const AttentionHeader& header() const override { return header_; }
  const std::vector<float>* prompt(uint32_t seq, uint32_t layer) const override;
  // KV-head groups each record carries masses for; 1 means only the total.
  uint32_t head_groups() const { return head_groups_; }
  // Head-group masses of the record last returned by next(): group g's mass
  // of the record's i-th block at [g * blocks.size() + i]. Empty when
  // head_groups() is 1. The record's `mass` is their mean.
  const std::vector<float>& group_mass() const { return group_mass_; }
  const std::string& path() const { return path_; }
  // Records the header promises: steps x layers x (sequences if > 1, else 1).
  uint64_t record_count() const;

 protected:
  explicit AttentionFileSource(std::string path) : path_(std::move(path)) {}
  // Fills header_ and head_groups_ from a header object of version 1 or 2;
  // returns "" or what is wrong.
  std::string parse_header(const json& h);
  // "" or what is wrong with the next record in order (index records_seen_).
  std::string check_record(const AttentionRecord& rec);
  // "" or what is wrong with a prompt record; stores it when it is right.
  std::string add_prompt(uint32_t layer, uint32_t seq, std::vector<float> mass);
  // "" or which prompt record is missing, once all have been read.
  std::string check_prompts_complete() const;

  std::string path_;
  AttentionHeader header_;
  uint32_t head_groups_ = 1;
  std::vector<std::vector<float>> prompts_;  // [layer * sequences + seq]
  std::vector<float> group_mass_;
  uint64_t records_seen_ = 0;

 private:
  std::vector<uint32_t> seen_;  // stamp per block index, to reject duplicates without allocating
  uint32_t stamp_ = 0;
};

// Reads JSON lines of version 1 or 2; every error names the file and line.
class JsonlTraceReader : public AttentionFileSource {
 public:
  explicit JsonlTraceReader(const std::string& path);
  bool next(AttentionRecord& rec) override;

 private:
  [[noreturn]] void fail(const std::string& what) const;
  bool next_line();  // the next non-blank line into line_; false at the end of the file
  std::ifstream in_;
  std::string line_;
  uint64_t line_no_ = 0;
  bool pending_ = false;  // line_ holds a record line read ahead while looking for prompt records
};

// Where records go: prompt records first (layer-major, then sequence), then
// the decode records in (step, layer, sequence) order.
class AttentionWriter {
 public:
  virtual ~AttentionWriter() = default;
  virtual void prompt(uint32_t layer, uint32_t seq, const std::vector<float>& mass) = 0;
  // `group_mass`: head_groups x blocks masses (see group_mass()), or null.
  virtual void write(const AttentionRecord& rec, const std::vector<float>* group_mass = nullptr) = 0;
  // Finishes the file and renames it into place; without close() nothing is left behind.
  virtual void close() = 0;
};

// Writes JSON lines of the header's version (1 or 2) atomically. Version 1
// has no sequences, head groups or prompt records; its masses are written as
// JsonlAttentionWriter writes them, version 2's as the shortest text that
// reads back to the same float.
class JsonlTraceWriter : public AttentionWriter {
 public:
  JsonlTraceWriter(const std::string& path, const AttentionHeader& h, uint32_t head_groups = 1);
  ~JsonlTraceWriter() override;
  void prompt(uint32_t layer, uint32_t seq, const std::vector<float>& mass) override;
  void write(const AttentionRecord& rec, const std::vector<float>* group_mass = nullptr) override;
  void close() override;

 private:
  void put_mass(float m);
  std::string path_, tmp_;
  std::ofstream out_;
  AttentionHeader h_;
  uint32_t groups_;
  bool closed_ = false;
  std::string buf_;
};

// The header object of format version h.version (1 or 2).
json trace_header_json(const AttentionHeader& h, uint32_t head_groups);

}  // namespace kvtier
