#include "traces/oracle_general.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace kvtier {
namespace {

void put32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (unsigned char)(v >> (8 * i));
}
void put64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

}  // namespace

uint64_t write_oracle_general(const std::string& path, const BlockStream& s, const OracleGeneralOptions& opt) {
  NextReferences nr = next_references(s, opt.repeat);
  // FILE.tmp: the caller's staging (sim/core/result.h) removes it on a signal.
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw ConfigError(path + ": cannot write: " + std::strerror(errno));
  double last = s.arrival_s.empty() ? 0.0 : s.arrival_s.back();
  double period = std::floor(last) + 1.0;
  std::vector<unsigned char> buf;
  buf.reserve(kOracleGeneralRecordBytes * 4096);
  bool ok = true;
  uint64_t written = 0;
  for (uint32_t rep = 0; rep < nr.repeat && ok; ++rep) {
    uint64_t i = 0;
    for (uint64_t r = 0; r < s.requests && ok; ++r) {
      double t = std::floor(s.arrival_s[r]) + double(rep) * period;
      uint32_t ts = t >= 4294967295.0 ? 0xFFFFFFFFu : uint32_t(t);
      for (; i < s.request_end[r]; ++i) {
        uint32_t b = s.refs[i];
        uint64_t nxt = nr.next_position(i, rep, b);
        unsigned char rec[kOracleGeneralRecordBytes];
        put32(rec, ts);
        put64(rec + 4, opt.dense_ids ? uint64_t(b) : s.ids[b]);
        put32(rec + 12, opt.object_size);
        put64(rec + 16, nxt == NextReferences::kNoNext ? uint64_t(-1) : nxt);
        buf.insert(buf.end(), rec, rec + kOracleGeneralRecordBytes);
        if (buf.size() >= kOracleGeneralRecordBytes * 4096) {
          ok = std::fwrite(buf.data(), 1, buf.size(), f) == buf.size();
          buf.clear();
        }
        ++written;
      }
    }
  }
  if (ok && !buf.empty()) ok = std::fwrite(buf.data(), 1, buf.size(), f) == buf.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    throw ConfigError(path + ": cannot write: " + std::strerror(e));
  }
  return written;
}

}  // namespace kvtier
