// One line of a text trace with a bound on its length, so a damaged or
// hostile file (one 100 MB line) is refused before it is held in memory.
#pragma once

#include <istream>
#include <string>

namespace kvtier {

// The longest line a JSON-lines or CSV trace may have (docs/config.md, Limits).
constexpr size_t kMaxTraceLineBytes = 16u << 20;

enum class LineRead { Ok, End, TooLong };

// Reads up to the next '\n' (not kept) into `line`. TooLong: the line has more
// than `max_bytes` bytes; the stream is left inside it.
inline LineRead read_line_limited(std::istream& in, std::string& line, size_t max_bytes = kMaxTraceLineBytes) {
  line.clear();
  std::streambuf* sb = in.rdbuf();
  if (!sb) return LineRead::End;
  bool any = false;
  for (;;) {
    const int c = sb->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      if (!any) in.setstate(std::ios::eofbit | std::ios::failbit);
      return any ? LineRead::Ok : LineRead::End;
    }
    any = true;
    if (c == '\n') return LineRead::Ok;
    if (line.size() >= max_bytes) return LineRead::TooLong;
    line.push_back(static_cast<char>(c));
  }
}

}  // namespace kvtier
