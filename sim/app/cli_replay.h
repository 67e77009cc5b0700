// The request-trace commands of the kvtier command line: `kvtier replay`,
// `kvtier trace export`, and the request-trace branch of `kvtier trace stats`.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace kvtier {

// Adds `replay` to `app` and `export` to its `trace` command.
// The returned function, called after parsing, runs whichever of them was
// chosen and returns its exit code, or -1 if none was. Errors in the input
// are thrown as ConfigError (main prints them and exits with 2).
std::function<int()> add_request_trace_commands(CLI::App& app, CLI::App& trace);

// `kvtier trace stats FILE` for request traces (Mooncake, Azure): prints the
// statistics (and writes them as JSON to `json_out` if not empty).
// ConfigError naming the file for other kinds.
int request_trace_stats(const std::string& path, const std::string& json_out);

}  // namespace kvtier
