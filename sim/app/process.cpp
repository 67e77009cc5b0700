#include "sim/app/process.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace fs = std::filesystem;

namespace kvtier {

unsigned cpu_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("kvtier") : p.string();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

std::string tail_of(const std::string& path) { return last_line(read_text(path)); }

namespace {

// In the child, between fork() and exec(): only async-signal-safe calls.
[[noreturn]] void exec_child(const char* exe, char* const* argv, const SpawnOptions& o, pid_t parent) {
  if (o.end_with_parent) {
    // The child ends with its parent, however the parent ends (even SIGKILL).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGINT, &dfl, nullptr);
    sigaction(SIGTERM, &dfl, nullptr);
    sigaction(SIGHUP, &dfl, nullptr);
  }
  if (!o.log.empty()) {
    int fd = ::open(o.log.c_str(), O_WRONLY | O_CREAT | (o.append_log ? O_APPEND : O_TRUNC), 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
  }
  if (o.search_path) ::execvp(exe, argv);
  else ::execv(exe, argv);
  ssize_t ignored = 0;
  if (!o.exec_error.empty()) {
    ignored = ::write(2, o.exec_error.data(), o.exec_error.size());
  } else {
    const char msg[] = "kvtier: cannot exec ";
    ignored = ::write(2, msg, sizeof msg - 1);
    ignored = ::write(2, exe, std::strlen(exe));
    ignored = ::write(2, "\n", 1);
  }
  (void)ignored;
  ::_exit(o.exec_error_status);
}

}  // namespace

pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& o) {
  if (argv.empty()) throw std::runtime_error("spawn: no program");
  // Everything the child needs is built before fork().
  std::vector<std::string> args = argv;
  const std::string exe = o.exe.empty() ? args.front() : o.exe;
  std::vector<char*> a;
  for (auto& s : args) a.push_back(s.data());
  a.push_back(nullptr);
  const pid_t parent = ::getpid();
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + strerror(errno));
  if (pid == 0) exec_child(exe.c_str(), a.data(), o, parent);
  return pid;
}

void wait_for(pid_t pid, int& status) {
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

pid_t wait_any(int& status) {
  pid_t pid = ::waitpid(-1, &status, 0);
  if (pid < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid failed: ") + strerror(errno));
  return pid;
}

int run_tool(const std::vector<std::string>& argv, const std::string& log, const std::string& who) {
  std::cerr << who << ": " << argv[0].substr(argv[0].rfind('/') + 1);
  for (size_t i = 1; i < argv.size(); ++i) std::cerr << " " << argv[i];
  std::cerr << "\n";
  SpawnOptions o;
  o.log = log;
  o.append_log = true;
  int status = 0;
  wait_for(spawn(argv, o), status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

namespace {

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t w = write(fd, s.data() + off, s.size() - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
}

std::string read_all(int fd) {
  std::string text;
  char buf[65536];
  ssize_t r;
  while ((r = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(r));
  return text;
}

}  // namespace

json in_child(const std::function<json()>& body) {
  int fd[2];
  if (pipe(fd) != 0) throw std::runtime_error("pipe failed");
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    close(fd[0]);
    json out;
    try {
      out = body();
    } catch (const std::exception& e) {
      out = json{{"error", e.what()}};
    }
    write_all(fd[1], out.dump());
    close(fd[1]);
    _exit(0);
  }
  close(fd[1]);
  const std::string text = read_all(fd[0]);
  close(fd[0]);
  int status = 0;
  wait_for(pid, status);
  if (text.empty()) throw std::runtime_error("the child process died before it answered");
  json j = json::parse(text);
  if (j.is_object() && j.contains("error")) throw std::runtime_error(j["error"].get<std::string>());
  return j;
}

namespace {

// The signal that asked to stop (0: none).
volatile sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int sig) { g_stop_signal = sig; }

}  // namespace

StopSignals::StopSignals() {
  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waitpid() returns EINTR so a waiting loop sees the signal
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  sigaction(SIGHUP, &sa, &old_hup_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGHUP, &old_hup_, nullptr);
}

int StopSignals::received() const { return g_stop_signal; }

std::string debian_python() {
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

int run_python(const std::vector<std::string>& script_and_args, const std::string& missing) {
  std::vector<std::string> argv{debian_python()};
  argv.insert(argv.end(), script_and_args.begin(), script_and_args.end());
  SpawnOptions so;
  so.search_path = true;
  so.exec_error = missing;
  so.exec_error_status = 2;
  int status = 0;
  wait_for(spawn(argv, so), status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace kvtier
