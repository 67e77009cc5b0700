// A sweep's output files (docs/sweep.md, Output): the JSON-lines file, one
// line per point appended with one write() each, and the CSV table and the
// manifest rewritten from it. Shared by the local sweep and the Slurm one,
// whose shards' lines are merged into the same files.
#pragma once

#include <set>
#include <stdexcept>
#include <string>

#include "nlohmann/json.hpp"

namespace kvtier {

struct OutputPaths {
  std::string jsonl, csv, manifest;
};

// `out`, or out/<name>/sweep.jsonl (sweep.I-of-N.jsonl for a shard), and
// the CSV and manifest beside it.
OutputPaths output_paths(const std::string& out, const std::string& sweep_name, unsigned shard, unsigned shards);
// FILE.jsonl -> FILE<ext>.
std::string with_extension(const std::string& jsonl, const std::string& ext);

// What every sweep manifest starts with: the build, the sweep file and its
// name, the host, when it started and how long it has run.
nlohmann::json manifest_head(const std::string& sweep_file, const std::string& sweep_name, const std::string& started_utc,
                             double wall_s);

// The keys of the lines of a JSON-lines result file, read a line at a time
// (none when it does not exist). A last line without its newline is what an
// interrupted write leaves: with `cut`, it is cut off so appending starts
// clean (a warning unless quiet); without, it is ignored. Throws ConfigError
// on a line that is not a sweep result.
std::set<std::string> done_keys(const std::string& jsonl, bool cut, bool quiet);

// A result line that could not be written (a full disk): the sweep stops
// there, keeping what it wrote.
struct WriteFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Appends lines with a single write() each on an O_APPEND descriptor: a
// crash leaves whole lines only (done_keys cuts off anything else).
class LineAppender {
 public:
  explicit LineAppender(const std::string& path);
  ~LineAppender();
  LineAppender(const LineAppender&) = delete;
  LineAppender& operator=(const LineAppender&) = delete;
  void append(const std::string& line);  // throws WriteFailed, leaving no partial line

 private:
  std::string path_;
  int fd_ = -1;
};

// The flat table of a sweep's JSON-lines file: index, key, every override
// path, every metric; one row per line, sorted by index (then key).
std::string sweep_csv(const std::string& jsonl_path);

// 4.5 s, 3 min 07 s, 2 h 05 min.
std::string seconds_text(double s);

}  // namespace kvtier
