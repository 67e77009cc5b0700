// The binary attention-trace container reader (traces/attention_binary.cpp).
// Every chunk is a zstd frame with a content checksum, so bytes mutated
// blindly almost never get past the checksum; the custom mutator below
// decompresses one chunk, mutates its raw records and compresses it again,
// so the fuzzer reaches the record decoder, and now and then mutates the
// file as it is, so the container's own fields are fuzzed too. Inputs stay
// real container files: a finding is a file `kvtier trace check` reads.
#include <zstd.h>

#include <cstring>
#include <random>
#include <vector>

#include "tests/fuzz/attention_checks.h"
#include "traces/attention_binary.h"

using namespace kvtier;

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

constexpr size_t kStart = 12, kChunkHeader = 16;

uint32_t get_u32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}

struct Chunk {
  uint8_t header[kChunkHeader];
  std::vector<uint8_t> comp;
};

// Splits a container into its chunks; false if it is not one.
bool split(const uint8_t* data, size_t size, std::vector<Chunk>& out) {
  if (size < kStart || std::memcmp(data, kBinaryTraceMagic, 8) != 0) return false;
  size_t pos = kStart;
  while (pos < size) {
    if (size - pos < kChunkHeader) return false;
    Chunk c;
    std::memcpy(c.header, data + pos, kChunkHeader);
    const uint32_t comp = get_u32(data + pos + 12);
    pos += kChunkHeader;
    if (size - pos < comp) return false;
    c.comp.assign(data + pos, data + pos + comp);
    pos += comp;
    out.push_back(std::move(c));
  }
  return !out.empty();
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  std::vector<Chunk> chunks;
  if (rng() % 4 == 0 || !split(data, size, chunks)) return LLVMFuzzerMutate(data, size, max_size);
  Chunk& c = chunks[rng() % chunks.size()];
  const uint32_t raw_size = get_u32(c.header + 8);
  if (raw_size > (16u << 20)) return LLVMFuzzerMutate(data, size, max_size);
  std::vector<uint8_t> raw(std::max<size_t>(raw_size, 1) * 2 + 64);
  size_t n = ZSTD_decompress(raw.data(), raw.size(), c.comp.data(), c.comp.size());
  if (ZSTD_isError(n)) return LLVMFuzzerMutate(data, size, max_size);
  n = LLVMFuzzerMutate(raw.data(), n, raw.size());
  // Mostly a consistent chunk header; now and then a record count off by one
  // or the old raw size, which the reader must reject.
  const unsigned r = rng() % 8;
  if (r == 0) put_u32(c.header + 4, get_u32(c.header + 4) + (rng() % 2 ? 1u : ~0u));
  if (r != 1) put_u32(c.header + 8, uint32_t(n));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  c.comp.resize(ZSTD_compressBound(n));
  const size_t z = ZSTD_compress2(cctx, c.comp.data(), c.comp.size(), raw.data(), n);
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(z)) return LLVMFuzzerMutate(data, size, max_size);
  c.comp.resize(z);
  put_u32(c.header + 12, uint32_t(z));
  size_t total = kStart;
  for (const Chunk& k : chunks) total += kChunkHeader + k.comp.size();
  if (total > max_size) return LLVMFuzzerMutate(data, size, max_size);
  size_t pos = kStart;
  for (const Chunk& k : chunks) {
    std::memcpy(data + pos, k.header, kChunkHeader);
    if (!k.comp.empty()) std::memcpy(data + pos + kChunkHeader, k.comp.data(), k.comp.size());  // data() may be null
    pos += kChunkHeader + k.comp.size();
  }
  return total;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kvtier_fuzz::write_input(data, size, "trace.kvtt");
  try {
    BinaryTraceReader src(path);
    kvtier_fuzz::read_all(src);
  } catch (const ConfigError&) {
  }
  return 0;
}
