#include "sim/app/scratch_dir.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace kvtier {

namespace fs = std::filesystem;

// A sweep killed outright (SIGKILL) leaves its folder, named for its
// process id: the next sweep removes the folders of processes that no
// longer exist.
ScratchDir::ScratchDir() {
  const fs::path tmp = fs::temp_directory_path();
  const std::string prefix = "kvtier-sweep-";
  std::error_code ec;
  for (fs::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t dash = name.find('-', prefix.size());
    const std::string pid_text = name.substr(prefix.size(), dash == std::string::npos ? 0 : dash - prefix.size());
    if (pid_text.empty() || pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      fs::remove_all(it->path(), rm);
    }
  }
  std::string tmpl = (tmp / (prefix + std::to_string(::getpid()) + "-XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("cannot create a scratch folder in " + tmpl + ": " + strerror(errno));
  path = buf.data();
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

}  // namespace kvtier
