// Configuration loading: presets, overrides, and the errors users see.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "sim/core/config.h"
#include "sim/engine/engine.h"

using namespace kvtier;
namespace fs = std::filesystem;

namespace {
std::string write_tmp(const std::string& name, const std::string& text) {
  fs::path dir = fs::temp_directory_path() / ("kvtier_config_test." + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Loads and fully validates (component sections included) without simulating.
void validate(const std::string& path, const std::vector<std::string>& sets = {}) {
  json cfg = load_config(path, sets);
  Simulation sim(cfg);
}
}  // namespace

TEST_CASE("the default config resolves with every default filled in") {
  json cfg = load_config("configs/default.json", {});
  Simulation sim(cfg);
  CHECK(cfg["workload"]["batch"] == 4);
  CHECK(cfg["sim"]["seed"] == 1);
  CHECK(cfg["hardware"]["devices"]["gpu"].contains("launch_overhead_us"));
  CHECK(cfg["policies"]["prefetch"]["depth"] == 1);
  CHECK(cfg["workload"]["trace"].contains("zipf_s"));
}

TEST_CASE("a section preset with overrides next to it, and --set on top") {
  std::string p = write_tmp("preset_override.json", R"({
    "hardware": {"preset": "configs/hardware/rtx4090_dram_nvme.json", "devices": {"gpu": {"capacity_GB": 48}}},
    "model": "configs/models/opt-6.7b.json", "workload": {"context_tokens": 1024}})");
  json cfg = load_config(p, {"workload.batch=3", "policies.eviction.name=lru"});
  CHECK(cfg["hardware"]["devices"]["gpu"]["capacity_GB"] == 48);
  CHECK(cfg["hardware"]["devices"]["gpu"]["kind"] == "gpu");  // the rest of the preset survives
  CHECK(cfg["workload"]["batch"] == 3);
  CHECK(cfg["name"] == "preset_override");
}

TEST_CASE("malformed JSON is reported as file:line:column") {
  std::string p = write_tmp("malformed.json", "{\n  \"name\": \"x\",\n  \"model\": [1, 2,,]\n}\n");
  std::string e = error_of([&] { load_config(p, {}); });
  CHECK_THAT(e, Catch::Contains(p + ":3:"));
  CHECK_THAT(e, Catch::Contains("invalid JSON"));
}

TEST_CASE("an unknown key names its path and suggests the nearest known key") {
  std::string e = error_of([] { validate("configs/default.json", {"workload.bach=4"}); });
  CHECK_THAT(e, Catch::Contains("workload.bach"));
  CHECK_THAT(e, Catch::Contains("did you mean 'batch'"));
  e = error_of([] { validate("configs/default.json", {"hardware.devices.gpu.capacity_gb=4"}); });
  CHECK_THAT(e, Catch::Contains("hardware.devices.gpu.capacity_gb"));
  CHECK_THAT(e, Catch::Contains("capacity_GB"));
}

TEST_CASE("a zero or negative bandwidth or capacity is refused with its path") {
  std::string e = error_of([] { validate("configs/default.json", {"hardware.devices.dram.capacity_GB=0"}); });
  CHECK_THAT(e, Catch::Contains("hardware.devices.dram.capacity_GB"));
  CHECK_THAT(e, Catch::Contains("> 0"));
  json hw = load_json_file("configs/hardware/rtx4090_dram_nvme.json");
  std::string link = hw["links"].begin().key();
  e = error_of([&] { validate("configs/default.json", {"hardware.links." + link + ".bandwidth_GBps=-3"}); });
  CHECK_THAT(e, Catch::Contains("hardware.links." + link + ".bandwidth_GBps"));
}

TEST_CASE("a tier smaller than one block is refused") {
  std::string e = error_of([] { validate("configs/default.json", {"hardware.devices.dram.capacity_GB=0.000001"}); });
  CHECK_THAT(e, Catch::Contains("hardware.devices.dram"));
  CHECK_THAT(e, Catch::Contains("holds no KV block"));
}

TEST_CASE("an unknown policy name lists the known ones") {
  std::string e = error_of([] { validate("configs/default.json", {"policies.eviction.name=lrux"}); });
  CHECK_THAT(e, Catch::Contains("policies.eviction.name"));
  CHECK_THAT(e, Catch::Contains("unknown eviction policy 'lrux'"));
  CHECK_THAT(e, Catch::Contains("lru"));
  e = error_of([] { validate("configs/default.json", {"policies.evction.name=lru"}); });
  CHECK_THAT(e, Catch::Contains("did you mean 'eviction'"));
}

TEST_CASE("a missing trace file is named") {
  std::string e = error_of(
      [] { validate("configs/default.json", {R"(workload.trace={"kind":"file","path":"/nonexistent/t.jsonl"})"}); });
  CHECK_THAT(e, Catch::Contains("workload.trace.path"));
  CHECK_THAT(e, Catch::Contains("/nonexistent/t.jsonl"));
}

TEST_CASE("KV that does not fit in the tiers is refused before running") {
  std::string e = error_of([] {
    validate("configs/default.json", {"hardware.devices.ssd.capacity_GB=1", "hardware.devices.dram.capacity_GB=1"});
  });
  CHECK_THAT(e, Catch::Contains("the KV needs"));
}

TEST_CASE("overrides parse JSON values and keeps bare words as strings") {
  json cfg = json::object();
  apply_set(cfg, "a.b=3");
  apply_set(cfg, "a.c=lru");
  apply_set(cfg, R"(a.d={"x": [1]})");
  CHECK(cfg["a"]["b"] == 3);
  CHECK(cfg["a"]["c"] == "lru");
  CHECK(cfg["a"]["d"]["x"][0] == 1);
  CHECK_THROWS_AS(apply_set(cfg, "novalue"), ConfigError);
}

TEST_CASE("a whole preset swapped with --set: a section by file name or {\"preset\": ...}, a policy by name or file") {
  json a = load_config("configs/default.json", {"hardware=configs/hardware/a100_80gb_dram_nvme.json"});
  json b = load_config("configs/default.json", {});
  CHECK(a["hardware"] != b["hardware"]);
  CHECK(a["hardware"] == load_config("configs/default.json", {"hardware={\"preset\": \"configs/hardware/a100_80gb_dram_nvme.json\"}"})["hardware"]);
  // Overrides after the swap apply to the new preset.
  json c = load_config("configs/default.json", {"hardware=configs/hardware/a100_80gb_dram_nvme.json",
                                                "hardware.tiers=[\"gpu\", \"dram\"]"});
  CHECK(c["hardware"]["tiers"] == json::array({"gpu", "dram"}));
  const std::string pol = write_tmp("h2o_policy.json", R"({"name": "h2o"})");
  CHECK(load_config("configs/default.json", {"policies.eviction=" + pol})["policies"]["eviction"]["name"] == "h2o");
  CHECK(load_config("configs/default.json", {"policies.eviction=lfu"})["policies"]["eviction"] == json{{"name", "lfu"}});
}

TEST_CASE("a policy given by name is normalised before --set, so its parameters can be set") {
  const std::string cfg = write_tmp("short_policy.json", R"({"hardware": "configs/hardware/rtx4090_dram_nvme.json",
    "model": "configs/models/opt-6.7b.json", "workload": {"context_tokens": 1024}, "policies": {"prefetch": "layer_ahead"}})");
  json j = load_config(cfg, {"policies.prefetch.depth=2"});
  CHECK(j["policies"]["prefetch"] == json{{"name", "layer_ahead"}, {"depth", 2}});
  Simulation sim(j);  // and it validates
  CHECK(j["policies"]["prefetch"]["depth"] == 2);
}

TEST_CASE("switching workload.trace.kind drops the old kind's keys") {
  json j = load_config("configs/default.json", {"workload.trace.kind=none"});
  CHECK(j["workload"]["trace"] == json{{"kind", "none"}});
  // The same kind keeps its parameters.
  json k = load_config("configs/default.json", {"workload.trace.kind=synthetic"});
  CHECK(k["workload"]["trace"].contains("heavy_fraction"));
}

TEST_CASE("a section preset under a top-level preset replaces the base's section") {
  const std::string cfg = write_tmp("preset_over_preset.json", R"({"preset": "configs/default.json",
    "hardware": {"preset": "configs/hardware/a100_80gb_dram_nvme.json"}})");
  json j = load_config(cfg, {});
  json a100 = load_config("configs/default.json", {"hardware=configs/hardware/a100_80gb_dram_nvme.json"});
  CHECK(j["hardware"] == a100["hardware"]);
  const std::string by_name = write_tmp("preset_over_preset2.json", R"({"preset": "configs/default.json",
    "hardware": "configs/hardware/a100_80gb_dram_nvme.json"})");
  CHECK(load_config(by_name, {})["hardware"] == a100["hardware"]);
}

TEST_CASE("null deletes a key, under a preset and with --set") {
  const std::string cfg = write_tmp("null_under_preset.json", R"({"preset": "configs/default.json",
    "workload": {"trace": {"heavy_fraction": null}}})");
  json j = load_config(cfg, {});
  CHECK_FALSE(j["workload"]["trace"].contains("heavy_fraction"));
  json k = load_config("configs/default.json", {"workload.trace.heavy_fraction=null"});
  CHECK_FALSE(k["workload"]["trace"].contains("heavy_fraction"));
  Simulation sim(k);  // the default comes back
  CHECK(k["workload"]["trace"].contains("heavy_fraction"));
}

TEST_CASE("the config on the command line is found like a preset (from any folder)") {
  const fs::path here = fs::current_path();
  fs::current_path(fs::temp_directory_path());
  std::string err = error_of([] { load_config("configs/default.json", {}); });
  fs::current_path(here);
  CHECK(err.empty());
  CHECK(error_of([] { load_config("configs/nope.json", {}); }).find("configs/nope.json") != std::string::npos);
}

TEST_CASE("error messages print numbers plainly") {
  CHECK(plain_numbers("after 13.400000 GB of weights") == "after 13.4 GB of weights");
  CHECK(plain_numbers("x 2.000000 y") == "x 2 y");
  CHECK(plain_numbers("keeps 1.5, 3 and 0.1234567") == "keeps 1.5, 3 and 0.1234567");
}

TEST_CASE("a single-batch run past the model's trained context is refused unless the config says so") {
  const std::string p = write_tmp("past_context.json", R"({"hardware": "configs/hardware/rtx4090_dram_nvme.json",
    "model": "configs/models/opt-6.7b.json", "workload": {"context_tokens": 2000, "decode_steps": 64}})");
  const std::string e = error_of([&] { load_config(p, {}); });
  CHECK_THAT(e, Catch::Contains("2064 tokens"));
  CHECK_THAT(e, Catch::Contains("opt-6.7b"));
  CHECK_THAT(e, Catch::Contains("model.max_context_tokens"));
  CHECK_THAT(e, Catch::Contains("workload.past_trained_context"));
  CHECK(load_config(p, {"workload.decode_steps=48"})["workload"]["context_tokens"] == 2000);  // 2048 exactly fits
  CHECK(load_config(p, {"workload.past_trained_context=true"})["workload"]["past_trained_context"] == true);
}

TEST_CASE("messages stay on one line: control characters are written escaped") {
  CHECK(one_line("c.json: work\nload\x1b[2J: unknown") == "c.json: work\\nload\\x1b[2J: unknown");
  CHECK(one_line("a\tb\rc\x7f") == "a\\tb\\rc\\x7f");
  CHECK(one_line("plain text, 13.4 GB") == "plain text, 13.4 GB");
  CHECK(one_line("caf\xc3\xa9") == "caf\xc3\xa9");  // UTF-8 passes as it is
}

TEST_CASE("a directory given as the config is named as one") {
  const std::string dir = "configs/systems";
  try {
    load_config(dir, {});
    FAIL("a directory loaded as a config");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) == "configs/systems: is a directory; expected a config file (a JSON object, e.g. configs/default.json)");
  }
}
