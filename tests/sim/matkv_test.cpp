// MatKV: prefill loads precomputed KV from flash instead of computing it, and
// the next request's load overlaps the current decode.
#include <catch2/catch.hpp>

#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

TEST_CASE("MatKV: the next request's KV load hides behind a long enough decode") {
  json m = simulate(load_config("configs/systems/matkv.json", {"workload.decode_steps=64"}));
  REQUIRE(m.contains("next_request"));
  CHECK(m["next_request"]["load_hidden"].get<bool>());
  // Its first token then waits for no flash read: only the copy from DRAM into the GPU and the query tokens.
  CHECK(m["next_request"]["ttft_s"].get<double>() < m["ttft_s"].get<double>() + m["next_request"]["copy_to_gpu_s"].get<double>());
}

TEST_CASE("MatKV: with a one-step decode the next load is exposed") {
  json m = simulate(load_config("configs/systems/matkv.json", {"workload.decode_steps=1"}));
  REQUIRE(m.contains("next_request"));
  CHECK_FALSE(m["next_request"]["load_hidden"].get<bool>());
  CHECK(m["next_request"]["ttft_s"].get<double>() > 0.5 * m["ttft_s"].get<double>());
}

TEST_CASE("prefill load reads the prompt's KV from the lowest tier") {
  json m = simulate(load_config("configs/systems/matkv.json", {"workload.decode_steps=1", "workload.overlap_next_load=false"}));
  REQUIRE(m.contains("links"));
  CHECK_FALSE(m.contains("next_request"));
  double read = 0;
  for (auto& [name, l] : m["links"].items())
    if (name.find(".read") != std::string::npos) read += l["bytes"].get<double>();
  CHECK(read > 0);
}

TEST_CASE("MatKV: the next request's TTFT includes every hop of its KV, the copy into the GPU too") {
  json m = simulate(load_config("configs/systems/matkv.json", {"workload.decode_steps=64"}));
  REQUIRE(m.contains("next_request"));
  // 16 x 2048 tokens x 128 KiB of Llama-3.1-8B KV = 4.3 GB from DRAM over PCIe 5.0 x16 (at most 63 GB/s).
  const double bytes = 16.0 * 2048 * 131072;
  CHECK(m["next_request"]["copy_to_gpu_s"].get<double>() >= bytes / 63e9);
  CHECK(m["next_request"]["ttft_s"].get<double>() >= m["next_request"]["copy_to_gpu_s"].get<double>());
}
