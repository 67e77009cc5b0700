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
  // Its first token then costs only the query tokens, well under this batch's TTFT (load + query).
  CHECK(m["next_request"]["ttft_s"].get<double>() < 0.5 * m["ttft_s"].get<double>());
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
