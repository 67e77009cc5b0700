// `kvtier trace convert | stats | fit | synth | check`: the attention-trace
// commands (docs/traces.md). add_trace_commands() registers them under the
// `trace` subcommand; run_trace_commands() runs the one that was parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

namespace kvtier {

struct TraceCommands;

// Registers the commands on `trace`; the returned object holds their options.
std::shared_ptr<TraceCommands> add_trace_commands(CLI::App& trace);

// If one of these commands was parsed, runs it, sets `rc` and returns true.
// Throws ConfigError on bad input (the caller prints it and exits 2).
bool run_trace_commands(TraceCommands& c, int& rc);

}  // namespace kvtier
