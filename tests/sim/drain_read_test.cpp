// Attention reads a block that is still being written down (a drain): its
// data is read where it still is, the tier it is leaving, without waiting
// for the write. The block is leaving the GPU's own tier (nothing moves), or
// DRAM for a slow SSD (it is read from DRAM); and where its data was still
// arriving in DRAM when its write began, it is read after the write, below.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>

#include "sim_fixture.h"
#include "traces/attention_trace.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// One layer, so a block is read again at the very next step; `uses[s]`: the
// blocks attention reads at step s.
std::string drain_trace(const char* name, uint32_t context_tokens, const std::vector<std::vector<uint32_t>>& uses) {
  AttentionHeader h;
  h.layers = 1;
  h.steps = static_cast<uint32_t>(uses.size());
  h.block_tokens = 128;
  h.context_tokens = context_tokens;
  // One file per process: ctest runs these cases in parallel.
  const std::string path = (std::filesystem::temp_directory_path() /
                            (std::string("kvtier_") + name + "." + std::to_string(getpid()) + ".jsonl"))
                               .string();
  JsonlAttentionWriter w(path, h);
  for (uint32_t s = 0; s < uses.size(); ++s) {
    AttentionRecord r;
    r.step = s;
    r.layer = 0;
    r.blocks = uses[s];
    r.mass.assign(uses[s].size(), 1.f / float(uses[s].size()));
    w.write(r);
  }
  w.close();
  return path;
}

// A write of one 64 KiB block takes this long on the slow link or drive.
constexpr double kWriteS = 1.0;
constexpr double kSlowGBps = kBlock / kWriteS / 1e9;

double tier_hits(const json& m, const char* tier) {
  return m["tiers"][tier]["hit_rate"].get<double>() * m["block_accesses"].get<double>();
}

// Hardware pieces: every latency is zero, so any time measured is a transfer.
json dram(double capacity_GB) {
  return json{{"kind", "dram"}, {"capacity_GB", capacity_GB}, {"bandwidth_GBps", 1e3}, {"latency_us", 0}};
}
json link_between(const char* a, const char* b, double GBps) {
  return json{{"ends", {a, b}}, {"bandwidth_GBps", GBps}, {"latency_us", 0}};
}

// GPU, DRAM and SSD, each behind a root complex; `pcie` is the GPU's link.
json gpu_dram_ssd(double gpu_GB, double dram_GB, double ssd_write_GBps, const json& pcie) {
  return json{{"devices",
               {{"gpu", fast_gpu(gpu_GB)},
                {"dram", dram(dram_GB)},
                {"ssd", {{"kind", "nvme"}, {"capacity_GB", 100}, {"read_GBps", 7}, {"write_GBps", ssd_write_GBps}, {"latency_us", 0}}},
                {"rc", {{"kind", "switch"}}}}},
              {"links", {{"pcie", pcie}, {"dbus", link_between("rc", "dram", 1e3)}, {"s", link_between("rc", "ssd", 7)}}},
              {"tiers", {"gpu", "dram", "ssd"}}};
}

// The one-layer model decoding two tokens after a `context_tokens` prompt
// that is already in place (no prefill), attention reading what `trace`
// says; no promotion and no prefetch, so every move is the eviction's.
json drain_config(const json& hw, uint32_t context_tokens, const std::string& trace, const json& eviction,
                  const json& placement) {
  return json{{"hardware", hw},
              {"model", tiny_model(1)},
              {"workload",
               {{"context_tokens", context_tokens},
                {"decode_steps", 2},
                {"prefill", "none"},
                {"trace", {{"kind", "file"}, {"path", trace}}}}},
              {"policies",
               {{"eviction", eviction}, {"promotion", "none"}, {"placement", placement}, {"prefetch", "none"}}}};
}

}  // namespace

TEST_CASE("a block read while it drains out of the GPU is read there: no bytes move, nothing waits for the write") {
  // Four blocks (500-token prompt; both decode tokens go into block 3), all
  // on a GPU that holds four. Step 0 reads blocks 2 and 3; after it the GPU
  // is above its watermark and blocks 0 and 1 are written to DRAM, each over
  // a PCIe link that takes kWriteS per block. Step 1 reads all four at once.
  const std::string trace = drain_trace("drain_gpu", 500, {{2, 3}, {0, 1, 2, 3}});
  const json hw{{"devices", {{"gpu", fast_gpu(4.5 * kBlock / 1e9)}, {"dram", dram(1)}}},
                {"links", {{"pcie", link_between("dram", "gpu", kSlowGBps)}}},
                {"tiers", {"gpu", "dram"}}};
  // LRU demoting the GPU in the background above half its capacity (of the
  // two tiers, the watermark applies to the GPU's only). A write out of the
  // GPU made on demand hands its room on at once (make_room claims the drain
  // it just made), so only a background demotion leaves the GPU a drain that
  // attention can read.
  json m = simulate(drain_config(hw, 500, trace, {{"name", "lru"}, {"watermark", 0.5}}, "top"));
  std::filesystem::remove(trace);
  INFO(m.dump());
  REQUIRE(m.contains("decode_time_s"));  // the run finished: nothing deadlocked
  // The two writes out of the GPU happened, and were still under way at step 1.
  CHECK(m["blocks_written_back"].get<double>() == 2);
  CHECK(m["links"]["pcie:gpu->dram"]["bytes"].get<double>() == 2 * kBlock);
  CHECK(m["simulated_time_s"].get<double>() >= 2 * kWriteS);
  // Every read was a hit on the GPU: the drained blocks were read where their
  // data still is, and nothing came back up.
  CHECK(m["block_accesses"].get<double>() == 6);
  CHECK(tier_hits(m, "gpu") == 6);
  CHECK(tier_hits(m, "dram") == 0);
  CHECK(m["fetched_bytes"].get<double>() == 0);
  CHECK(m["links"]["pcie:dram->gpu"]["bytes"].get<double>() == 0);
  // Neither step waited for the writes.
  CHECK(m["decode_time_s"].get<double>() < 0.01 * kWriteS);
}

TEST_CASE("a block read while it drains from DRAM to a slow SSD is read from DRAM, without waiting for the write") {
  // Six blocks (700-token prompt; both decode tokens go into block 5). The
  // GPU holds two (4 and 5), DRAM four (0 to 3); HKM keeps DRAM at half its
  // capacity in the background. Step 0 reads blocks 4 and 5 only; after it
  // two of DRAM's blocks are written to an SSD that writes a block per
  // kWriteS. Step 1 reads all six: the two being written are read from DRAM,
  // as are the two DRAM keeps.
  const std::string trace = drain_trace("drain_dram", 700, {{4, 5}, {0, 1, 2, 3, 4, 5}});
  const json hw = gpu_dram_ssd(2.5 * kBlock / 1e9, 4.5 * kBlock / 1e9, kSlowGBps, link_between("rc", "gpu", 10));
  json m = simulate(drain_config(hw, 700, trace, {{"name", "hkm"}, {"watermark", 0.5}}, "top"));
  std::filesystem::remove(trace);
  INFO(m.dump());
  REQUIRE(m.contains("decode_time_s"));  // the run finished: nothing deadlocked
  // Two blocks were written to the SSD, and the writes outlasted the steps.
  CHECK(m["ssd_bytes_written"].get<double>() == 2 * kBlock);
  CHECK(m["simulated_time_s"].get<double>() >= 2 * kWriteS);
  // Step 1 read four blocks from DRAM into the GPU (two of them still being
  // written down) and none from the SSD.
  CHECK(m["block_accesses"].get<double>() == 8);
  CHECK(tier_hits(m, "gpu") == 4);
  CHECK(tier_hits(m, "dram") == 4);
  CHECK(tier_hits(m, "ssd") == 0);
  CHECK(m["fetched_bytes"].get<double>() == 4 * kBlock);
  CHECK(m["links"]["pcie:rc->gpu"]["bytes"].get<double>() == 4 * kBlock);
  CHECK(m["links"]["s:ssd->rc"]["bytes"].get<double>() == 0);
  // The reads took microseconds; the writes a second each.
  CHECK(m["decode_time_s"].get<double>() < 0.01 * kWriteS);
}

TEST_CASE("a block written down while its new token is still being written into it is not read before the token lands") {
  // FlexGen's placement keeps the whole sequence in DRAM: four blocks
  // (500-token prompt; the decode tokens go into block 3). A write out of the
  // GPU takes kWriteS per block, so kTokenS for a token's KV. Step 0 reads
  // blocks 0 and 1, and its token is then written into block 3. After the
  // step HKM brings DRAM (room for eight: the placement checks the block
  // table's two sequences fit) down to two blocks: it writes blocks 2 and 3,
  // which step 0 did not read, to the SSD, block 3's behind its token's
  // write. Step 1 reads both: block 2 from DRAM at once; block 3 is complete
  // in DRAM only once the token has landed, so it is read after its write,
  // from the SSD.
  constexpr double kTokenS = 512.0 / kBlock * kWriteS;
  const std::string trace = drain_trace("drain_token", 500, {{0, 1}, {2, 3}});
  json pcie = link_between("rc", "gpu", 10);
  pcie["bandwidth_back_GBps"] = kSlowGBps;
  const json hw = gpu_dram_ssd(1.5 * kBlock / 1e9, 8.5 * kBlock / 1e9, 6, pcie);
  json m = simulate(drain_config(hw, 500, trace, {{"name", "hkm"}, {"watermark", 0.25}},
                                 {{"name", "fractions"}, {"percent", {0, 100, 0}}}));
  std::filesystem::remove(trace);
  INFO(m.dump());
  REQUIRE(m.contains("decode_time_s"));  // the run finished: nothing deadlocked
  // Blocks 2 and 3 were written to the SSD, and step 1's token into block 3 there.
  CHECK(m["ssd_bytes_written"].get<double>() == 2 * kBlock + 512);
  CHECK(m["links"]["pcie:gpu->rc"]["bytes"].get<double>() == 2 * 512);
  // Step 0 waited for nothing; step 1 for the token's write into DRAM (and
  // block 3's write after it), not for anything of kWriteS.
  CHECK(m["first_step_latency_s"].get<double>() < 0.01 * kTokenS);
  const double step1 = m["decode_time_s"].get<double>() - m["first_step_latency_s"].get<double>();
  CHECK(step1 >= kTokenS);
  CHECK(step1 < 2 * kTokenS);
  // Block 2 was read from DRAM while it drained, block 3 from the SSD.
  CHECK(m["block_accesses"].get<double>() == 4);
  CHECK(tier_hits(m, "dram") == 3);
  CHECK(tier_hits(m, "ssd") == 1);
  CHECK(m["fetched_bytes"].get<double>() == 4 * kBlock);
  CHECK(m["links"]["s:ssd->rc"]["bytes"].get<double>() == kBlock);
}
