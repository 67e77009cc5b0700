// Temporary request-trace files for the request-trace tests: one directory
// per process, so parallel ctest runs cannot collide.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "traces/request_trace.h"

namespace kvtier::test {

inline std::string request_file(const std::string& name, const std::string& content) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kvtier_request_test." + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::path p = dir / name;
  std::ofstream(p, std::ios::binary) << content;
  return p.string();
}

// The project's copy of the first 1,500 requests of the Mooncake
// conversation trace, and the full trace beside the project.
inline const char* kMooncakeSlice = "tests/data/mooncake_conversation_head1500.jsonl";
inline const char* kMooncakeFull = "../shared/traces/mooncake_conversation_trace.jsonl";
inline const char* kAzureFull = "../shared/traces/azure_llm_2023_code.csv";

// The one-line message of the ConfigError that reading all of `path` throws
// ("" if it reads cleanly).
inline std::string read_error(const std::string& path) {
  try {
    auto src = open_request_trace(path);
    Request r;
    while (src->next(r)) {
    }
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace kvtier::test
