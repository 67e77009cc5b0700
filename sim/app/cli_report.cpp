#include "sim/app/cli_report.h"

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/param.h"
#include "sim/app/process.h"
#include "sim/core/result.h"

namespace kvtier {

namespace fs = std::filesystem;

namespace {

struct ReportArgs {
  std::string input, out = "report.html", timeline;
};

int run_report(const ReportArgs& a) {
  std::error_code ec;
  if (!fs::exists(a.input, ec)) throw ConfigError(a.input + ": no such file or folder (a result.json, a run folder, or a sweep's .jsonl or .csv)");
  if (fs::is_directory(a.out, ec)) throw ConfigError("-o " + a.out + ": is a folder; expected a file name such as report.html");
  if (!a.timeline.empty() && !fs::is_regular_file(a.timeline, ec)) throw ConfigError("--timeline " + a.timeline + ": no such file");
  const std::string script = (fs::path(KVTIER_SOURCE_DIR) / "plots" / "kvtier_report.py").string();
  if (!fs::is_regular_file(script, ec)) throw ConfigError(script + ": the report script is missing from the kvtier source tree");
  std::vector<std::string> args{script, "--as", "kvtier", a.input, "-o", a.out};
  if (!a.timeline.empty()) {
    args.push_back("--timeline");
    args.push_back(a.timeline);
  }
  return run_python(args, "kvtier: error: report: cannot run python3 (Debian: apt install python3-matplotlib)\n");
}

}  // namespace

std::function<int()> add_report_command(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand("report", "one static HTML page (figures, plots, configuration) from a run or a sweep");
  cmd->add_option("input", a->input, "result.json, a run folder, or a sweep's .jsonl or .csv")->required();
  cmd->add_option("-o,--out", a->out, "the page to write")->capture_default_str();
  cmd->add_option("--timeline", a->timeline, "the run's --timeline file (default: timeline.json beside result.json)");
  return [a, cmd]() { return *cmd ? run_report(*a) : -1; };
}

}  // namespace kvtier
