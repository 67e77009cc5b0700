// The compact binary container for attention traces (docs/formats.md): the
// same header and records as the JSON lines formats, in chunks that are each
// one zstd frame with zstd's content checksum, so a damaged chunk is found
// and named. Masses are stored as float32 (exact) or float16 (half the bytes;
// a relative error of at most 2^-11 per mass). Readers stream one chunk at a
// time: memory does not grow with the number of steps.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "traces/attention_trace.h"

namespace kvtier {

enum class MassEncoding { F32, F16 };
const char* to_string(MassEncoding e);
MassEncoding mass_encoding_from(const std::string& name, const std::string& where);

// The first bytes of every container file; a file that starts otherwise is JSON lines.
extern const char kBinaryTraceMagic[8];
constexpr uint32_t kBinaryContainerVersion = 1;

// True when the file at `path` starts with kBinaryTraceMagic.
bool is_binary_trace(const std::string& path);

class BinaryTraceReader : public AttentionFileSource {
 public:
  explicit BinaryTraceReader(const std::string& path);
  ~BinaryTraceReader() override;
  bool next(AttentionRecord& rec) override;
  MassEncoding mass_encoding() const { return enc_; }

 private:
  [[noreturn]] void fail(const std::string& what) const;
  // Reads the next chunk into raw_; returns its tag.
  uint32_t read_chunk();
  // The next chunk's 16-byte header (tag, record count, raw and compressed sizes).
  struct ChunkHeader {
    uint32_t tag, count, raw, comp;
  };
  ChunkHeader read_chunk_header();
  // Walks the chunk headers to the END chunk and checks its count, then
  // comes back to where it was.
  void verify_end();
  uint64_t varint();
  uint32_t u32();  // a varint that must be a step, layer or sequence number (no 32-bit wrap-around)
  float mass();
  void need(size_t bytes);

  FILE* f_ = nullptr;
  void* dctx_ = nullptr;  // ZSTD_DCtx
  MassEncoding enc_ = MassEncoding::F32;
  std::vector<unsigned char> comp_, raw_;
  size_t pos_ = 0;          // read position in raw_
  uint64_t chunk_no_ = 0;   // chunks read, the one in raw_ included
  uint64_t chunk_offset_ = 0;
  uint64_t chunk_records_ = 0, chunk_done_ = 0;
  bool ended_ = false;
};

class BinaryTraceWriter : public AttentionWriter {
 public:
  // `level`: zstd compression level; `chunk_bytes`: raw bytes per chunk (records never span chunks).
  BinaryTraceWriter(const std::string& path, const AttentionHeader& h, uint32_t head_groups = 1,
                    MassEncoding enc = MassEncoding::F32, int level = 6, size_t chunk_bytes = 1 << 20);
  ~BinaryTraceWriter() override;
  void prompt(uint32_t layer, uint32_t seq, const std::vector<float>& mass) override;
  void write(const AttentionRecord& rec, const std::vector<float>* group_mass = nullptr) override;
  void close() override;

 private:
  void put(const void* data, size_t n);
  void flush(uint32_t tag);
  void varint(uint64_t v);
  void mass(float m);
  std::string path_, tmp_;
  FILE* f_ = nullptr;
  void* cctx_ = nullptr;  // ZSTD_CCtx
  AttentionHeader h_;
  uint32_t groups_;
  MassEncoding enc_;
  size_t chunk_bytes_;
  std::vector<unsigned char> raw_, comp_;
  uint32_t tag_ = 0;        // tag of the chunk being filled
  uint64_t in_chunk_ = 0, records_ = 0;
  bool closed_ = false;
};

}  // namespace kvtier
