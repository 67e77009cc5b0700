// Chrome trace-event JSON (opens in Perfetto or chrome://tracing), following
// the format's rules so that no event is dropped:
//  - times are whole nanoseconds: a slice's start and end are each rounded
//    once and its duration is their difference, so back-to-back slices touch
//    and never overlap;
//  - a stream track (GPU compute, a copy stream, a device's work queue) runs
//    one job at a time, so its complete ("X") slices never overlap;
//  - a link may carry several transfers at once: they are laid out on lanes
//    (the link's track, then "<link> #2", ...), each lane a sequence of
//    non-overlapping slices, never drawn as nested calls;
//  - counter ("C") tracks: every link's throughput (each transfer counted at
//    its average rate from start to end) and whatever the engine reports
//    through counter() (tier occupancy);
//  - a track's name is written with its first event: no empty tracks.
// Stream slices and counters are streamed to a temporary file as the run
// goes; link transfers are kept until close(), which lays out the lanes,
// writes the throughput counters and renames the file into place.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvtier {

class Timeline {
 public:
  enum Group { Streams = 1, Links = 2, Counters = 3 };
  Timeline() = default;
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Creates the temporary file (path + ".tmp"); throws ConfigError.
  void open(const std::string& path);
  bool enabled() const { return out_ != nullptr; }

  // A slice track (Streams) or a link (Links), by name; returns its id.
  uint32_t track(Group g, const std::string& name);

  // A slice on a Streams track, or a transfer on a Links track (see
  // transfer()). `bytes` > 0 goes into the slice's args.
  void event(Group g, uint32_t track, const char* name, double t0_s, double t1_s, double bytes);
  // A slice on a Streams track with arguments (shown in Perfetto's details).
  void slice(uint32_t track, const std::string& name, double t0_s, double t1_s, const nlohmann::json& args);
  // A transfer of `bytes` on a link: laid out on the link's lanes at close()
  // and added to its throughput counter.
  void transfer(uint32_t link_track, const std::string& name, double t0_s, double t1_s, double bytes,
                const nlohmann::json& args);

  // A counter track: `name` (e.g. "GPU occupancy"), `unit` (the value's
  // key, e.g. "bytes"). Values are set with counter(); a value equal to the
  // last one is not repeated.
  uint32_t counter_track(const std::string& name, const std::string& unit);
  // The counter's value from t_s on. Calls for one counter in time order.
  void counter(uint32_t counter, double t_s, double value);
  // By name: the track is created on first use with unit "bytes".
  void counter(const std::string& name, double t_s, double value);

  void close();  // lays out link lanes, writes counters, renames into place; throws on I/O failure

  static int64_t ns(double t_s);  // the rounding every time goes through

 private:
  struct Track {
    Group group;
    std::string name;
    bool announced = false;
  };
  struct Counter {
    std::string name, unit;
    bool has_last = false;
    double last = 0;
    int64_t last_ns = -1;
  };
  struct Transfer {
    int64_t t0, t1;
    double bytes;
    uint32_t name;  // index into names_
    std::string args;  // JSON object text, may be empty
  };
  void announce(uint32_t track);
  void write_slice(int pid, uint32_t tid, const std::string& name, int64_t t0, int64_t t1, const std::string& args);
  void write_counter(const std::string& name, const std::string& unit, int64_t t, double value);
  uint32_t name_id(const std::string& name);

  std::FILE* out_ = nullptr;
  std::string path_, tmp_;
  std::vector<Track> tracks_;  // by id - 1
  std::vector<Counter> counters_;
  std::vector<std::vector<Transfer>> transfers_;  // per track id - 1 (links only)
  std::vector<std::string> names_;
  std::vector<std::pair<std::string, uint32_t>> name_index_;
};

}  // namespace kvtier
