#include "traces/attention_binary.h"

#include <zstd.h>
#include <zstd_errors.h>

#include <cerrno>
#include <cmath>
#include <cstring>

namespace kvtier {

const char kBinaryTraceMagic[8] = {'K', 'V', 'T', 'A', 'T', 'T', 'N', '\x1a'};

namespace {

// Chunk tags, little-endian ASCII: the header, prompt records, decode records, the end.
constexpr uint32_t tag_of(const char (&s)[5]) {
  return static_cast<uint32_t>(static_cast<unsigned char>(s[0])) |
         static_cast<uint32_t>(static_cast<unsigned char>(s[1])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(s[2])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(s[3])) << 24;
}
constexpr uint32_t kHead = tag_of("HEAD"), kPrompt = tag_of("PRMT"), kRecords = tag_of("RECS"), kEnd = tag_of("END.");
// A chunk's raw size is bounded so a damaged size field cannot ask for any amount of memory.
constexpr uint32_t kMaxRaw = 256u << 20;

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get_u32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
// IEEE binary16 <-> binary32, rounding to nearest even: the same bits as
// GCC's _Float16 conversions for every float and every half (checked
// exhaustively), written out because clang before 15 has no _Float16 on x86-64.
uint16_t f16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));  // NaN
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504: infinity
  uint32_t r, rem, halfway;
  if (ax < 0x38800000u) {  // below 2^-14: a subnormal half, in units of 2^-24
    if (ax < 0x33000000u) return static_cast<uint16_t>(sign);  // at most 2^-25: rounds to zero
    const uint32_t shift = 126u - (ax >> 23), m = (ax & 0x7FFFFFu) | 0x800000u;
    r = m >> shift;
    rem = m & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1u);
  } else {
    r = (ax - 0x38000000u) >> 13;  // exponent rebiased from 127 to 15
    rem = ax & 0x1FFFu;
    halfway = 0x1000u;
  }
  if (rem > halfway || (rem == halfway && (r & 1u))) ++r;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | r);
}

float f16_value(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu, x;
  if (e == 0x1F) {
    x = sign | 0x7F800000u | (m << 13);
  } else if (e != 0) {
    x = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) {
    x = sign;
  } else {  // subnormal: normalise
    e = 113;
    while (!(m & 0x400u)) {
      m <<= 1;
      --e;
    }
    x = sign | (e << 23) | ((m & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

std::string tag_name(uint32_t t) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    char c = static_cast<char>(t >> (8 * i));
    s += (c >= 32 && c < 127) ? c : '?';
  }
  return s;
}
}  // namespace

const char* to_string(MassEncoding e) { return e == MassEncoding::F16 ? "f16" : "f32"; }

MassEncoding mass_encoding_from(const std::string& name, const std::string& where) {
  if (name == "f32") return MassEncoding::F32;
  if (name == "f16") return MassEncoding::F16;
  throw ConfigError(where + ": mass encoding \"" + name + "\" unknown, expected \"f32\" or \"f16\"");
}

bool is_binary_trace(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char b[8];
  const bool yes = std::fread(b, 1, 8, f) == 8 && std::memcmp(b, kBinaryTraceMagic, 8) == 0;
  std::fclose(f);
  return yes;
}

// ---- reader ----

void BinaryTraceReader::fail(const std::string& what) const {
  throw ConfigError(path_ + ": chunk " + std::to_string(chunk_no_) + " (byte " + std::to_string(chunk_offset_) +
                    "), record " + std::to_string(records_seen_) + ": " + what);
}

BinaryTraceReader::BinaryTraceReader(const std::string& path) : AttentionFileSource(path) {
  f_ = std::fopen(path.c_str(), "rb");
  if (!f_) throw ConfigError(path + ": cannot open attention trace");
  dctx_ = ZSTD_createDCtx();
  // A constructor that throws runs no destructor: until this one ends, the
  // guard closes the file and frees the zstd context if anything below throws.
  struct Guard {
    BinaryTraceReader* r;
    ~Guard() {
      if (!r) return;
      std::fclose(r->f_);
      r->f_ = nullptr;
      ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(r->dctx_));
      r->dctx_ = nullptr;
    }
  } guard{this};
  unsigned char b[12];
  if (std::fread(b, 1, 12, f_) != 12 || std::memcmp(b, kBinaryTraceMagic, 8) != 0)
    throw ConfigError(path + ": not a kvtier binary attention trace (bad magic or shorter than its 12-byte start)");
  const uint32_t cv = get_u32(b + 8);
  if (cv != kBinaryContainerVersion)
    throw ConfigError(path + ": container version " + std::to_string(cv) + ", this reader knows " +
                      std::to_string(kBinaryContainerVersion));
  if (read_chunk() != kHead) fail("expected the HEAD chunk first");
  json h;
  try {
    h = json::parse(raw_.begin(), raw_.end());
  } catch (const json::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  std::string err = parse_header(h);
  if (!err.empty()) fail(err);
  if (h.contains("mass_encoding") && !h["mass_encoding"].is_string())
    fail("header: \"mass_encoding\" must be \"f32\" or \"f16\", got " + brief_dump(h["mass_encoding"]));
  try {
    enc_ = mass_encoding_from(h.value("mass_encoding", "f32"), "header");
  } catch (const ConfigError& e) {
    fail(e.what());
  }
  header_.origin = h.value("origin", json::object());
  // Prompt chunks follow the header; the first decode chunk stays in raw_ for next().
  uint32_t tag;
  while ((tag = read_chunk()) == kPrompt) {
    for (uint64_t i = 0; i < chunk_records_; ++i) {
      const uint32_t layer = u32();
      const uint32_t seq = u32();
      const uint64_t n = varint();
      if (n > 0x1000000) fail("prompt record with " + std::to_string(n) + " masses");
      std::vector<float> m(n);
      for (auto& x : m) x = mass();
      err = add_prompt(layer, seq, std::move(m));
      if (!err.empty()) fail(err);
    }
    if (pos_ != raw_.size()) fail("bytes left after the chunk's records");
  }
  err = check_prompts_complete();
  if (!err.empty()) fail(err);
  if (tag == kEnd) ended_ = true;
  else if (tag != kRecords) fail("unexpected chunk " + tag_name(tag));
  if (!ended_) verify_end();
  guard.r = nullptr;
}

// A run reads only the records it needs and may stop short of the END
// chunk, so the END chunk is checked before any record is used: the chunk
// headers are walked (their data skipped, not decompressed) to the END
// chunk, whose count must match both the records the chunks hold and the
// header's promise. The first decode chunk stays in raw_.
void BinaryTraceReader::verify_end() {
  const long here = std::ftell(f_);
  const uint64_t no = chunk_no_, offset = chunk_offset_;
  std::fseek(f_, 0, SEEK_END);
  const uint64_t size = static_cast<uint64_t>(std::ftell(f_));
  std::fseek(f_, here, SEEK_SET);
  uint64_t records = chunk_records_;
  for (;;) {
    const auto [tag, count, raw, comp] = read_chunk_header();
    if (chunk_offset_ + 16 + comp > size) fail("file ends inside a chunk (truncated)");
    if (tag == kRecords) {
      records += count;
      std::fseek(f_, static_cast<long>(comp), SEEK_CUR);
      continue;
    }
    if (tag != kEnd) fail("unexpected chunk " + tag_name(tag) + " among the decode records");
    std::vector<unsigned char> c(comp), r(8);
    if (raw != 8 || std::fread(c.data(), 1, comp, f_) != comp) fail("END chunk must hold the record count");
    const size_t n = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(dctx_), r.data(), r.size(), c.data(), comp);
    if (ZSTD_isError(n) || n != 8) fail("damaged END chunk");
    uint64_t total = 0;
    for (int i = 0; i < 8; ++i) total |= static_cast<uint64_t>(r[i]) << (8 * i);
    if (total != records || total != record_count())
      fail("its END chunk says " + std::to_string(total) + " records, its chunks hold " + std::to_string(records) +
           " and the header promises " + std::to_string(record_count()));
    break;
  }
  std::fseek(f_, here, SEEK_SET);
  chunk_no_ = no;
  chunk_offset_ = offset;
}

BinaryTraceReader::~BinaryTraceReader() {
  if (f_) std::fclose(f_);
  ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
}

BinaryTraceReader::ChunkHeader BinaryTraceReader::read_chunk_header() {
  chunk_offset_ = static_cast<uint64_t>(std::ftell(f_));
  ++chunk_no_;
  unsigned char b[16];
  const size_t got = std::fread(b, 1, 16, f_);
  if (got != 16)
    fail(got == 0 ? "file ends without its END chunk (truncated)" : "file ends inside a chunk header (truncated)");
  return {get_u32(b), get_u32(b + 4), get_u32(b + 8), get_u32(b + 12)};
}

uint32_t BinaryTraceReader::read_chunk() {
  const auto [tag, count, raw, comp] = read_chunk_header();
  if (tag != kHead && tag != kPrompt && tag != kRecords && tag != kEnd) fail("unknown chunk tag " + tag_name(tag));
  if (raw > kMaxRaw || comp > ZSTD_compressBound(raw) + 64)
    fail("chunk sizes " + std::to_string(raw) + " / " + std::to_string(comp) + " are implausible (damaged file)");
  comp_.resize(comp);
  if (std::fread(comp_.data(), 1, comp, f_) != comp) fail("file ends inside a chunk (truncated)");
  raw_.resize(raw);
  const size_t r = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(dctx_), raw_.data(), raw, comp_.data(), comp);
  if (ZSTD_isError(r)) {
    if (ZSTD_getErrorCode(r) == ZSTD_error_checksum_wrong) fail("bad checksum (the chunk's data is damaged)");
    fail(std::string("damaged chunk: zstd: ") + ZSTD_getErrorName(r));
  }
  if (r != raw) fail("chunk holds " + std::to_string(r) + " bytes, its header says " + std::to_string(raw));
  pos_ = 0;
  chunk_records_ = count;
  chunk_done_ = 0;
  return tag;
}

void BinaryTraceReader::need(size_t bytes) {
  if (raw_.size() - pos_ < bytes) fail("a record runs past the end of its chunk");
}

uint64_t BinaryTraceReader::varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    need(1);
    const unsigned char c = raw_[pos_++];
    v |= static_cast<uint64_t>(c & 0x7F) << shift;
    if (!(c & 0x80)) return v;
  }
  fail("an integer longer than 64 bits");
}

uint32_t BinaryTraceReader::u32() {
  const uint64_t v = varint();
  if (v > 0xFFFFFFFEu) fail("a step, layer or sequence number of " + std::to_string(v) + ", past 2^32 - 2");
  return static_cast<uint32_t>(v);
}

float BinaryTraceReader::mass() {
  if (enc_ == MassEncoding::F16) {
    need(2);
    uint16_t h = static_cast<uint16_t>(raw_[pos_] | raw_[pos_ + 1] << 8);
    pos_ += 2;
    return f16_value(h);
  }
  need(4);
  const uint32_t u = get_u32(&raw_[pos_]);
  pos_ += 4;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

bool BinaryTraceReader::next(AttentionRecord& rec) {
  while (!ended_ && chunk_done_ == chunk_records_) {
    if (pos_ != raw_.size()) fail("bytes left after the chunk's records");
    const uint32_t tag = read_chunk();
    if (tag == kEnd) ended_ = true;
    else if (tag != kRecords) fail("unexpected chunk " + tag_name(tag) + " among the decode records");
  }
  if (ended_) {
    if (raw_.size() != 8) fail("END chunk must hold the record count");
    uint64_t total = 0;
    for (int i = 0; i < 8; ++i) total |= static_cast<uint64_t>(raw_[i]) << (8 * i);
    if (records_seen_ != record_count() || total != records_seen_)
      fail("the file holds " + std::to_string(records_seen_) + " records, its END chunk says " + std::to_string(total) +
           " and the header promises " + std::to_string(record_count()));
    return false;
  }
  rec.step = u32();
  rec.layer = u32();
  rec.seq = kAllSequences;
  if (header_.sequences > 1) rec.seq = u32();
  const uint64_t n = varint();
  if (n > header_.blocks_at(header_.steps)) fail("a record with " + std::to_string(n) + " blocks, more than exist");
  rec.blocks.resize(n);
  rec.mass.resize(n);
  int64_t prev = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t z = varint();
    prev += static_cast<int64_t>(z >> 1) ^ -static_cast<int64_t>(z & 1);  // zigzag delta
    if (prev < 0 || prev > 0xFFFFFFFFll) fail("block index out of range");
    rec.blocks[i] = static_cast<uint32_t>(prev);
  }
  for (auto& m : rec.mass) m = mass();
  group_mass_.resize(head_groups_ > 1 ? head_groups_ * n : 0);
  for (auto& m : group_mass_) m = mass();
  ++chunk_done_;
  std::string err = check_record(rec);
  if (!err.empty()) fail(err);
  return true;
}

// ---- writer ----

BinaryTraceWriter::BinaryTraceWriter(const std::string& path, const AttentionHeader& h, uint32_t head_groups,
                                     MassEncoding enc, int level, size_t chunk_bytes)
    : path_(path), tmp_(path + ".tmp"), h_(h), groups_(head_groups), enc_(enc), chunk_bytes_(chunk_bytes) {
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) throw ConfigError(path + ": cannot write");
  cctx_ = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(static_cast<ZSTD_CCtx*>(cctx_), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(static_cast<ZSTD_CCtx*>(cctx_), ZSTD_c_checksumFlag, 1);
  unsigned char b[12];
  std::memcpy(b, kBinaryTraceMagic, 8);
  put_u32(b + 8, kBinaryContainerVersion);
  put(b, 12);
  json j = trace_header_json(h, head_groups);
  j["mass_encoding"] = to_string(enc);
  const std::string text = j.dump();
  raw_.assign(text.begin(), text.end());
  tag_ = kHead;
  in_chunk_ = 1;
  flush(kHead);
}

BinaryTraceWriter::~BinaryTraceWriter() {
  if (f_) std::fclose(f_);
  if (!closed_) std::remove(tmp_.c_str());
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
}

// Every write is checked: a full disk stops the writer at its first failed
// chunk (the caller exits 2, and the unfinished file is removed), instead of
// generating on until close.
void BinaryTraceWriter::put(const void* data, size_t n) {
  if (std::fwrite(data, 1, n, f_) != n)
    throw ConfigError(path_ + ": write failed (" + std::strerror(errno) + "); nothing was written");
}

void BinaryTraceWriter::flush(uint32_t tag) {
  comp_.resize(ZSTD_compressBound(raw_.size()));
  const size_t c = ZSTD_compress2(static_cast<ZSTD_CCtx*>(cctx_), comp_.data(), comp_.size(), raw_.data(), raw_.size());
  if (ZSTD_isError(c)) throw ConfigError(path_ + ": zstd: " + ZSTD_getErrorName(c));
  unsigned char b[16];
  put_u32(b, tag);
  put_u32(b + 4, static_cast<uint32_t>(in_chunk_));
  put_u32(b + 8, static_cast<uint32_t>(raw_.size()));
  put_u32(b + 12, static_cast<uint32_t>(c));
  put(b, 16);
  put(comp_.data(), c);
  raw_.clear();
  in_chunk_ = 0;
}

void BinaryTraceWriter::varint(uint64_t v) {
  while (v >= 0x80) {
    raw_.push_back(static_cast<unsigned char>(v | 0x80));
    v >>= 7;
  }
  raw_.push_back(static_cast<unsigned char>(v));
}

void BinaryTraceWriter::mass(float m) {
  if (enc_ == MassEncoding::F16) {
    if (!(m <= 65504.f)) throw ConfigError(path_ + ": mass " + std::to_string(m) + " does not fit f16; use f32");
    const uint16_t h = f16_bits(m);
    raw_.push_back(static_cast<unsigned char>(h));
    raw_.push_back(static_cast<unsigned char>(h >> 8));
    return;
  }
  uint32_t u;
  std::memcpy(&u, &m, 4);
  for (int i = 0; i < 4; ++i) raw_.push_back(static_cast<unsigned char>(u >> (8 * i)));
}

void BinaryTraceWriter::prompt(uint32_t layer, uint32_t seq, const std::vector<float>& m) {
  if (tag_ != kPrompt) {
    if (tag_ == kRecords) throw ConfigError(path_ + ": prompt records must come before the decode records");
    tag_ = kPrompt;
  }
  varint(layer);
  varint(seq);
  varint(m.size());
  for (float x : m) mass(x);
  ++in_chunk_;
  if (raw_.size() >= chunk_bytes_) flush(kPrompt);
}

void BinaryTraceWriter::write(const AttentionRecord& rec, const std::vector<float>* group_mass) {
  if (tag_ != kRecords) {
    if (in_chunk_) flush(tag_);
    tag_ = kRecords;
  }
  varint(rec.step);
  varint(rec.layer);
  if (h_.sequences > 1) varint(rec.seq);
  const size_t n = rec.blocks.size();
  varint(n);
  int64_t prev = 0;
  for (uint32_t b : rec.blocks) {
    const int64_t d = static_cast<int64_t>(b) - prev;
    varint((static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63));  // zigzag; shifting a negative d is UB
    prev = b;
  }
  for (float m : rec.mass) mass(m);
  if (groups_ > 1) {
    if (!group_mass || group_mass->size() != groups_ * n)
      throw ConfigError(path_ + ": a record without its " + std::to_string(groups_) + " head-group masses");
    for (float m : *group_mass) mass(m);
  }
  ++in_chunk_;
  ++records_;
  if (raw_.size() >= chunk_bytes_) flush(kRecords);
}

void BinaryTraceWriter::close() {
  if (in_chunk_) flush(tag_);
  raw_.resize(8);
  for (int i = 0; i < 8; ++i) raw_[i] = static_cast<unsigned char>(records_ >> (8 * i));
  flush(kEnd);
  const bool ok = std::fflush(f_) == 0 && !std::ferror(f_);
  std::fclose(f_);
  f_ = nullptr;
  if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    // A staged output (NAME.tmp, renamed into place at the end): the user's name.
    std::string shown = path_;
    if (shown.size() > 4 && shown.compare(shown.size() - 4, 4, ".tmp") == 0) shown.resize(shown.size() - 4);
    throw ConfigError(shown + ": write failed");
  }
  closed_ = true;
}

}  // namespace kvtier
