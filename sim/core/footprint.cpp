#include "sim/core/footprint.h"

#include <malloc.h>

// Under AddressSanitizer malloc is the sanitizer's, which glibc's mallinfo2
// does not see: ask the sanitizer's allocator instead.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVTIER_ASAN_ALLOCATOR 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KVTIER_ASAN_ALLOCATOR 1
#endif
#ifdef KVTIER_ASAN_ALLOCATOR
#include <sanitizer/allocator_interface.h>
#endif

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "sim/core/config.h"

namespace kvtier {

namespace {

double g_limit = 0;  // 0: from the machine
std::vector<FootprintPart> g_parts;

// MemAvailable from /proc/meminfo (bytes); 0 where it cannot be read.
double read_available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024.0;
  return 0;
}

// Read again once it is a second old: a run commits its parts within one,
// and validating a sweep's million configurations reads it a few times, not
// a million (each read costs more than the rest of a point's memory check).
double available_memory() {
  using Clock = std::chrono::steady_clock;
  static Clock::time_point read_at;
  static double bytes = 0;
  static bool read = false;
  const Clock::time_point now = Clock::now();
  if (!read || now - read_at >= std::chrono::seconds(1)) {
    bytes = read_available_memory();
    read_at = now;
    read = true;
  }
  return bytes;
}

std::string gigabytes(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return buf;
}

}  // namespace

void set_memory_limit(double bytes) { g_limit = bytes; }

double memory_limit() {
  if (g_limit > 0) return g_limit;
  const double avail = available_memory();
  return avail > 0 ? 0.9 * avail : 0.0;  // 0: unknown, nothing is refused
}

std::string memory_limit_source() {
  return g_limit > 0 ? "--max-memory" : "the machine's available memory less a tenth; --max-memory sets it";
}

double parse_memory_size(const std::string& text, const std::string& option) {
  std::istringstream in(text);
  double v = 0;
  in >> v;
  std::string unit;
  std::getline(in, unit);
  auto bad = [&] {
    throw ConfigError(option + ": expected a size such as 512M, 4G or a byte count, got '" + text + "'");
  };
  if (in.bad() || !std::isfinite(v) || v <= 0) bad();
  double mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k") mult = 1024.0;
  else if (unit == "M" || unit == "MiB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TiB") mult = 1024.0 * 1024 * 1024 * 1024;
  else bad();
  return v * mult;
}

double committed_footprint_bytes() {
  double total = kProcessBaseBytes;
  for (const FootprintPart& p : g_parts) total += p.bytes;
  return total;
}

void commit_footprint(const FootprintPart& part) {
  g_parts.push_back(part);
  const double total = committed_footprint_bytes();
  const double limit = memory_limit();
  if (limit > 0 && total > limit)
    throw ConfigError(part.knob + ": the run would need about " + gigabytes(total) + " of memory (" + part.what + ": " +
                      gigabytes(part.bytes) + "), above the limit of " + gigabytes(limit) + " (" +
                      memory_limit_source() + ")");
}

nlohmann::json footprint_json() {
  nlohmann::json parts = nlohmann::json::object();
  for (const FootprintPart& p : g_parts) parts[p.what] = p.bytes;
  return {{"estimated_peak_bytes", committed_footprint_bytes()}, {"parts", parts}};
}

void reset_footprint() { g_parts.clear(); }

double heap_bytes_in_use() {
#ifdef KVTIER_ASAN_ALLOCATOR
  return static_cast<double>(__sanitizer_get_current_allocated_bytes());
#else
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<double>(mi.uordblks) + static_cast<double>(mi.hblkhd);
#endif
}

}  // namespace kvtier
