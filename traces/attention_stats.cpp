#include "traces/attention_stats.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <cstdio>
#include <numeric>

namespace kvtier {

namespace {

struct Acc {
  double n = 0, top1 = 0, top5 = 0, top20 = 0, sink = 0, window = 0, heavy = 0;
  double reuse = 0, reuse_n = 0, runs = 0, run_len = 0, run_len_n = 0, in_long = 0, in_long_n = 0;
  json to_json(bool decode) const {
    auto mean = [](double s, double c) { return c > 0 ? s / c : 0.0; };
    json j{{"records", n},
           {"top_1pct", mean(top1, n)},
           {"top_5pct", mean(top5, n)},
           {"top_20pct", mean(top20, n)},
           {"sink", mean(sink, n)},
           {"heavy_fraction", mean(heavy, n)},
           {"sparsity", 1.0 - mean(heavy, n)}};
    if (decode) {
      j["window"] = mean(window, n);
      j["reuse"] = mean(reuse, reuse_n);
      j["spans_per_record"] = mean(runs, n);
      j["mean_span_blocks"] = mean(run_len, run_len_n);
      j["heavy_in_spans"] = mean(in_long, in_long_n);
    }
    return j;
  }
};

// The figures of one record given as a dense mass vector over n blocks; its
// heavy set (sorted block ids) into `heavy`.
void measure(const std::vector<double>& m, uint32_t n, const StatsOptions& o, std::vector<uint32_t>& order,
             std::vector<uint32_t>& heavy, Acc& a, Acc& b) {
  double total = 0;
  for (uint32_t i = 0; i < n; ++i) total += m[i];
  if (total <= 0) total = 1;
  order.resize(n);
  std::iota(order.begin(), order.end(), 0u);
  // Ties broken by block index so the figures do not depend on the sort.
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return m[x] > m[y] || (m[x] == m[y] && x < y); });
  auto top = [&](double p) {
    const uint32_t k = std::max<uint32_t>(1, static_cast<uint32_t>(std::ceil(p * n - 1e-9)));
    double s = 0;
    for (uint32_t i = 0; i < k && i < n; ++i) s += m[order[i]];
    return s / total;
  };
  double sink = 0, window = 0;
  for (uint32_t i = 0; i < std::min(o.sink_blocks, n); ++i) sink += m[i];
  for (uint32_t i = n - std::min(o.window_blocks, n); i < n; ++i) window += m[i];
  heavy.clear();
  double c = 0;
  for (uint32_t i = 0; i < n && c < o.coverage * total * (1 - 1e-12); ++i) {
    c += m[order[i]];
    heavy.push_back(order[i]);
  }
  std::sort(heavy.begin(), heavy.end());
  double runs = 0, in_long = 0;
  for (size_t i = 0; i < heavy.size();) {
    size_t j = i + 1;
    while (j < heavy.size() && heavy[j] == heavy[j - 1] + 1) ++j;
    ++runs;
    if (j - i >= 2) in_long += j - i;
    i = j;
  }
  for (Acc* x : {&a, &b}) {
    x->n += 1;
    x->top1 += top(0.01);
    x->top5 += top(0.05);
    x->top20 += top(0.20);
    x->sink += sink / total;
    x->window += window / total;
    x->heavy += static_cast<double>(heavy.size()) / n;
    x->runs += runs;
    if (runs > 0) {
      x->run_len += heavy.size() / runs;
      x->run_len_n += 1;
    }
    if (!heavy.empty()) {
      x->in_long += in_long / heavy.size();
      x->in_long_n += 1;
    }
  }
}

}  // namespace

json attention_stats(AttentionSource& src, const StatsOptions& opt) {
  const AttentionHeader& h = src.header();
  const uint32_t S = std::max<uint32_t>(1, h.sequences), L = h.layers;
  std::vector<double> dense(h.blocks_at(h.steps), 0.0);
  std::vector<uint32_t> order, heavy;
  std::vector<std::vector<uint32_t>> prev(static_cast<size_t>(L) * S);
  std::vector<std::vector<char>> prev_mark(static_cast<size_t>(L) * S);
  Acc all, prompt_all;
  std::vector<Acc> per_layer(L), prompt_layer(L);
  bool has_prompt = false;
  const uint32_t ctx_blocks = (h.context_tokens + h.block_tokens - 1) / h.block_tokens;
  for (uint32_t l = 0; l < L; ++l)
    for (uint32_t s = 0; s < S; ++s)
      if (const auto* p = src.prompt(s, l)) {
        has_prompt = true;
        std::vector<double> m(p->begin(), p->end());
        StatsOptions po = opt;
        po.window_blocks = 0;
        measure(m, static_cast<uint32_t>(m.size()), po, order, heavy, prompt_all, prompt_layer[l]);
      }
  AttentionRecord rec;
  uint64_t records = 0;
  while (src.next(rec)) {
    ++records;
    const uint32_t n = h.blocks_at(rec.step);
    for (size_t i = 0; i < rec.blocks.size(); ++i) dense[rec.blocks[i]] += rec.mass[i];
    const size_t lane = static_cast<size_t>(rec.layer) * S + (rec.seq == kAllSequences ? 0 : rec.seq % S);
    measure(dense, n, opt, order, heavy, all, per_layer[rec.layer]);
    for (size_t i = 0; i < rec.blocks.size(); ++i) dense[rec.blocks[i]] = 0;
    auto& mark = prev_mark[lane];
    if (mark.empty()) mark.assign(h.blocks_at(h.steps), 0);
    if (rec.step > 0 && !heavy.empty()) {
      double kept = 0;
      for (uint32_t b : heavy) kept += mark[b];
      for (Acc* x : {&all, &per_layer[rec.layer]}) {
        x->reuse += kept / heavy.size();
        x->reuse_n += 1;
      }
    }
    for (uint32_t b : prev[lane]) mark[b] = 0;
    for (uint32_t b : heavy) mark[b] = 1;
    prev[lane] = heavy;
  }
  json j{{"trace",
          {{"layers", L},
           {"steps", h.steps},
           {"sequences", S},
           {"block_tokens", h.block_tokens},
           {"context_tokens", h.context_tokens},
           {"context_blocks", ctx_blocks},
           {"records", records}}},
         {"options", {{"sink_blocks", opt.sink_blocks}, {"window_blocks", opt.window_blocks}, {"coverage", opt.coverage}}},
         {"decode", all.to_json(true)}};
  json pl = json::array();
  for (const auto& a : per_layer) pl.push_back(a.to_json(true));
  j["decode_per_layer"] = pl;
  if (has_prompt) {
    j["prompt"] = prompt_all.to_json(false);
    json pp = json::array();
    for (const auto& a : prompt_layer) pp.push_back(a.to_json(false));
    j["prompt_per_layer"] = pp;
  }
  return j;
}

std::string stats_table(const std::vector<std::pair<std::string, json>>& cols) {
  std::string out;
  char buf[64];
  auto row = [&](const std::string& name, const std::function<std::string(const json&)>& cell) {
    std::snprintf(buf, sizeof buf, "%-28s", name.c_str());
    out += buf;
    for (const auto& c : cols) {
      std::snprintf(buf, sizeof buf, " %14s", cell(c.second).c_str());
      out += buf;
    }
    out += "\n";
  };
  std::snprintf(buf, sizeof buf, "%-28s", "");
  out += buf;
  for (const auto& c : cols) {
    std::snprintf(buf, sizeof buf, " %14s", c.first.substr(0, 14).c_str());
    out += buf;
  }
  out += "\n";
  auto num = [](const json& v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4f", v.is_number() ? v.get<double>() : 0.0);
    return std::string(b);
  };
  auto get = [](const json& j, const std::vector<std::string>& path) -> json {
    const json* p = &j;
    for (const auto& k : path) {
      if (p->is_object() && p->contains(k)) p = &(*p)[k];
      else if (p->is_array() && std::all_of(k.begin(), k.end(), ::isdigit) && std::stoul(k) < p->size())
        p = &(*p)[std::stoul(k)];
      else return json();
    }
    return *p;
  };
  const char* keys[] = {"top_1pct", "top_5pct", "top_20pct", "sink", "window", "heavy_fraction",
                        "reuse", "spans_per_record", "mean_span_blocks", "heavy_in_spans"};
  for (const char* k : keys) row(std::string("decode.") + k, [&](const json& j) { return num(get(j, {"decode", k})); });
  size_t layers = 0;
  for (const auto& c : cols) layers = std::max(layers, get(c.second, {"decode_per_layer"}).size());
  for (size_t l = 0; l < layers; ++l)
    for (const char* k : {"top_5pct", "sink", "window", "heavy_fraction", "reuse"})
      row("layer " + std::to_string(l) + "." + k,
          [&](const json& j) { return num(get(j, {"decode_per_layer", std::to_string(l), k})); });
  for (const char* k : {"top_5pct", "top_20pct", "sink", "heavy_fraction"})
    row(std::string("prompt.") + k, [&](const json& j) { return num(get(j, {"prompt", k})); });
  return out;
}

}  // namespace kvtier
