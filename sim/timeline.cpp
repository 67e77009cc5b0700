#include "sim/timeline.h"

#include <nlohmann/json.hpp>

#include "models/param.h"

namespace kvtier {

Timeline::~Timeline() {
  if (out_) {
    std::fclose(out_);
    std::remove(tmp_.c_str());
  }
}

void Timeline::open(const std::string& path) {
  path_ = path;
  tmp_ = path + ".tmp";
  out_ = std::fopen(tmp_.c_str(), "w");
  if (!out_) throw ConfigError(path + ": cannot write the timeline");
  std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", out_);
  std::fprintf(out_, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"streams\"}},\n");
  std::fprintf(out_, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"args\":{\"name\":\"links\"}}");
  first_ = false;
}

uint32_t Timeline::track(Group g, const std::string& name) {
  uint32_t id = next_track_++;
  if (out_)
    std::fprintf(out_, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":%s}}",
                 static_cast<int>(g), id, nlohmann::json(name).dump().c_str());
  return id;
}

void Timeline::event(Group g, uint32_t track, const char* name, double t0_s, double t1_s, double bytes) {
  if (!out_) return;
  // Microseconds with nanosecond resolution, as the format expects.
  std::fprintf(out_, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f", name,
               static_cast<int>(g), track, t0_s * 1e6, (t1_s - t0_s) * 1e6);
  if (bytes > 0) std::fprintf(out_, ",\"args\":{\"bytes\":%.0f}", bytes);
  std::fputc('}', out_);
}

void Timeline::close() {
  if (!out_) return;
  std::fputs("\n]}\n", out_);
  bool ok = std::fclose(out_) == 0;
  out_ = nullptr;
  if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) throw ConfigError(path_ + ": writing the timeline failed");
}

}  // namespace kvtier
