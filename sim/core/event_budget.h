// The work a run will do, counted in events, against a limit, as memory is
// (sim/core/footprint.h). An event is a GPU kernel the simulation runs (one
// layer of one decode step, of one batch iteration or of one prefill chunk,
// on one instance): each is a SimGrid exec with the selection, the copies and
// the waits of its layer around it, so a run's time grows with its events
// (bench/events_per_second.py measures how fast).
//
// Before a run starts the engine's driver estimates its events from its
// shape (exact for one batch, within bounds where a scheduler decides) and
// commits the estimate: a run certain to pass the limit is refused with a
// ConfigError naming the settings that drive it. While it runs every kernel is counted, and a run
// that passes the limit all the same (a preempted request's prompt computed
// again, which no estimate sees) stops with a ConfigError rather than going
// on for hours.
#pragma once

#include <cstdint>
#include <string>

#include "nlohmann/json.hpp"

namespace kvtier {

// The default limit: about two hours of the engine at the rate
// bench/events_per_second.py measures (docs/reliability.md).
constexpr double kDefaultEventLimit = 1e8;

// Where the scheduler decides how requests share iterations the count is
// known only within bounds: `at_least` (no schedule does with fewer) is held
// to the limit up front, `events` (no schedule without preemption needs
// more) is what result.json reports as the estimate.
struct EventEstimate {
  std::string what;  // "40 layers x (1024 decode steps x 1 GPU batches + 4 prefill chunks + 1)"
  std::string knob;  // the settings that drive it
  double events = 0;
  double at_least = 0;
};

// Sets the limit (0: the default).
void set_event_limit(double events);
double event_limit();
// Parses "1e9", "250000000" or "2.5e8"; throws ConfigError naming `option`.
double parse_event_count(const std::string& text, const std::string& option);

// The run's estimate (replacing an earlier one: a cluster's instances each
// estimate the whole stream they share, before it runs), and the count back
// to zero; throws ConfigError when at_least is above the limit.
void commit_events(const EventEstimate& estimate);
// One event more; throws ConfigError once past the limit.
void count_event();
uint64_t events_counted();
// estimated_events (and estimated_events_at_least where it differs),
// events_counted, event_limit, for result.json's resources.
void add_events_json(nlohmann::json& resources);
// Forgets the estimate and the count (a new run in the same process).
void reset_events();

}  // namespace kvtier
