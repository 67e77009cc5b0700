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
  char buf[1 << 16];
  bool any = false;
  for (;;) {
    in.getline(buf, sizeof buf);  // in chunks: whole lines are read in bulk, never more than a chunk past the bound
    const size_t n = static_cast<size_t>(in.gcount());
    if (in.eof()) {  // the last line, without its '\n'
      line.append(buf, n);
      if (line.size() > max_bytes) return LineRead::TooLong;
      return any || n > 0 ? LineRead::Ok : LineRead::End;
    }
    if (!in.fail()) {  // a whole line; gcount counts the '\n' it took
      line.append(buf, n - 1);
      return line.size() > max_bytes ? LineRead::TooLong : LineRead::Ok;
    }
    if (in.bad() || n == 0) return any ? LineRead::Ok : LineRead::End;
    line.append(buf, n);  // the chunk filled up before the line ended
    in.clear();
    any = true;
    if (line.size() > max_bytes) return LineRead::TooLong;
  }
}

}  // namespace kvtier
