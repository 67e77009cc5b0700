#include "traces/attention_fit.h"

#include <algorithm>
#include <cmath>

#include "traces/attention_stats.h"
#include "traces/synthetic_patterns.h"

namespace kvtier {

namespace {
struct LayerSums {
  double n = 0, sink = 0, window = 0, heavy = 0, background = 0, zipf = 0, zipf_n = 0;
};

double round6(double x) { return std::round(x * 1e6) / 1e6; }

// The geometric ratio q (weights q^(d-1), d = 1..r) whose mass-weighted mean
// distance is `mean`: from 1 (q -> 0) up to (r + 1) / 2 (q = 1), rising with q.
double decay_for_mean(double mean, uint32_t r) {
  auto mean_of = [r](double q) {
    double z = 0, m = 0, w = 1;
    for (uint32_t d = 1; d <= r; ++d, w *= q) {
      z += w;
      m += d * w;
    }
    return m / z;
  };
  if (r < 2 || mean <= 1.0) return 0.0;
  if (mean >= mean_of(1.0)) return 1.0;
  double lo = 0.0, hi = 1.0;
  for (int i = 0; i < 50; ++i) {
    const double mid = 0.5 * (lo + hi);
    (mean_of(mid) < mean ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// recent_blocks, and per layer recent_mass and recent_decay, from a profile.
struct Recency {
  uint32_t blocks = 0;
  std::vector<double> mass, decay;
};

Recency fit_recency(const RecencyProfile& p, double heavy_ratio, uint32_t layers) {
  Recency r;
  for (size_t l = 0; l < p.share.size(); ++l) {
    uint32_t d = 0;
    while (d < p.share[l].size() && p.share[l][d] > heavy_ratio * p.block[l]) ++d;
    r.blocks = std::max(r.blocks, d);
  }
  r.mass.assign(layers, 0.0);
  r.decay.assign(layers, 0.0);
  for (size_t l = 0; l < p.share.size() && l < layers; ++l) {
    double m = 0, md = 0;
    for (uint32_t d = 0; d < r.blocks && d < p.share[l].size(); ++d) {
      m += p.share[l][d];
      md += (d + 1) * p.share[l][d];
    }
    r.mass[l] = m;
    r.decay[l] = m > 0 ? decay_for_mean(md / m, r.blocks) : 0.0;
  }
  return r;
}
}  // namespace

RecencyProfile recency_profile(AttentionSource& src, uint32_t sink_blocks, uint32_t window_blocks,
                               uint32_t max_distance) {
  const AttentionHeader& h = src.header();
  RecencyProfile p;
  p.share.assign(h.layers, std::vector<double>(max_distance, 0.0));
  p.block.assign(h.layers, 0.0);
  std::vector<std::vector<double>> count(h.layers, std::vector<double>(max_distance, 0.0));
  std::vector<double> block_n(h.layers, 0.0);
  std::vector<double> dense(h.blocks_at(h.steps), 0.0);
  AttentionRecord rec;
  while (src.next(rec)) {
    const uint32_t n = h.blocks_at(rec.step);
    double total = 0;
    for (size_t i = 0; i < rec.blocks.size(); ++i) {
      dense[rec.blocks[i]] += rec.mass[i];
      total += rec.mass[i];
    }
    if (total <= 0) total = 1;
    const uint32_t sinks = std::min(sink_blocks, n);
    const uint32_t wstart = std::max(sinks, n - std::min(window_blocks, n));
    for (uint32_t d = 1; d <= max_distance && wstart >= sinks + d; ++d) {
      p.share[rec.layer][d - 1] += dense[wstart - d] / total;
      count[rec.layer][d - 1] += 1;
    }
    for (uint32_t b = sinks; b < wstart; ++b) {
      p.block[rec.layer] += dense[b] / total;
      block_n[rec.layer] += 1;
    }
    for (uint32_t b : rec.blocks) dense[b] = 0;
  }
  for (uint32_t l = 0; l < h.layers; ++l) {
    for (uint32_t d = 0; d < max_distance; ++d) p.share[l][d] /= std::max(1.0, count[l][d]);
    p.block[l] /= std::max(1.0, block_n[l]);
  }
  return p;
}

json fit_once(AttentionSource& src, const AttentionFitOptions& o, const std::string& name);

// One pass: the parameters measured directly, and (as "measured_reuse") the
// heavy set's reuse that drift was taken from.
json fit_once(AttentionSource& src, const AttentionFitOptions& o, const std::string& name) {
  const AttentionHeader& h = src.header();
  const uint32_t S = std::max<uint32_t>(1, h.sequences), L = h.layers;
  const uint32_t ctx_blocks = (h.context_tokens + h.block_tokens - 1) / h.block_tokens;
  const size_t max_blocks = h.blocks_at(h.steps);
  std::vector<LayerSums> ls(L);
  std::vector<double> dense(max_blocks, 0.0);
  std::vector<uint32_t> mid, heavy;
  std::vector<std::vector<char>> prev(static_cast<size_t>(L) * S);
  std::vector<std::vector<uint32_t>> prev_list(prev.size());
  double reuse = 0, reuse_n = 0, run_len = 0, run_n = 0;
  // Jitter: log-ratios of the masses of blocks heavy at two consecutive steps.
  std::vector<std::vector<float>> prev_mass(prev.size());
  // Their absolute values in a histogram: the median is robust to the blocks
  // whose mass jumps because a span moved onto or off them.
  constexpr double kBin = 1e-3;
  std::vector<uint64_t> lr_hist(20000, 0);
  uint64_t lr_n = 0;
  // Bursts: a run of 2+ heavy blocks, none of them or their neighbours heavy
  // at the previous step, whose blocks each hold more than the mean
  // persisting heavy block (a distant passage suddenly attended to). Their
  // first block is followed until it leaves the heavy set.
  struct Burst {
    uint32_t block, start;
  };
  std::vector<std::vector<Burst>> active(prev.size());
  double bursts = 0, burst_len = 0, burst_share = 0, lane_steps = 0, burst_steps = 0, burst_ended = 0;
  double prev_heavy_share = 0;  // summed per lane-step: share of the middle blocks heavy at the step before
  // The recent blocks (none without a profile) are left out of the heavy set.
  const Recency recent = o.recency ? fit_recency(*o.recency, o.heavy_ratio, L) : Recency{0, {}, {}};
  AttentionRecord rec;
  while (src.next(rec)) {
    const uint32_t n = h.blocks_at(rec.step);
    double total = 0;
    for (size_t i = 0; i < rec.blocks.size(); ++i) {
      dense[rec.blocks[i]] += rec.mass[i];
      total += rec.mass[i];
    }
    if (total <= 0) total = 1;
    const uint32_t sinks = std::min(o.sink_blocks, n);
    const uint32_t wstart = std::max(sinks, n - std::min(o.window_blocks, n));
    const uint32_t mend = wstart - std::min(recent.blocks, wstart - sinks);  // the middle ends at the recent blocks
    double sink = 0, window = 0, rest = 0;
    for (uint32_t b = 0; b < sinks; ++b) sink += dense[b];
    for (uint32_t b = wstart; b < n; ++b) window += dense[b];
    mid.clear();
    for (uint32_t b = sinks; b < mend; ++b) {
      mid.push_back(b);
      rest += dense[b];
    }
    // Heavy hitters: the fewest blocks (neither sinks nor window) that hold
    // `coverage` of those blocks' mass, but only blocks that stand out from
    // the typical one, with at least heavy_ratio times the median's mass.
    std::sort(mid.begin(), mid.end(),
              [&](uint32_t x, uint32_t y) { return dense[x] > dense[y] || (dense[x] == dense[y] && x < y); });
    const double median = mid.empty() ? 0.0 : dense[mid[mid.size() / 2]];
    const double threshold = std::max(o.heavy_ratio * median, 1e-30);
    heavy.clear();
    double c = 0;
    for (uint32_t b : mid) {
      if (dense[b] < threshold || c >= o.coverage * rest * (1 - 1e-12)) break;
      c += dense[b];
      heavy.push_back(b);
    }
    LayerSums& s = ls[rec.layer];
    s.n += 1;
    s.sink += sink / total;
    s.window += window / total;
    s.heavy += static_cast<double>(heavy.size()) / ctx_blocks;
    s.background += (rest - c) / total;
    if (heavy.size() >= 2) {
      // Least squares of log(mass) on log(rank): the slope's negative is the exponent.
      double sx = 0, sy = 0, sxx = 0, sxy = 0;
      const double k = static_cast<double>(heavy.size());
      for (size_t r = 0; r < heavy.size(); ++r) {
        const double x = std::log(r + 1.0), y = std::log(dense[heavy[r]]);
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
      }
      const double den = k * sxx - sx * sx;
      if (den > 0) {
        s.zipf += std::clamp(-(k * sxy - sx * sy) / den, 0.0, 10.0);
        s.zipf_n += 1;
      }
    }
    // Spans and reuse of the heavy set.
    std::sort(heavy.begin(), heavy.end());
    for (size_t i = 0; i < heavy.size();) {
      size_t j = i + 1;
      while (j < heavy.size() && heavy[j] == heavy[j - 1] + 1) ++j;
      run_len += j - i;
      run_n += 1;
      i = j;
    }
    const size_t lane = static_cast<size_t>(rec.layer) * S + (rec.seq == kAllSequences ? 0 : rec.seq % S);
    auto& mark = prev[lane];
    if (mark.empty()) mark.assign(max_blocks, 0);
    auto& pm = prev_mass[lane];
    if (pm.empty()) pm.assign(max_blocks, 0.f);
    if (rec.step > 0 && !heavy.empty()) {
      double kept = 0;
      for (uint32_t b : heavy) {
        kept += mark[b];
        if (mark[b] && pm[b] > 0 && dense[b] > 0) {
          const double d = std::fabs(std::log(dense[b] / total) - std::log(pm[b]));
          ++lr_hist[std::min<size_t>(lr_hist.size() - 1, static_cast<size_t>(d / kBin))];
          ++lr_n;
        }
      }
      reuse += kept / heavy.size();
      reuse_n += 1;
      double persist = 0, persist_n = 0;
      for (uint32_t b : heavy)
        if (mark[b]) {
          persist += dense[b] / total;
          persist_n += 1;
        }
      const double typical = persist_n > 0 ? persist / persist_n : 0.0;
      lane_steps += 1;
      prev_heavy_share += mend > sinks ? static_cast<double>(prev_list[lane].size()) / (mend - sinks) : 0.0;
      for (size_t i = 0; i < heavy.size();) {
        size_t j = i + 1;
        while (j < heavy.size() && heavy[j] == heavy[j - 1] + 1) ++j;
        bool fresh = j - i >= 2 && persist_n > 0;
        const uint32_t first = heavy[i], last = heavy[j - 1];
        for (uint32_t b = first > 0 ? first - 1 : 0; fresh && b <= last + 1 && b < max_blocks; ++b) fresh = !mark[b];
        double share = 0;
        for (size_t k = i; k < j; ++k) share += dense[heavy[k]] / total;
        if (fresh && share / (j - i) > typical) {
          bursts += 1;
          burst_len += j - i;
          burst_share += share;
          active[lane].push_back({first, rec.step});
        }
        i = j;
      }
    }
    // A burst lasts while its first block stays heavy.
    auto& act = active[lane];
    for (size_t k = 0; k < act.size();) {
      if (!std::binary_search(heavy.begin(), heavy.end(), act[k].block)) {
        burst_steps += rec.step - act[k].start;
        burst_ended += 1;
        act[k] = act.back();
        act.pop_back();
      } else {
        ++k;
      }
    }
    for (uint32_t b : prev_list[lane]) mark[b] = 0;
    for (uint32_t b : heavy) pm[b] = static_cast<float>(dense[b] / total);
    for (uint32_t b : heavy) mark[b] = 1;
    prev_list[lane] = heavy;
    for (uint32_t b : rec.blocks) dense[b] = 0;
  }
  json sink = json::array(), window = json::array(), heavy_f = json::array(), zipf = json::array(),
       background = json::array();
  json recent_mass = json::array(), recent_decay = json::array();
  for (uint32_t l = 0; l < L; ++l) {
    const auto& s = ls[l];
    const double n = std::max(1.0, s.n);
    sink.push_back(round6(s.sink / n));
    window.push_back(round6(s.window / n));
    heavy_f.push_back(round6(std::min(1.0, s.heavy / n)));
    zipf.push_back(round6(s.zipf_n > 0 ? s.zipf / s.zipf_n : 1.0));
    // The generator's shares must leave the heavy hitters a share >= 0.
    double room = std::max(0.0, 1.0 - sink.back().get<double>() - window.back().get<double>());
    if (recent.blocks) {
      recent_mass.push_back(round6(std::min(room, recent.mass[l])));
      recent_decay.push_back(round6(recent.decay[l]));
      room = std::max(0.0, room - recent_mass.back().get<double>());
    }
    background.push_back(round6(std::min(room, s.background / n)));
  }
  // Independent log-normal factors at two steps: the log-ratio is normal with
  // standard deviation jitter * sqrt 2, and its absolute value's median is
  // 0.6745 times that.
  double jitter = 0;
  for (uint64_t i = 0, seen = 0; i < lr_hist.size() && lr_n > 0; ++i) {
    seen += lr_hist[i];
    if (2 * seen >= lr_n) {
      jitter = i == 0 ? 0.0 : (i + 0.5) * kBin / 0.6745 / std::sqrt(2.0);  // below one bin: no jitter
      break;
    }
  }
  // The generator starts a burst only where none is under way, so the rate is
  // per step without one; a burst that lands on or next to a heavy block is
  // not seen, which happens with probability 1 - (1 - h)^(blocks + 2) for a
  // heavy share h of the blocks.
  double burst_rate = 0;
  if (bursts > 0 && lane_steps > burst_steps) {
    const double h = prev_heavy_share / lane_steps, len = burst_len / bursts;
    const double seen = std::pow(std::max(1e-3, 1.0 - h), len + 2);
    burst_rate = std::min(1.0, bursts / (lane_steps - burst_steps) / seen);
  }
  json p{{"kind", "patterns"},
         {"sink_blocks", o.sink_blocks},
         {"sink_mass", sink},
         {"window_blocks", o.window_blocks},
         {"window_mass", window},
         {"heavy_fraction", heavy_f},
         {"zipf_s", zipf},
         {"background_mass", background},
         {"span_blocks", round6(std::max(1.0, run_n > 0 ? run_len / run_n : 1.0))},
         {"drift", round6(std::clamp(reuse_n > 0 ? 1.0 - reuse / reuse_n : 0.0, 0.0, 1.0))},
         {"burst_rate", round6(burst_rate)},
         {"burst_blocks", bursts > 0 ? std::max(1L, std::lround(burst_len / bursts)) : 4},
         {"burst_steps", burst_ended > 0 ? std::max(1L, std::lround(burst_steps / burst_ended)) : 8},
         {"burst_mass", round6(bursts > 0 ? burst_share / bursts : 0.0)},
         {"jitter", round6(jitter)},
         {"measured_reuse", reuse_n > 0 ? reuse / reuse_n : 1.0}};
  if (recent.blocks) {
    p["recent_blocks"] = recent.blocks;
    p["recent_mass"] = recent_mass;
    p["recent_decay"] = recent_decay;
  }
  // The generator needs sink + window + background + burst shares <= 1 in every layer.
  double room = 1.0;
  for (uint32_t l = 0; l < L; ++l)
    room = std::min(room, 1.0 - sink[l].get<double>() - window[l].get<double>() - background[l].get<double>() -
                              (recent.blocks ? recent_mass[l].get<double>() : 0.0));
  if (p["burst_mass"].get<double>() > room) p["burst_mass"] = round6(std::max(0.0, room - 1e-6));
  std::string what = name.empty() ? std::string("a trace") : name;
  p["source"] = "kvtier trace fit of " + what + " (" + std::to_string(L) + " layers, " + std::to_string(h.steps) +
                " steps, " + std::to_string(S) + " sequences, " + std::to_string(h.context_tokens) +
                "-token context in " + std::to_string(h.block_tokens) + "-token blocks; coverage " +
                json(o.coverage).dump() + ", heavy_ratio " + json(o.heavy_ratio).dump() + ")";
  return p;
}

json fit_patterns(AttentionSource& src, const AttentionFitOptions& o, const std::string& name) {
  const AttentionHeader h = src.header();
  json p = fit_once(src, o, name);
  const double own_reuse = p["measured_reuse"].get<double>();
  p.erase("measured_reuse");
  const bool by_stats = o.match_stats && o.match_stats->contains("decode");
  // One statistic of a generated trace (same shape, up to 64 steps) with
  // parameter `key` set to x: the fit's own reuse, or a figure of attention_stats.
  auto measure = [&](const char* key, double x, const char* figure) {
    json q = p;
    q[key] = x;
    PatternAttention gen(q, "fit", h.layers, h.context_tokens, std::min<uint32_t>(h.steps, 64), h.block_tokens,
                         std::max<uint32_t>(1, h.sequences), 1);
    if (!by_stats) return fit_once(gen, o, "")["measured_reuse"].get<double>();
    StatsOptions so;
    so.sink_blocks = o.sink_blocks;
    so.window_blocks = o.window_blocks;
    so.coverage = o.coverage;
    return attention_stats(gen, so)["decode"][figure].get<double>();
  };
  // Bisection for the x in [lo, hi] whose generated figure equals target,
  // the figure growing with x when `rising`.
  auto solve = [&](const char* key, double lo, double hi, const char* figure, double target, bool rising) {
    auto above = [&](double x) { return (measure(key, x, figure) > target) == rising; };
    if (above(lo)) return lo;
    if (!above(hi)) return hi;
    for (int i = 0; i < 12; ++i) {
      const double mid = 0.5 * (lo + hi);
      (above(mid) ? hi : lo) = mid;
    }
    return 0.5 * (lo + hi);
  };
  if (by_stats && p["span_blocks"].get<double>() > 1) {
    // Spans are cut to the heavy set's size and broken by the coverage edge
    // and jitter, so the generated runs are shorter than span_blocks: set it
    // so that the generated trace has the measured mean run.
    const double target = (*o.match_stats)["decode"]["mean_span_blocks"].get<double>();
    p["span_blocks"] = round6(solve("span_blocks", 1.0, 4 * p["span_blocks"].get<double>(), "mean_span_blocks",
                                    target, true));
  }
  if (p["jitter"].get<double>() > 0 && p["drift"].get<double>() > 0) {
    // Jitter moves blocks across the heavy set's edge too, so one minus the
    // reuse overstates drift: set drift so that the generated trace keeps the
    // measured reuse (reuse falls as drift grows).
    const double target = by_stats ? (*o.match_stats)["decode"]["reuse"].get<double>() : own_reuse;
    p["drift"] = round6(solve("drift", 0.0, p["drift"].get<double>(), "reuse", target, false));
  }
  return p;
}

}  // namespace kvtier
