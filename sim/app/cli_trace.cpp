#include "sim/app/cli_trace.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "sim/app/cli_replay.h"
#include "sim/core/config.h"
#include "sim/core/footprint.h"
#include "sim/core/progress.h"
#include "sim/core/result.h"
#include "traces/attention_binary.h"
#include "traces/attention_fit.h"
#include "traces/attention_source.h"
#include "traces/attention_stats.h"
#include "traces/request_trace.h"
#include "traces/synthetic_patterns.h"

namespace kvtier {

struct TraceCommands {
  CLI::App *convert = nullptr, *stats = nullptr, *fit = nullptr, *synth = nullptr, *check = nullptr;
  std::string in, out, to, mass = "f32";
  int level = 6;
  std::vector<std::string> files;
  std::string json_out;
  uint32_t sink_blocks = 1, window_blocks = 1;
  double coverage = 0.9;
  double heavy_ratio = 2.0;
  // synth
  std::string params, max_memory;
  uint32_t layers = 0, context_tokens = 0, steps = 0, block_tokens = 0, sequences = 1;
  std::string seed_text = "1";
  uint64_t seed = 1;
};

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A writer of `path`, writing under the name `staged` gives it (its file
// removed on an error or a signal until staged.commit()).
std::unique_ptr<AttentionWriter> make_writer(const std::string& path, const std::string& to, const std::string& mass,
                                             int level, const AttentionHeader& h, uint32_t groups,
                                             StagedOutputs& staged) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ConfigError("--out " + path + ": is a folder, expected a file name");
  const std::string kind = to.empty() ? (ends_with(path, ".jsonl") ? "jsonl" : "binary") : to;
  if (kind == "jsonl") {
    if (mass != "f32") throw ConfigError("--mass " + mass + ": JSON lines keep masses as float32; use --to binary");
    return std::make_unique<JsonlTraceWriter>(staged.stage(path, "--out"), h, groups);
  }
  return std::make_unique<BinaryTraceWriter>(staged.stage(path, "--out"), h, groups, mass_encoding_from(mass, "--mass"),
                                             level);
}

// Copies every record of `src` to `w`; returns the number of decode records.
uint64_t copy_all(AttentionSource& src, AttentionWriter& w) {
  const auto& h = src.header();
  auto* file = dynamic_cast<AttentionFileSource*>(&src);
  for (uint32_t l = 0; l < h.layers && h.has_prompt; ++l)
    for (uint32_t s = 0; s < std::max<uint32_t>(1, h.sequences); ++s)
      if (const auto* p = src.prompt(s, l)) w.prompt(l, s, *p);
  AttentionRecord rec;
  uint64_t n = 0;
  Progress progress("trace", double(h.steps) * h.layers * std::max<uint32_t>(1, h.sequences), "records");
  while (src.next(rec)) {
    const auto* g = file && file->head_groups() > 1 ? &file->group_mass() : nullptr;
    w.write(rec, g);
    progress.update(double(++n));
  }
  w.close();
  return n;
}

StatsOptions stats_options(const TraceCommands& c) {
  StatsOptions o;
  o.sink_blocks = c.sink_blocks;
  o.window_blocks = c.window_blocks;
  o.coverage = c.coverage;
  return o;
}

std::unique_ptr<AttentionSource> open_for_stats(const std::string& path) {
  try {
    return open_attention_file(path);
  } catch (const ConfigError& e) {
    // A file that is no attention trace at all: say what this command reads.
    const std::string what = e.what();
    if (what.find("kvtier-attention-trace") != std::string::npos && what.find(":1:") != std::string::npos)
      throw ConfigError(path + ": not an attention trace (expected a kvtier-attention-trace header or the binary "
                               "container; `kvtier trace stats` reads attention traces)");
    throw;
  }
}

int cmd_convert(const TraceCommands& c) {
  if (c.in == c.out) throw ConfigError(c.out + ": the output must not be the input");
  auto src = open_attention_file(c.in);
  StagedOutputs staged;
  auto w = make_writer(c.out, c.to, c.mass, c.level, src->header(), src->head_groups(), staged);
  const uint64_t n = copy_all(*src, *w);
  staged.commit();
  std::cout << "kvtier: wrote " << n << " records to " << c.out << "\n";
  return 0;
}

int cmd_stats(const TraceCommands& c) {
  // Request traces (Mooncake, Azure) have their own figures.
  if (c.files.size() == 1 && is_request_trace(c.files[0])) return request_trace_stats(c.files[0], c.json_out);
  std::vector<std::pair<std::string, json>> cols;
  json all = json::object();
  for (const auto& f : c.files) {
    auto src = open_for_stats(f);
    json s = attention_stats(*src, stats_options(c));
    all[f] = s;
    cols.emplace_back(std::filesystem::path(f).filename().string(), s);
  }
  if (!c.json_out.empty()) write_file_atomic(c.json_out, (c.files.size() == 1 ? all[c.files[0]] : all).dump(2) + "\n");
  std::cout << stats_table(cols);
  return 0;
}

int cmd_fit(const TraceCommands& c) {
  AttentionFitOptions o;
  o.sink_blocks = c.sink_blocks;
  o.window_blocks = c.window_blocks;
  o.heavy_ratio = c.heavy_ratio;
  o.coverage = c.coverage;
  // The captured trace's statistics first: the fit reproduces their spans and reuse.
  json cs;
  {
    auto captured = open_attention_file(c.in);
    cs = attention_stats(*captured, stats_options(c));
  }
  o.match_stats = &cs;
  // Then how the mass falls with distance before the window: the recency pattern.
  RecencyProfile rp;
  {
    auto captured = open_attention_file(c.in);
    rp = recency_profile(*captured, c.sink_blocks, c.window_blocks);
  }
  o.recency = &rp;
  json p;
  AttentionHeader h;
  {
    auto src = open_attention_file(c.in);
    h = src->header();
    p = fit_patterns(*src, o, std::filesystem::path(c.in).filename().string());
  }
  // The fitted generator at the captured trace's shape, its statistics beside the captured ones.
  json gp = p;
  PatternAttention gen(gp, c.in, h.layers, h.context_tokens, h.steps, h.block_tokens, h.sequences, c.seed);
  json gs = attention_stats(gen, stats_options(c));
  write_file_atomic(c.out, p.dump(2) + "\n");
  std::cout << stats_table({{"captured", cs}, {"fitted", gs}});
  std::cout << "kvtier: wrote " << c.out << "\n";
  return 0;
}

int cmd_synth(const TraceCommands& c) {
  if (static_cast<uint64_t>(c.layers) * c.sequences > kMaxTraceLayerSequences)
    throw ConfigError("--layers x --sequences: " + std::to_string(static_cast<uint64_t>(c.layers) * c.sequences) +
                      ", more than " + std::to_string(kMaxTraceLayerSequences));
  json p = load_json_file(c.params);
  if (p.is_object() && p.contains("kind") && p["kind"] != "patterns")
    throw ConfigError(c.params + ": \"kind\" must be \"patterns\" (the generator `kvtier trace fit` fits)");
  if (!c.max_memory.empty()) set_memory_limit(parse_memory_size(c.max_memory, "--max-memory"));
  commit_footprint({"the generator's state (" + std::to_string(static_cast<uint64_t>(c.layers) * c.sequences) +
                        " layer x sequence lanes of heavy spans)",
                    "--layers, --sequences, --context-tokens, --block-tokens",
                    PatternAttention::state_bytes(p, c.params, c.layers, c.context_tokens, c.steps, c.block_tokens,
                                                  c.sequences)});
  PatternAttention gen(p, c.params, c.layers, c.context_tokens, c.steps, c.block_tokens, c.sequences, c.seed);
  AttentionHeader h = gen.header();
  h.origin["params_file"] = c.params;
  // header() is const; the writer takes the copy with the file's name in it.
  StagedOutputs staged;
  auto w = make_writer(c.out, c.to, c.mass, c.level, h, 1, staged);
  const uint64_t n = copy_all(gen, *w);
  staged.commit();
  std::cout << "kvtier: wrote " << n << " records to " << c.out << "\n";
  return 0;
}

int cmd_check(const TraceCommands& c) {
  auto src = open_attention_file(c.in);
  AttentionRecord rec;
  uint64_t n = 0, entries = 0;
  double mass = 0;
  while (src->next(rec)) {
    ++n;
    entries += rec.blocks.size();
    for (float m : rec.mass) mass += m;
  }
  const auto& h = src->header();
  std::cout << c.in << ": version " << h.version << ", " << h.layers << " layers, " << h.steps << " steps, "
            << h.sequences << " sequences, " << src->head_groups() << " head groups, prompt "
            << (h.has_prompt ? "yes" : "no") << "; " << n << " records, " << entries << " block entries, mass "
            << mass << "\n";
  return 0;
}

}  // namespace

std::shared_ptr<TraceCommands> add_trace_commands(CLI::App& trace) {
  auto c = std::make_shared<TraceCommands>();
  auto stats_opts = [&](CLI::App* a) {
    a->add_option("--sink-blocks", c->sink_blocks, "blocks counted as attention sinks")->capture_default_str();
    a->add_option("--window-blocks", c->window_blocks, "newest blocks counted as the local window")
        ->capture_default_str();
    a->add_option("--coverage", c->coverage, "share of a record's mass its heavy set holds")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
  };
  auto out_opts = [&](CLI::App* a) {
    a->add_option("--to", c->to, "jsonl | binary (default: jsonl for a .jsonl output, else binary)")
        ->check(CLI::IsMember({"jsonl", "binary"}));
    a->add_option("--mass", c->mass, "binary mass encoding: f32 (exact) | f16 (half the bytes)")
        ->check(CLI::IsMember({"f32", "f16"}))
        ->capture_default_str();
    a->add_option("--level", c->level, "zstd level of the binary container")->check(CLI::Range(1, 19))
        ->capture_default_str();
  };
  c->convert = trace.add_subcommand("convert", "convert an attention trace between JSON lines and the binary container");
  c->convert->add_option("input", c->in, "trace file (any format)")->required();
  c->convert->add_option("-o,--out", c->out, "output file")->required();
  out_opts(c->convert);

  c->stats = trace.add_subcommand("stats", "statistics of attention traces, side by side (docs/traces.md)");
  c->stats->add_option("files", c->files, "trace files (any format)")->required();
  c->stats->add_option("--json", c->json_out, "also write the figures as JSON to this file");
  stats_opts(c->stats);

  c->fit = trace.add_subcommand("fit", "fit the patterns generator to a trace; prints captured vs fitted statistics");
  c->fit->add_option("input", c->in, "trace file (any format)")->required();
  c->fit->add_option("-o,--out", c->out, "parameters JSON to write")->required();
  c->fit->add_option("--heavy-ratio", c->heavy_ratio, "heavy hitters: at least this many times the median block's mass")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->fit->add_option("--seed", c->seed_text, "seed of the fitted trace the statistics compare with (0 to 2^64-1)")
      ->capture_default_str();
  stats_opts(c->fit);

  c->synth = trace.add_subcommand("synth", "write a trace of the patterns generator (params as `trace fit` writes)");
  c->synth->add_option("params", c->params, "patterns parameters JSON")->required();
  c->synth->add_option("--layers", c->layers, "layers")->required()->check(CLI::Range(1u, unsigned(kMaxTraceLayers)));
  c->synth->add_option("--context-tokens", c->context_tokens, "prompt tokens")
      ->required()
      ->check(CLI::Range(1u, unsigned(kMaxTraceContextTokens)));
  c->synth->add_option("--steps", c->steps, "decode steps")->required()->check(CLI::Range(1u, unsigned(kMaxTraceSteps)));
  c->synth->add_option("--block-tokens", c->block_tokens, "tokens per block")
      ->required()
      ->check(CLI::Range(1u, unsigned(kMaxTraceBlockTokens)));
  c->synth->add_option("--sequences", c->sequences, "independent sequences")->check(CLI::Range(1u, 65536u))
      ->capture_default_str();
  c->synth->add_option("--seed", c->seed_text, "seed (0 to 2^64-1)")->capture_default_str();
  c->synth->add_option("-o,--out", c->out, "output file")->required();
  c->synth->add_option("--max-memory", c->max_memory,
                       "refuse a generator estimated to need more memory than this (512M, 4G; default: the machine's "
                       "available memory less a tenth)");
  out_opts(c->synth);

  c->check = trace.add_subcommand("check", "read every record of a trace, checking it, and print its shape");
  c->check->add_option("input", c->in, "trace file (any format)")->required();
  return c;
}

bool run_trace_commands(TraceCommands& c, int& rc) {
  Progress::enable(isatty(STDERR_FILENO));  // a long conversion or generation shows where it is on a terminal
  c.seed = parse_seed(c.seed_text, "--seed");
  if (c.convert && *c.convert) rc = cmd_convert(c);
  else if (c.stats && *c.stats) rc = cmd_stats(c);
  else if (c.fit && *c.fit) rc = cmd_fit(c);
  else if (c.synth && *c.synth) rc = cmd_synth(c);
  else if (c.check && *c.check) rc = cmd_check(c);
  else return false;
  return true;
}

}  // namespace kvtier
