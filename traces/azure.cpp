// The Azure LLM inference trace (AzurePublicDataset, 2023): a CSV with the
// header TIMESTAMP,ContextTokens,GeneratedTokens and one request per line,
// e.g. "2023-11-16 18:17:03.9799600,4808,10" (UTC date and time with
// fractional seconds). It has no block ids. Arrival times are seconds after
// the first request; they must not go backwards (an error, not sorted).
#include <charconv>
#include <ctime>
#include <fstream>

#include "traces/line_reader.h"
#include "traces/request_trace.h"

namespace kvtier {
namespace {

constexpr const char* kHeader = "TIMESTAMP,ContextTokens,GeneratedTokens";

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

class AzureReader : public RequestSource {
 public:
  explicit AzureReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw ConfigError(path + ": cannot open the Azure trace");
    std::string h;
    const LineRead got = read_line_limited(in_, h, 4096);
    if (got == LineRead::End) throw ConfigError(path + ": empty file, expected the CSV header " + kHeader);
    if (got == LineRead::TooLong) throw ConfigError(path + ":1: expected the CSV header " + kHeader + ", got a longer line");
    line_ = 1;
    std::string t = trim(h);
    if (t.size() >= 3 && (unsigned char)t[0] == 0xEF) t = t.substr(3);  // UTF-8 byte order mark
    std::string compact;
    for (char c : t)
      if (c != ' ') compact += c;
    if (compact != kHeader)
      fail(std::string("expected the Azure LLM inference CSV header ") + kHeader + ", got \"" + t.substr(0, 80) + "\"");
  }
  const std::string& name() const override { return path_; }
  uint32_t block_tokens() const override { return 0; }
  bool has_blocks() const override { return false; }

  bool next(Request& r) override {
    std::string text;
    for (;;) {
      const LineRead got = read_line_limited(in_, text, 4096);
      if (got == LineRead::TooLong) {
        ++line_;
        fail("line longer than 4096 bytes, expected TIMESTAMP,ContextTokens,GeneratedTokens");
      }
      if (got == LineRead::End) {
        if (requests_ == 0) fail("no requests after the header");
        return false;
      }
      ++line_;
      text = trim(text);
      if (!text.empty()) break;
    }
    size_t c1 = text.find(','), c2 = c1 == std::string::npos ? c1 : text.find(',', c1 + 1);
    if (c2 == std::string::npos || text.find(',', c2 + 1) != std::string::npos)
      fail("expected 3 fields TIMESTAMP,ContextTokens,GeneratedTokens, got \"" + text.substr(0, 80) + "\"");
    double t = timestamp(trim(text.substr(0, c1)));
    if (requests_ == 0) origin_ = t;
    double rel = t - origin_;
    if (!(rel <= kMaxArrivalSeconds))
      fail("timestamp " + trim(text.substr(0, c1)) + " is more than 1e8 s (about 3 years) after the first request's");
    if (requests_ > 0 && rel < last_s_)
      fail("timestamp " + trim(text.substr(0, c1)) +
           " is before the previous request's: expected non-decreasing arrival times");
    r.arrival_s = rel;
    r.input_tokens = tokens(trim(text.substr(c1 + 1, c2 - c1 - 1)), "ContextTokens");
    r.output_tokens = tokens(trim(text.substr(c2 + 1)), "GeneratedTokens");
    r.session = 0;
    r.blocks.clear();
    last_s_ = rel;
    ++requests_;
    return true;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(path_ + ":" + std::to_string(line_) + ": " + what);
  }
  // "YYYY-MM-DD HH:MM:SS[.fraction]" (UTC) -> seconds since the epoch.
  double timestamp(const std::string& s) const {
    int Y, M, D, h, m, n = 0;
    double sec;
    if (std::sscanf(s.c_str(), "%d-%d-%d %d:%d:%lf%n", &Y, &M, &D, &h, &m, &sec, &n) != 6 || size_t(n) != s.size() ||
        s.size() > 40 || Y < 1970 || Y > 9999 || M < 1 || M > 12 || D < 1 || D > 31 || h < 0 || h > 23 || m < 0 || m > 59 || !(sec >= 0 && sec < 61))  // NaN fails both
      fail("TIMESTAMP: expected a date and time like 2023-11-16 18:17:03.9799600, got \"" + s + "\"");
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const bool leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
    if (D > days[M - 1] + (M == 2 && leap ? 1 : 0))
      fail("TIMESTAMP: " + s.substr(0, 10) + " is not a calendar date (month " + std::to_string(M) + " has " +
           std::to_string(days[M - 1] + (M == 2 && leap ? 1 : 0)) + " days)");
    std::tm tm{};
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = 0;
    return double(timegm(&tm)) + sec;
  }
  uint32_t tokens(const std::string& s, const char* col) const {
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size())
      fail(std::string(col) + ": expected a non-negative integer number of tokens, got \"" + s + "\"");
    return v;
  }

  std::string path_;
  std::ifstream in_;
  uint64_t line_ = 0, requests_ = 0;
  double origin_ = 0, last_s_ = 0;
};

}  // namespace

std::unique_ptr<RequestSource> open_azure_trace(const std::string& path) { return std::make_unique<AzureReader>(path); }

}  // namespace kvtier
