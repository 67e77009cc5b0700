// kvtier_host_pipeline: runs the real tiered decode pipeline of
// tiered_pipeline.h on this machine (KV in a file read with O_DIRECT through
// io_uring, an LRU DRAM cache, attention on the CPU) over an attention trace
// and writes the per-step wall times as JSON, for `kvtier validate` to
// compare with what kvtier predicts for the same shapes.
//
// Exit codes: 0 measured, 1 the pipeline failed (e.g. no O_DIRECT in --dir;
// nothing written), 2 bad options or trace.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cuda_validate/host_probes.h"
#include "cuda_validate/tiered_pipeline.h"
#include "models/calibration_fit.h"

using namespace kvtier;
using namespace kvtier::host;

int main(int argc, char** argv) {
  CLI::App app{"kvtier_host_pipeline: a real tiered decode pipeline (KV blocks in a file, O_DIRECT reads through "
               "io_uring into an LRU DRAM cache, attention on the CPU) over an attention trace; writes per-step times"};
  PipelineConfig c;
  std::string out;
  int reps = 1;
  app.add_option("--trace", c.trace, "attention trace, JSON lines (kvtier trace gen)")->required();
  app.add_option("--out", out, "result JSON to write (atomically)")->required();
  app.add_option("--layers", c.layers, "layers")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--kv-heads", c.shape.kv_heads, "KV heads (= query heads)")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--head-dim", c.shape.head_dim, "head dimension")->capture_default_str()->check(CLI::Range(8, 1024));
  app.add_option("--block-tokens", c.shape.block_tokens, "tokens per KV block")->capture_default_str()->check(CLI::Range(1, 65536));
  app.add_option("--context", c.context_tokens, "prompt tokens")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  app.add_option("--steps", c.decode_steps, "decode steps")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--cache-blocks", c.cache_blocks, "DRAM cache capacity, blocks")->capture_default_str()->check(CLI::Range(2, 1 << 24));
  app.add_option("--prefetch-depth", c.prefetch_depth, "layers read ahead of the one computing (0 = on demand)")
      ->capture_default_str()->check(CLI::Range(0, 64));
  app.add_option("--dir", c.dir, "directory for the KV file (default: a new temporary directory)");
  app.add_option("--reps", reps, "runs (each from a fresh file and cache); per-step times are kept for every run")
      ->capture_default_str()->check(CLI::Range(1, 100));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  c.shape.heads = c.shape.kv_heads;
  json res = json::object();
  res["format"] = "kvtier-pipeline-measurement";
  res["version"] = 1;
  res["tool"] = std::string("kvtier_host_pipeline ") + KVTIER_VERSION;
  res["machine"] = machine_info();
  res["config"] = {{"layers", c.layers}, {"heads", c.shape.heads}, {"kv_heads", c.shape.kv_heads},
                   {"head_dim", c.shape.head_dim}, {"block_tokens", c.shape.block_tokens},
                   {"block_bytes", c.shape.block_bytes()}, {"context_tokens", c.context_tokens},
                   {"decode_steps", c.decode_steps}, {"cache_blocks", c.cache_blocks},
                   {"prefetch_depth", c.prefetch_depth}, {"trace", c.trace}, {"attention_isa", attention_isa()},
                   {"attention_threads", 1}};
  res["runs"] = json::array();
  try {
    for (int r = 0; r < reps; ++r) {
      const PipelineResult p = run_pipeline(c);
      res["storage"] = p.storage;
      res["runs"].push_back({{"step_s", p.step_s}, {"total_s", p.total_s}, {"compute_s", p.compute_s}, {"compute_cpu_s", p.compute_cpu_s}, {"others_cpu_share", p.others_cpu_share},
                             {"wait_s", p.wait_s}, {"accesses", p.accesses}, {"hits", p.hits}, {"reads", p.reads},
                             {"writes", p.writes}, {"bytes_read", p.bytes_read}, {"bytes_written", p.bytes_written}});
      std::cerr << "kvtier_host_pipeline: run " << r << ": " << p.total_s * 1e3 << " ms for " << p.step_s.size()
                << " steps (attention " << p.compute_s * 1e3 << " ms, waiting for reads " << p.wait_s * 1e3
                << " ms), hit rate " << (p.accesses ? double(p.hits) / double(p.accesses) : 0.0) << ", "
                << p.bytes_read / 1e6 << " MB read, " << p.bytes_written / 1e6 << " MB written\n";
    }
    write_json_file(out, res);
  } catch (const ConfigError& e) {
    std::cerr << "kvtier_host_pipeline: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kvtier_host_pipeline: error: " << e.what() << "\n";
    return 1;
  }
  std::cout << "kvtier_host_pipeline: wrote " << out << "\n";
  return 0;
}
