// `kvtier report INPUT -o report.html`: one static page (no server, no
// network) from a run or a sweep, drawn by plots/kvtier_report.py with
// Debian's python3 and matplotlib.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace kvtier {

// Adds `report` to `app`. The returned function, called after parsing, runs
// it if it was chosen and returns its exit code, or -1 if it was not.
// Input problems are thrown as ConfigError.
std::function<int()> add_report_command(CLI::App& app);

}  // namespace kvtier
