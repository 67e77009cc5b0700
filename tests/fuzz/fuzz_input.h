// What every fuzz target shares: the input written to a file in a private
// scratch folder (the parsers read paths), and the checks that turn a wrong
// but quiet result into a finding.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace kvtier_fuzz {

// A scratch folder of this process, made once; libFuzzer runs inputs one at a
// time in a process, so one file per target is enough.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/kvtier_fuzz_XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    return tmpl;
  }();
  return dir;
}

// Writes `size` bytes to scratch_dir()/name and returns the path.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = scratch_dir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

// A parser accepted input it should have rejected: abort so libFuzzer keeps the input.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "kvtier fuzz finding: %s\n", what.c_str());
  std::abort();
}

}  // namespace kvtier_fuzz
