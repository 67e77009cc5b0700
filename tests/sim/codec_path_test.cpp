// A CPU codec works in host memory: data from a compressed tier on a drive
// lands in a host buffer compressed, from a CXL tier it is read in place
// over the CXL link, compressed; the CPU restores it into a staging buffer
// and it crosses to the GPU uncompressed; stages overlap block by block;
// predicted blocks and the next request's load pay the same codec work. A
// GPU codec moves compressed bytes all the way and pays a kernel on the GPU.
// A higher ratio never moves more bytes; a codec's threads share the CPU's
// cores.
#include <catch2/catch.hpp>

#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// GPU, host DRAM, CPU and an NVMe drive behind one root complex, with no
// latencies, so a transfer takes bytes / bandwidth.
json host_and_drive() {
  return json{{"devices",
               {{"gpu", fast_gpu(1.0)},
                {"dram", {{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}},
                {"cpu", {{"kind", "cpu"}, {"cores", 4}}},
                {"ssd", {{"kind", "nvme"}, {"capacity_GB", 100}, {"read_GBps", 5}, {"write_GBps", 5}, {"latency_us", 0}}},
                {"rc", {{"kind", "switch"}}}}},
              {"links",
               {{"pcie", {{"ends", {"rc", "gpu"}}, {"bandwidth_GBps", 10}, {"latency_us", 0}}},
                {"dbus", {{"ends", {"rc", "dram"}}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}, {"duplex", "fatpipe"}}},
                {"cpu_port", {{"ends", {"rc", "cpu"}}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}, {"duplex", "fatpipe"}}},
                {"s", {{"ends", {"rc", "ssd"}}, {"bandwidth_GBps", 100}, {"latency_us", 0}}}}},
              {"tiers", {"ssd"}}};
}

// One layer, 100 blocks of prompt streamed from the drive for one decode step.
json stream_from_drive(const json& compression) {
  return json{{"hardware", host_and_drive()},
              {"model", tiny_model(1)},
              {"workload", {{"context_tokens", 12800}, {"decode_steps", 1}, {"prefill", "none"}, {"trace", {{"kind", "none"}}}}},
              {"policies", {{"evaluation", "exact"}, {"promotion", "none"}, {"compression", compression}}}};
}

double link_bytes(const json& m, const std::string& name) {
  REQUIRE(m.contains("links"));
  REQUIRE(m["links"].contains(name));
  return m["links"][name]["bytes"].get<double>();
}

}  // namespace

TEST_CASE("a CPU codec on a drive: the drive reads compressed bytes into host memory, PCIe carries them uncompressed") {
  json lz4 = simulate(stream_from_drive({{"name", "lz4"}, {"ratio", 2.0}, {"from_tier", 0}}));
  json plain = simulate(stream_from_drive("none"));
  REQUIRE(lz4.contains("links"));
  const double raw = 101 * kBlock;  // 12,800 prompt tokens + the new one: 101 blocks
  CHECK(link_bytes(plain, "s:ssd->rc") == raw);
  CHECK(link_bytes(lz4, "s:ssd->rc") == raw / 2);
  CHECK(link_bytes(lz4, "pcie:rc->gpu") == raw);
  CHECK(link_bytes(plain, "pcie:rc->gpu") == raw);
  // The detour through host memory (the plain run moves drive to GPU
  // directly, peer to peer): the drive writes the compressed bytes into
  // DRAM, the CPU reads them there and writes the restored ones back, the
  // GPU's copy reads those (dbus is a fatpipe: one count for both
  // directions). The step's new token (512 bytes) goes the other way: out
  // of the GPU uncompressed into DRAM, read by the CPU, written back
  // compressed, onto the drive at half.
  const double token = 512;
  CHECK(link_bytes(lz4, "s:rc->ssd") == token / 2);
  CHECK(link_bytes(lz4, "dbus") == raw / 2 + raw / 2 + raw + raw + token + token + token / 2 + token / 2);
  CHECK(link_bytes(lz4, "cpu_port") == raw / 2 + raw + token + token / 2);
  CHECK(link_bytes(plain, "dbus") == 0);
  CHECK(lz4["cpu_codec_s"].get<double>() == Approx(raw / (4.97e9 * 4) + token / (0.78e9 * 4)).epsilon(1e-12));
  CHECK(plain["cpu_codec_s"].get<double>() == 0);
}

TEST_CASE("the drive is written, and worn, by the compressed bytes of a CPU codec") {
  // Prefill computes the prompt on the GPU and writes it down to the drive.
  json cfg = stream_from_drive({{"name", "lz4"}, {"ratio", 2.0}, {"from_tier", 0}});
  cfg["workload"]["prefill"] = "compute";
  json lz4 = simulate(cfg);
  cfg["policies"]["compression"] = "none";
  json plain = simulate(cfg);
  REQUIRE(plain.contains("ssd_bytes_written"));
  REQUIRE(lz4.contains("ssd_bytes_written"));
  CHECK(plain["ssd_bytes_written"].get<double>() > 0);
  CHECK(lz4["ssd_bytes_written"].get<double>() == Approx(plain["ssd_bytes_written"].get<double>() / 2).epsilon(1e-12));
  CHECK(link_bytes(lz4, "s:rc->ssd") == Approx(link_bytes(plain, "s:rc->ssd") / 2).epsilon(1e-12));
}

TEST_CASE("read, decompress and copy overlap block by block: sum / K + (K - 1) / K x max of the stages, K blocks") {
  // Three equal stages: the drive reads 100 x 64 KiB / 2 at 5 GB/s x its
  // efficiency; the CPU decompresses 6.6 MB; the copy moves 6.6 MB at 10 GB/s.
  // Decompression at 10 GB/s (2.5 per core x 4) makes it equal to the copy.
  json m = simulate(stream_from_drive({{"name", "lz4"}, {"ratio", 2.0}, {"from_tier", 0}, {"decompress_GBps", 2.5}}));
  json plain = simulate(stream_from_drive("none"));
  REQUIRE(m.contains("mean_step_latency_s"));
  const double raw = 101 * kBlock;
  const double copy = raw / 10e9, codec = raw / 10e9;
  // The drive's read, as the plain run measured it (its own efficiency
  // curve applies), for half the bytes.
  const double plain_step = plain["mean_step_latency_s"].get<double>();
  const double read = 0.5 * plain_step;  // the plain step is the direct read at the drive's rate (slower than PCIe)
  REQUIRE(plain_step > copy);
  const double k = 101;
  const double stages[3] = {read, codec, copy};
  double sum = 0, mx = 0;
  for (double s : stages) {
    sum += s;
    mx = std::max(mx, s);
  }
  const double step = m["mean_step_latency_s"].get<double>();
  CHECK(step == Approx(sum / k + (k - 1) / k * mx).epsilon(0.02));
  // Well below store-and-forward, at least the bottleneck stage.
  CHECK(step < 0.6 * sum);
  CHECK(step >= mx);
}

TEST_CASE("a predicted block from a CPU-codec tier pays its decompression like a fetched one") {
  // GPU tier over a zstd DRAM tier; layer-ahead prefetch brings the next
  // step's blocks up. Every block that crosses into the GPU is decompressed.
  json hw = host_and_drive();
  hw["devices"]["gpu"] = fast_gpu(60 * kBlock / 1e9);
  hw["tiers"] = {"gpu", "dram"};
  json cfg{{"hardware", hw},
           {"model", tiny_model(2)},
           {"workload", {{"context_tokens", 12800}, {"decode_steps", 8}, {"prefill", "none"}, {"trace", {{"kind", "synthetic"}}}}},
           {"policies",
            {{"evaluation", {{"name", "topk"}, {"budget", 0.2}}},
             {"promotion", "on_access"},
             {"prefetch", {{"name", "markov"}}},
             {"compression", {{"name", "zstd"}, {"ratio", 2.0}, {"from_tier", 1}}}}}};
  json m = simulate(cfg);
  REQUIRE(m.contains("prefetch"));
  REQUIRE(m["prefetch"]["prefetched_blocks"].get<double>() > 0);
  // Bytes cross PCIe uncompressed: each one into the GPU was decompressed
  // once, each one written down compressed once.
  const double into_gpu = link_bytes(m, "pcie:rc->gpu"), out_of_gpu = link_bytes(m, "pcie:gpu->rc");
  REQUIRE(into_gpu > 0);
  CHECK(m["cpu_codec_s"].get<double>() == Approx(into_gpu / (1.55e9 * 4) + out_of_gpu / (0.51e9 * 4)).epsilon(1e-9));
}

namespace {

// GPU, host DRAM (the staging buffer), CPU and a CXL expander behind one
// root complex, no latencies; the CXL link is split duplex.
json host_and_cxl(int cores = 4) {
  json hw = host_and_drive();
  hw["devices"].erase("ssd");
  hw["links"].erase("s");
  hw["devices"]["cpu"]["cores"] = cores;
  hw["devices"]["cxl"] = {{"kind", "cxl"}, {"capacity_GB", 100}, {"read_GBps", 20}, {"dram_latency_us", 0}, {"added_latency_us", 0}};
  hw["links"]["cxl_link"] = {{"ends", {"rc", "cxl"}}, {"bandwidth_GBps", 30}, {"latency_us", 0}};
  hw["tiers"] = {"cxl"};
  return hw;
}

json stream_from(const json& hw, const json& compression, int steps = 1) {
  json cfg = stream_from_drive(compression);
  cfg["hardware"] = hw;
  cfg["workload"]["decode_steps"] = steps;
  return cfg;
}

}  // namespace

TEST_CASE("a CPU codec on a CXL tier: the CPU reads compressed bytes over the CXL link, PCIe carries them restored") {
  json m = simulate(stream_from(host_and_cxl(), {{"name", "zstd"}, {"ratio", 2.0}, {"from_tier", 0}}));
  json plain = simulate(stream_from(host_and_cxl(), "none"));
  REQUIRE(m.contains("links"));
  const double raw = 101 * kBlock, token = 512;
  // Read: CXL -> CPU compressed (the CXL media and link), CPU -> DRAM
  // restored, DRAM -> GPU restored. Write of the new token: GPU -> DRAM,
  // DRAM -> CPU, CPU -> CXL compressed.
  CHECK(link_bytes(m, "cxl_link:cxl->rc") == raw / 2);
  CHECK(link_bytes(m, "cxl_link:rc->cxl") == token / 2);
  CHECK(link_bytes(m, "cxl.media") == raw / 2 + token / 2);
  CHECK(link_bytes(m, "cpu_port") == raw / 2 + raw + token + token / 2);
  CHECK(link_bytes(m, "dbus") == raw + raw + token + token);
  CHECK(link_bytes(m, "pcie:rc->gpu") == raw);
  CHECK(link_bytes(m, "pcie:gpu->rc") == token);
  // Uncompressed, the GPU's copy engine reads the expander directly.
  CHECK(link_bytes(plain, "cxl_link:cxl->rc") == raw);
  CHECK(link_bytes(plain, "pcie:rc->gpu") == raw);
  CHECK(link_bytes(plain, "dbus") == 0);
  CHECK(link_bytes(plain, "cpu_port") == 0);
}

TEST_CASE("a GPU codec: compressed bytes cross PCIe from the drive, the GPU pays the decompression kernel") {
  json gpu = simulate(stream_from_drive({{"name", "lz4"}, {"ratio", 2.0}, {"from_tier", 0}, {"where", "gpu"}, {"decompress_GBps", 1.0}}));
  json plain = simulate(stream_from_drive("none"));
  REQUIRE(gpu.contains("links"));
  const double raw = 101 * kBlock, token = 512;
  CHECK(link_bytes(gpu, "s:ssd->rc") == raw / 2);
  CHECK(link_bytes(gpu, "pcie:rc->gpu") == raw / 2);
  CHECK(link_bytes(gpu, "s:rc->ssd") == token / 2);
  CHECK(link_bytes(gpu, "dbus") == 0);  // peer to peer: no host buffer
  CHECK(gpu["cpu_codec_s"].get<double>() == 0);
  // The step: the drive's read of half the bytes (half the plain step), then
  // the decompression kernel at 1 GB/s before attention.
  const double step = gpu["mean_step_latency_s"].get<double>();
  CHECK(step == Approx(0.5 * plain["mean_step_latency_s"].get<double>() + raw / 1e9).epsilon(0.02));
}

TEST_CASE("a higher compression ratio never moves more bytes on any link (CPU and GPU codecs, CXL and drive tiers)") {
  // The lower tier holds the whole KV at every ratio, so the ratio changes
  // what each block weighs, not where blocks live (with a full tier a higher
  // ratio keeps more blocks there, and its link may then carry more). Ratio
  // 1 stores plain and runs no codec, so it takes no detour through the CPU:
  // the ratios compared all compress.
  json drive = host_and_drive();
  drive["devices"]["gpu"] = fast_gpu(30 * kBlock / 1e9);
  drive["tiers"] = {"gpu", "ssd"};
  json cxl = host_and_cxl();
  cxl["devices"]["gpu"] = fast_gpu(30 * kBlock / 1e9);
  cxl["tiers"] = {"gpu", "cxl"};
  for (const json& hw : {drive, cxl})
    for (const char* where : {"cpu", "gpu"}) {
      json prev;
      for (double ratio : {1.1, 1.25, 2.5, 4.0}) {
        json cfg = stream_from(hw, {{"name", "zstd"}, {"ratio", ratio}, {"where", where}}, 4);
        cfg["model"] = tiny_model(2);
        cfg["workload"]["trace"] = {{"kind", "synthetic"}};
        cfg["policies"]["evaluation"] = {{"name", "topk"}, {"budget", 0.3}};
        cfg["policies"]["promotion"] = "on_access";
        json m = simulate(cfg);
        REQUIRE(m.contains("links"));
        if (!prev.is_null())
          for (const auto& [name, link] : m["links"].items()) {
            INFO(hw["tiers"].dump() << " " << where << " ratio " << ratio << " link " << name);
            CHECK(link["bytes"].get<double>() <= prev["links"][name]["bytes"].get<double>() * (1 + 1e-12));
          }
        prev = m;
      }
    }
}

TEST_CASE("a CPU codec's threads share the CPU's cores: fewer cores never run faster, threads beyond cores change nothing") {
  // Decompression at 0.1 GB/s per thread makes the codec the bottleneck.
  auto step = [](int cores, int threads) {
    json cfg = stream_from(host_and_cxl(cores), {{"name", "zstd"}, {"ratio", 2.0}, {"from_tier", 0}, {"threads", threads},
                                                 {"decompress_GBps", 0.1}, {"compress_GBps", 0.1}});
    json m = simulate(cfg);
    REQUIRE(m.contains("mean_step_latency_s"));
    return m["mean_step_latency_s"].get<double>();
  };
  const double c1 = step(1, 4), c2 = step(2, 4), c4 = step(4, 4), c8 = step(8, 4);
  CHECK(c1 >= c2);
  CHECK(c2 >= c4);
  CHECK(c4 == Approx(c8).epsilon(1e-9));  // 4 threads use 4 of the 8 cores
  // The codec bound: restoring 101 blocks at 0.1 GB/s on min(threads, cores).
  const double raw = 101 * kBlock;
  CHECK(c1 == Approx(raw / 0.1e9).epsilon(0.02));
  CHECK(c2 == Approx(raw / 0.2e9).epsilon(0.02));
  CHECK(step(4, 16) == Approx(c4).epsilon(1e-9));
  CHECK(step(4, 64) == Approx(c4).epsilon(1e-9));
}

TEST_CASE("a codec's threads share the CPU with its other work: work on fewer threads holds at most their cores") {
  // Four cores. The codec's job: 1 s on its 2 threads (2 core-seconds);
  // other CPU work (scoring, attention) on the whole CPU: 1 s alone (4
  // core-seconds). Together, max-min sharing gives each 2 cores until the
  // codec ends at 1 s; the other then has the 4 cores for its last 2
  // core-seconds: 1.5 s, the 6 core-seconds on 4 cores.
  json m = in_child([] {
    json hwc = host_and_drive();
    Hardware h = parse_hardware(hwc, "hardware");
    Topology topo(h);
    start_simgrid();
    Platform p(h, topo);
    JobBoard board;
    Timeline tl;
    const int cpu = static_cast<int>(h.device_index("cpu"));
    Stream codec("codec", p, board, tl), other("other", p, board, tl), alone("alone", p, board, tl);
    const JobId a = board.create(), b = board.create(), c = board.create();
    TransferJob ja{a, 0, 0, 0, {}, cpu, 1.0, "decompress"};
    ja.threads = 2;
    codec.submit(ja);
    other.submit(TransferJob{b, 0, 0, 0, {}, cpu, 1.0, "score"});
    // Then, alone: 8 threads on 4 cores take twice their seconds.
    TransferJob jc{c, 0, 0, 0, {a, b}, cpu, 1.0, "decompress"};
    jc.threads = 8;
    alone.submit(jc);
    std::vector<double> done(3, 0.0);
    for (Stream* s : {&codec, &other, &alone}) s->start();
    sg4::Actor::create("waiter", p.controller(), [&] {
      const JobId ids[3] = {a, b, c};
      for (int i = 0; i < 3; ++i) {
        board.wait(ids[i]);
        done[i] = sg4::Engine::get_clock();
      }
      for (Stream* s : {&codec, &other, &alone}) s->stop();
    });
    sg4::Engine::get_instance()->run();
    return json(done);
  });
  REQUIRE(m.is_array());
  CHECK(m[0].get<double>() == Approx(1.0).epsilon(1e-9));
  CHECK(m[1].get<double>() == Approx(1.5).epsilon(1e-9));
  CHECK(m[2].get<double>() == Approx(1.5 + 2.0).epsilon(1e-9));
}

namespace {

// The AIOS preset (Llama-3-8B, batch 32 x 32K over HBM, CXL and NVMe),
// shortened; its KV fits in the GPU and the CXL expander, so every block
// read into the GPU comes off the CXL link.
json aios(const json& compression_overrides) {
  json cfg = load_json_file("configs/systems/aios.json");
  cfg.erase("note");
  cfg["hardware"] = load_json_file("configs/hardware/h200_cxl_nvme.json");
  cfg["model"] = load_json_file("configs/models/llama-3-8b.json");
  cfg["workload"]["decode_steps"] = 4;
  cfg["policies"]["compression"].update(compression_overrides);
  return cfg;
}

}  // namespace

TEST_CASE("AIOS: its GPU codec moves compressed bytes over the CXL link and PCIe; on the CPU, PCIe carries them restored") {
  json gpu = simulate(aios(json::object()));
  json cpu = simulate(aios({{"where", "cpu"}}));
  json cpu_seed = simulate(aios({{"where", "cpu"}, {"ratio", 2.5}}));
  REQUIRE(gpu.contains("links"));
  REQUIRE(cpu.contains("links"));
  REQUIRE(cpu_seed.contains("links"));
  const double cxl_in = link_bytes(gpu, "cxl_link:cxl->root");
  REQUIRE(cxl_in > 0);
  CHECK(link_bytes(gpu, "pcie_gpu:root->gpu") == Approx(cxl_in).epsilon(1e-12));
  CHECK(link_bytes(gpu, "pcie_gpu:gpu->root") == Approx(link_bytes(gpu, "cxl_link:root->cxl")).epsilon(1e-12));
  CHECK(gpu["cpu_codec_s"].get<double>() == 0);
  // The CPU variant: the same blocks; the CXL link carries them at ratio
  // 1.25, PCIe restored; at the seed's 2.5 the CXL link carries half as
  // much and PCIe the same.
  const double pcie_in = link_bytes(cpu, "pcie_gpu:root->gpu");
  CHECK(link_bytes(cpu, "cxl_link:cxl->root") == Approx(pcie_in / 1.25).epsilon(1e-9));
  CHECK(link_bytes(cpu_seed, "cxl_link:cxl->root") == Approx(pcie_in / 2.5).epsilon(1e-9));
  CHECK(link_bytes(cpu_seed, "pcie_gpu:root->gpu") == Approx(pcie_in).epsilon(1e-9));
}
