// The attention-trace JSON lines reader, formats v1 and v2
// (traces/attention_trace.cpp): any bytes either read as records the header
// allows or are rejected with a ConfigError.
#include "tests/fuzz/attention_checks.h"
#include "traces/attention_source.h"

using namespace kvtier;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kvtier_fuzz::write_input(data, size, "trace.jsonl");
  try {
    auto src = open_attention_file(path);
    kvtier_fuzz::read_all(*src);
  } catch (const ConfigError&) {
  }
  return 0;
}
