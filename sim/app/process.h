// Processes and the host, for the commands that run other programs (sweep,
// validate): fork/exec with the output to a log, a child that hands back
// JSON, stop signals, and small facts about this machine. The only place in
// kvtier that creates processes.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

// The CPUs this process may use (its affinity mask), at least 1.
unsigned cpu_count();
// Now as 2026-01-31T12:00:00Z.
std::string utc_now();
// This machine's host name, "unknown" when it has none.
std::string host_name();
// This binary's path (/proc/self/exe resolved), "kvtier" when unknown.
std::string self_exe();

// The whole file ("" when it cannot be read).
std::string read_text(const std::string& path);
// The last non-empty line of `text` ("" when none).
std::string last_line(const std::string& text);
// The last non-empty line of a file: what a failed tool said last.
std::string tail_of(const std::string& path);

struct SpawnOptions {
  std::string exe;               // the program; "" = argv[0]
  std::string log;               // stdout and stderr of the child go here ("" = inherited)
  bool append_log = false;       // append to the log rather than truncate it
  bool end_with_parent = false;  // SIGTERM when the parent dies, default SIGINT/SIGTERM/SIGHUP actions
  bool search_path = false;      // look the program up in PATH (execvp)
  std::string exec_error;        // stderr when it cannot be run ("" = "kvtier: cannot exec PROGRAM")
  int exec_error_status = 127;   // the child's exit status then
};

// Starts argv as a child process; its pid. A child that cannot exec says
// so on stderr and exits with exec_error_status.
pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& options);

// Debian's Python 3 (/usr/bin/python3, which has matplotlib and Optuna
// from apt, where a pyenv or venv python3 first on PATH usually does not),
// else python3 on PATH.
std::string debian_python();
// Runs a script of the source tree with that Python, its output inherited,
// to the end: the script's exit status (1 if it did not exit). When Python
// cannot be run, `missing` is printed and the status is 2.
int run_python(const std::vector<std::string>& script_and_args, const std::string& missing);

// Runs argv (argv[0] the program) to the end with its output appended to
// `log`, echoing the command line on stderr after `who: `; its exit status
// (128 when it did not exit).
int run_tool(const std::vector<std::string>& argv, const std::string& log, const std::string& who);

// Runs `body` in a forked child and returns the JSON it produced; what it
// throws is thrown here as std::runtime_error. SimGrid allows one engine
// per process: this is how one process times several platforms.
json in_child(const std::function<json()>& body);

// While alive, SIGINT, SIGTERM and SIGHUP are recorded instead of ending the
// process (and interrupt waitpid()); the old handlers come back after.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The signal received (0: none yet).
  int received() const;

 private:
  struct sigaction old_int_ {}, old_term_ {}, old_hup_ {};
};

// waitpid(-1) for any child: its pid and status, or -1 when interrupted by a
// signal. Throws std::runtime_error on other failures.
pid_t wait_any(int& status);
// Waits for `pid` to end, through interruptions.
void wait_for(pid_t pid, int& status);

}  // namespace kvtier
