#include "sim/core/event_budget.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "sim/core/config.h"

namespace kvtier {

namespace {
double g_event_limit = 0;  // 0: kDefaultEventLimit
EventEstimate g_event_estimate;
bool g_events_committed = false;
uint64_t g_events_counted = 0;

std::string event_count_text(double n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, n < 1e7 ? "%.0f" : "%.3g", n);
  return buf;
}

std::string event_limit_source() {
  return g_event_limit > 0 ? "--max-events" : "the default; --max-events sets it";
}
}  // namespace

void set_event_limit(double events) { g_event_limit = events; }

double event_limit() { return g_event_limit > 0 ? g_event_limit : kDefaultEventLimit; }

double parse_event_count(const std::string& text, const std::string& option) {
  const char* s = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (text.empty() || end == s || *end != '\0' || !std::isfinite(v) || v < 1 || v > 1e18)
    throw ConfigError(option + ": expected a number of events from 1 to 1e18, such as 1e9, got '" + text + "'");
  return std::floor(v);
}

void commit_events(const EventEstimate& estimate) {
  g_event_estimate = estimate;
  g_events_committed = true;
  g_events_counted = 0;  // a new run (tests run many in one process) counts from zero
  const double limit = event_limit();
  if (estimate.at_least > limit)
    throw ConfigError(estimate.knob + ": the run would process " +
                      (estimate.at_least < estimate.events ? "at least " : "") + event_count_text(estimate.at_least) +
                      " events (GPU kernels: " + estimate.what + "), above the limit of " + event_count_text(limit) + " (" +
                      event_limit_source() + ")");
}

void count_event() {
  if (++g_events_counted > event_limit())
    throw ConfigError("the run passed " + event_count_text(event_limit()) + " events (GPU kernels), the limit (" +
                      event_limit_source() + ")" +
                      (g_events_committed ? "; it was estimated at " + event_count_text(g_event_estimate.events) + " (" + g_event_estimate.what +
                                         "), which preemption and recomputation can exceed"
                                   : std::string()));
}

uint64_t events_counted() { return g_events_counted; }

void add_events_json(nlohmann::json& resources) {
  if (g_events_committed) {
    resources["estimated_events"] = g_event_estimate.events;
    if (g_event_estimate.at_least < g_event_estimate.events) resources["estimated_events_at_least"] = g_event_estimate.at_least;
  }
  resources["events_counted"] = g_events_counted;
  resources["event_limit"] = event_limit();
}

void reset_events() {
  g_event_estimate = EventEstimate{};
  g_events_committed = false;
  g_events_counted = 0;
}

}  // namespace kvtier
