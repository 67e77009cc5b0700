// Chrome trace-event JSON (opens in Perfetto or chrome://tracing): one track
// per engine stream (GPU compute, each copy stream) and one per link
// direction, each activity a complete ("X") event. Streamed to a temporary
// file as the run goes, renamed into place when the run ends.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace kvtier {

class Timeline {
 public:
  enum Group { Streams = 1, Links = 2 };
  Timeline() = default;
  ~Timeline();
  void open(const std::string& path);
  bool enabled() const { return out_ != nullptr; }
  // A track, by group and name; returns its id.
  uint32_t track(Group g, const std::string& name);
  void event(Group g, uint32_t track, const char* name, double t0_s, double t1_s, double bytes);
  void close();  // renames into place; throws on I/O failure

 private:
  std::FILE* out_ = nullptr;
  std::string path_, tmp_;
  uint32_t next_track_ = 1;
  bool first_ = true;
};

}  // namespace kvtier
