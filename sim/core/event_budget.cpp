#include "sim/core/event_budget.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "sim/core/config.h"

namespace kvtier {

namespace {
double g_limit = 0;  // 0: kDefaultEventLimit
EventEstimate g_estimate;
bool g_committed = false;
uint64_t g_counted = 0;

std::string count_text(double n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, n < 1e7 ? "%.0f" : "%.3g", n);
  return buf;
}

std::string limit_source() {
  return g_limit > 0 ? "--max-events" : "the default; --max-events sets it";
}
}  // namespace

void set_event_limit(double events) { g_limit = events; }

double event_limit() { return g_limit > 0 ? g_limit : kDefaultEventLimit; }

double parse_event_count(const std::string& text, const std::string& option) {
  const char* s = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (text.empty() || end == s || *end != '\0' || !std::isfinite(v) || v < 1 || v > 1e18)
    throw ConfigError(option + ": expected a number of events from 1 to 1e18, such as 1e9, got '" + text + "'");
  return std::floor(v);
}

void commit_events(const EventEstimate& estimate) {
  g_estimate = estimate;
  g_committed = true;
  const double limit = event_limit();
  if (estimate.events > limit)
    throw ConfigError(estimate.knob + ": the run would process about " + count_text(estimate.events) +
                      " events (GPU kernels: " + estimate.what + "), above the limit of " + count_text(limit) + " (" +
                      limit_source() + ")");
}

void count_event() {
  if (++g_counted > event_limit())
    throw ConfigError("the run passed " + count_text(event_limit()) + " events (GPU kernels), the limit (" +
                      limit_source() + ")" +
                      (g_committed ? "; it was estimated at " + count_text(g_estimate.events) + " (" + g_estimate.what +
                                         "), which preemption and recomputation can exceed"
                                   : std::string()));
}

uint64_t events_counted() { return g_counted; }

void add_events_json(nlohmann::json& resources) {
  if (g_committed) resources["estimated_events"] = g_estimate.events;
  resources["events_counted"] = g_counted;
  resources["event_limit"] = event_limit();
}

void reset_events() {
  g_estimate = EventEstimate{};
  g_committed = false;
  g_counted = 0;
}

}  // namespace kvtier
