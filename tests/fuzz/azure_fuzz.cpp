// The Azure LLM inference CSV importer (traces/azure.cpp): any bytes either
// read as requests with finite, non-decreasing arrival times or are rejected
// with a ConfigError.
#include <cmath>

#include "tests/fuzz/fuzz_input.h"
#include "traces/request_trace.h"

using namespace kvtier;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kvtier_fuzz::write_input(data, size, "trace.csv");
  try {
    auto src = open_request_trace(path);  // sniffs the kind: a .csv file is read as Azure
    Request r;
    double last = 0;
    uint64_t n = 0;
    while (src->next(r)) {
      if (!std::isfinite(r.arrival_s) || r.arrival_s < 0 || (n > 0 && r.arrival_s < last))
        kvtier_fuzz::finding("arrival " + std::to_string(r.arrival_s) + " after " + std::to_string(last));
      if (!r.blocks.empty()) kvtier_fuzz::finding("Azure requests carry no block ids");
      last = r.arrival_s;
      ++n;
    }
    auto again = open_azure_trace(path);
    RequestStats st = request_stats(*again);
    if (st.requests != n || !std::isfinite(st.duration_s)) kvtier_fuzz::finding("stats disagree with the reader");
  } catch (const ConfigError&) {
  }
  return 0;
}
