#include "sim/core/timeline.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>

#include "models/param.h"

namespace kvtier {

namespace {

// Trace-event timestamps are microseconds; three decimals carry whole
// nanoseconds exactly, printed from the integer so no rounding happens twice.
std::string us(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
  return buf;
}

const char* group_name(Timeline::Group g) {
  switch (g) {
    case Timeline::Streams: return "streams";
    case Timeline::Links: return "links";
    default: return "counters";
  }
}

std::string json_str(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

int64_t Timeline::ns(double t_s) { return t_s <= 0 ? 0 : static_cast<int64_t>(std::llround(t_s * 1e9)); }

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
  for (int pid = Streams; pid <= Counters; ++pid)
    std::fprintf(out_, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"%s\"}},\n"
                       "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
                 pid == Streams ? "" : ",\n", pid, group_name(static_cast<Group>(pid)), pid, pid);
}

uint32_t Timeline::track(Group g, const std::string& name) {
  tracks_.push_back(Track{g, name, false});
  transfers_.emplace_back();
  return static_cast<uint32_t>(tracks_.size());
}

void Timeline::announce(uint32_t id) {
  Track& t = tracks_[id - 1];
  if (t.announced) return;
  t.announced = true;
  std::fprintf(out_,
               ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":%s}}"
               ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
               static_cast<int>(t.group), id, json_str(t.name).c_str(), static_cast<int>(t.group), id, id);
}

void Timeline::write_slice(int pid, uint32_t tid, const std::string& name, int64_t t0, int64_t t1,
                           const std::string& args) {
  std::fprintf(out_, ",\n{\"name\":%s,\"ph\":\"X\",\"pid\":%d,\"tid\":%u,\"ts\":%s,\"dur\":%s", json_str(name).c_str(),
               pid, tid, us(t0).c_str(), us(t1 - t0).c_str());
  if (!args.empty()) std::fprintf(out_, ",\"args\":%s", args.c_str());
  std::fputc('}', out_);
}

void Timeline::write_counter(const std::string& name, const std::string& unit, int64_t t, double value) {
  char v[40];
  std::snprintf(v, sizeof v, "%.17g", value);
  std::fprintf(out_, ",\n{\"name\":%s,\"ph\":\"C\",\"pid\":%d,\"ts\":%s,\"args\":{%s:%s}}", json_str(name).c_str(),
               static_cast<int>(Counters), us(t).c_str(), json_str(unit).c_str(), v);
}

void Timeline::event(Group g, uint32_t track, const char* name, double t0_s, double t1_s, double bytes) {
  if (!out_) return;
  nlohmann::json args = nlohmann::json::object();
  if (bytes > 0) args["bytes"] = bytes;
  if (g == Links)
    transfer(track, name, t0_s, t1_s, bytes, args);
  else
    slice(track, name, t0_s, t1_s, args);
}

void Timeline::slice(uint32_t track, const std::string& name, double t0_s, double t1_s, const nlohmann::json& args) {
  if (!out_ || track == 0 || track > tracks_.size()) return;
  announce(track);
  const int64_t a = ns(t0_s), b = std::max(a, ns(t1_s));
  write_slice(static_cast<int>(tracks_[track - 1].group), track, name, a, b,
              args.is_object() && !args.empty() ? args.dump() : std::string());
}

uint32_t Timeline::name_id(const std::string& name) {
  for (const auto& [n, id] : name_index_)
    if (n == name) return id;
  names_.push_back(name);
  name_index_.emplace_back(name, static_cast<uint32_t>(names_.size() - 1));
  return static_cast<uint32_t>(names_.size() - 1);
}

void Timeline::transfer(uint32_t track, const std::string& name, double t0_s, double t1_s, double bytes,
                        const nlohmann::json& args) {
  if (!out_ || track == 0 || track > tracks_.size()) return;
  const int64_t a = ns(t0_s), b = std::max(a, ns(t1_s));
  transfers_[track - 1].push_back(
      Transfer{a, b, bytes, name_id(name), args.is_object() && !args.empty() ? args.dump() : std::string()});
}

uint32_t Timeline::counter_track(const std::string& name, const std::string& unit) {
  counters_.push_back(Counter{name, unit});
  return static_cast<uint32_t>(counters_.size());
}

void Timeline::counter(uint32_t id, double t_s, double value) {
  if (!out_ || id == 0 || id > counters_.size()) return;
  Counter& c = counters_[id - 1];
  if (c.has_last && c.last == value) return;
  const int64_t t = std::max(ns(t_s), c.last_ns);
  c.has_last = true;
  c.last = value;
  c.last_ns = t;
  write_counter(c.name, c.unit, t, value);
}

void Timeline::counter(const std::string& name, double t_s, double value) {
  if (!out_) return;
  uint32_t id = 0;
  for (size_t i = 0; i < counters_.size(); ++i)
    if (counters_[i].name == name) id = static_cast<uint32_t>(i + 1);
  if (id == 0) id = counter_track(name, "bytes");
  counter(id, t_s, value);
}

void Timeline::close() {
  if (!out_) return;
  uint32_t next_tid = static_cast<uint32_t>(tracks_.size()) + 1;
  for (size_t i = 0; i < tracks_.size(); ++i) {
    std::vector<Transfer>& xs = transfers_[i];
    if (xs.empty()) continue;
    const uint32_t id = static_cast<uint32_t>(i + 1);
    std::stable_sort(xs.begin(), xs.end(),
                     [](const Transfer& a, const Transfer& b) { return a.t0 != b.t0 ? a.t0 < b.t0 : a.t1 < b.t1; });
    // Interval colouring in start order: the first lane free by a transfer's
    // start takes it, so lanes are as few as the most transfers at once.
    std::vector<int64_t> lane_end;
    std::vector<uint32_t> lane_tid;
    for (const Transfer& x : xs) {
      size_t lane = 0;
      while (lane < lane_end.size() && lane_end[lane] > x.t0) ++lane;
      if (lane == lane_end.size()) {
        lane_end.push_back(0);
        if (lane == 0) {
          announce(id);
          lane_tid.push_back(id);
        } else {
          const uint32_t tid = next_tid++;
          std::fprintf(out_,
                       ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":%s}}"
                       ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
                       static_cast<int>(Links), tid, json_str(tracks_[i].name + " #" + std::to_string(lane + 1)).c_str(),
                       static_cast<int>(Links), tid, id);
          lane_tid.push_back(tid);
        }
      }
      lane_end[lane] = x.t1;
      write_slice(static_cast<int>(Links), lane_tid[lane], names_[x.name], x.t0, x.t1, x.args);
    }
    // Throughput: the sum of the average rates of the transfers in flight.
    std::vector<std::pair<int64_t, double>> steps;
    for (const Transfer& x : xs) {
      if (x.t1 <= x.t0 || x.bytes <= 0) continue;
      const double rate = x.bytes / (static_cast<double>(x.t1 - x.t0) * 1e-9) / 1e9;  // GB/s
      steps.emplace_back(x.t0, rate);
      steps.emplace_back(x.t1, -rate);
    }
    std::stable_sort(steps.begin(), steps.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const std::string cname = tracks_[i].name + " throughput";
    double v = 0, last = -1;
    int active = 0;
    for (size_t k = 0; k < steps.size();) {
      const int64_t t = steps[k].first;
      for (; k < steps.size() && steps[k].first == t; ++k) {
        v += steps[k].second;
        active += steps[k].second > 0 ? 1 : -1;
      }
      if (active == 0) v = 0;  // no rounding residue once the link is idle
      if (v != last) write_counter(cname, "GB/s", t, v);
      last = v;
    }
  }
  std::fputs("\n]}\n", out_);
  // A write that failed earlier (a full disk) only shows in the error flag.
  bool ok = !std::ferror(out_);
  ok = std::fclose(out_) == 0 && ok;
  out_ = nullptr;
  if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    // A staged output (NAME.tmp, renamed into place at the end): the user's name.
    std::string shown = path_;
    if (shown.size() > 4 && shown.compare(shown.size() - 4, 4, ".tmp") == 0) shown.resize(shown.size() - 4);
    throw ConfigError(shown + ": writing the timeline failed");
  }
}

}  // namespace kvtier
