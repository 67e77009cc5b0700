#include "sim/core/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace kvtier {

namespace {
bool g_progress_on = false;
constexpr std::chrono::milliseconds kRedraw{500};
// Runs shorter than this never draw: a quick run prints what it always did.
// KVTIER_PROGRESS_AFTER_S changes it (the tests draw at once, on short runs).
std::chrono::steady_clock::duration quiet_period() {
  double s = 2.0;
  if (const char* e = std::getenv("KVTIER_PROGRESS_AFTER_S")) {
    char* end = nullptr;
    const double v = std::strtod(e, &end);
    if (end != e && *end == '\0' && v >= 0 && v < 1e6) s = v;
  }
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}
}  // namespace

void Progress::enable(bool on) { g_progress_on = on; }
bool Progress::enabled() { return g_progress_on; }

Progress::Progress(std::string what, double total, std::string unit)
    : what_(std::move(what)), unit_(std::move(unit)), total_(total) {
  start_ = std::chrono::steady_clock::now();
  next_ = start_ + quiet_period();
}

Progress::~Progress() { finish(); }

void Progress::finish() {
  if (drawn_) std::fputs("\r\033[K", stderr);  // the line goes; what follows starts clean
  drawn_ = false;
  next_ = std::chrono::steady_clock::time_point::max();  // and is not drawn again
}

void Progress::update(double done) {
  if (!g_progress_on) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) return;
  next_ = now + kRedraw;
  draw(done, std::chrono::duration<double>(now - start_).count());
}

void Progress::draw(double done, double elapsed_s) {
  char line[256];
  const double share = total_ > 0 ? std::min(1.0, done / total_) : 0.0;
  int n = std::snprintf(line, sizeof line, "\rkvtier: %s %.0f%% (%.0f of %.0f %s)", what_.c_str(), 100.0 * share, done,
                        total_, unit_.c_str());
  if (share > 0 && share < 1 && n > 0 && static_cast<size_t>(n) < sizeof line) {
    const double left = elapsed_s * (1 - share) / share;
    std::snprintf(line + n, sizeof line - static_cast<size_t>(n), ", %.0f s left", std::ceil(left));
  }
  std::fputs(line, stderr);
  std::fputs("\033[K", stderr);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace kvtier
