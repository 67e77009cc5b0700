// `kvtier search SEARCH.json`: the best configuration of a space under
// constraints for a budget of trials, proposed by Optuna (TPE; NSGA-II for
// several objectives) in bench/search/kvtier_search.py, each round of
// trials run as a `kvtier sweep` of points (locally or with --slurm)
// (docs/sweep.md, Searches).
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace kvtier {

// Registers the subcommand; the returned function runs it when it was
// given (its exit status) and returns -1 otherwise.
std::function<int()> add_search_command(CLI::App& app);

}  // namespace kvtier
