#include "traces/synthetic_patterns.h"

#include <algorithm>
#include <cmath>

namespace kvtier {

namespace {
const char* const kLayerParams[] = {"sink_mass",      "window_mass",     "heavy_fraction", "zipf_s",
                                    "background_mass", "recent_mass", "recent_decay"};

// SplitMix64: one independent stream per (seed, layer, sequence), the same on every platform.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

ParamList PatternAttention::params() {
  const char* per_layer = " (a number, or an array over depth from the first layer to the last)";
  return {
      integer("sink_blocks", 1, "attention-sink blocks at the start of the sequence"),
      any("sink_mass", 0.2, std::string("share of attention mass on the sinks") + per_layer),
      integer("window_blocks", 2, "newest blocks (local window)"),
      any("window_mass", 0.3, std::string("share of attention mass on the local window") + per_layer),
      integer("recent_blocks", 0,
              "blocks just before the local window whose mass falls with their distance from it (recency); 0: none"),
      any("recent_mass", 0.0, std::string("share of attention mass on the recent blocks") + per_layer),
      any("recent_decay", 0.5,
          std::string("each recent block one further from the window gets this times the mass of the one before") +
              per_layer),
      any("heavy_fraction", 0.1, std::string("heavy-hitter blocks as a fraction of the context's blocks") + per_layer),
      any("zipf_s", 1.0, std::string("power-law exponent of heavy-hitter mass by rank") + per_layer),
      any("background_mass", 0.0,
          std::string("share of mass spread evenly over every block that is no sink, window or heavy hitter; "
                      "above 0 every block is listed") + per_layer),
      num("span_blocks", 1.0, "mean length of a run of consecutive heavy blocks (1: independent blocks)", 1, 1e6),
      num("drift", 0.02, "probability per step, layer and sequence that a heavy span moves to a new place", 0, 1),
      num("burst_rate", 0.0, "probability per step, layer and sequence that a burst starts", 0, 1),
      integer("burst_blocks", 4, "blocks in a burst's span", 1),
      integer("burst_steps", 8, "steps a burst lasts", 1),
      num("burst_mass", 0.3, "share of attention mass a burst takes while it lasts", 0, 1),
      num("jitter", 0.0,
          "standard deviation of the log of each block's mass from step to step (the record is renormalised)", 0, 10),
  };
}

double PatternAttention::at_depth(const json& v, uint32_t layer, uint32_t layers) {
  if (v.is_number()) return v.get<double>();
  if (v.size() == 1 || layers <= 1) return v[0].get<double>();
  const double x = static_cast<double>(layer) / (layers - 1) * (v.size() - 1);
  const size_t i = std::min(static_cast<size_t>(x), v.size() - 2);
  const double f = x - i;
  return v[i].get<double>() * (1 - f) + v[i + 1].get<double>() * f;
}

PatternAttention::PatternAttention(json& p, const std::string& where, uint32_t layers, uint32_t context_tokens,
                                   uint32_t steps, uint32_t block_tokens, uint32_t sequences, uint64_t seed) {
  check_trace_shape(where, layers, context_tokens, steps, block_tokens, sequences);
  resolve_params(p, params(), where, {"kind"});
  for (const char* k : kLayerParams) {
    const json& v = p[k];
    const double hi = std::string(k) == "zipf_s" ? 10.0 : 1.0;
    auto ok = [&](const json& x) { return x.is_number() && x.get<double>() >= 0 && x.get<double>() <= hi; };
    bool good = v.is_number() ? ok(v) : v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), ok);
    if (!good)
      throw ConfigError(where + "." + k + ": expected a number from 0 to " + std::to_string(static_cast<int>(hi)) +
                        ", or a non-empty array of them (one value per depth, first layer to last)");
  }
  if (sequences == 0) throw ConfigError(where + ": sequences must be at least 1");
  sinks_ = static_cast<uint32_t>(get_int(p, "sink_blocks"));
  window_ = static_cast<uint32_t>(get_int(p, "window_blocks"));
  recent_ = static_cast<uint32_t>(get_int(p, "recent_blocks"));
  span_blocks_ = get_num(p, "span_blocks");
  drift_ = get_num(p, "drift");
  burst_rate_ = get_num(p, "burst_rate");
  burst_blocks_ = static_cast<uint32_t>(get_int(p, "burst_blocks"));
  burst_steps_ = static_cast<uint32_t>(get_int(p, "burst_steps"));
  burst_mass_ = get_num(p, "burst_mass");
  jitter_ = get_num(p, "jitter");
  shape_.resize(layers);
  for (uint32_t l = 0; l < layers; ++l) {
    auto& s = shape_[l];
    s.sink_mass = at_depth(p["sink_mass"], l, layers);
    s.window_mass = at_depth(p["window_mass"], l, layers);
    s.heavy_fraction = at_depth(p["heavy_fraction"], l, layers);
    s.zipf_s = at_depth(p["zipf_s"], l, layers);
    s.background_mass = at_depth(p["background_mass"], l, layers);
    s.recent_mass = recent_ ? at_depth(p["recent_mass"], l, layers) : 0.0;
    s.recent_decay = at_depth(p["recent_decay"], l, layers);
    const double fixed =
        s.sink_mass + s.window_mass + s.recent_mass + s.background_mass + (burst_rate_ > 0 ? burst_mass_ : 0);
    if (fixed > 1.0 + 1e-9)
      throw ConfigError(where + ": at layer " + std::to_string(l) +
                        " sink_mass + window_mass + recent_mass + background_mass (+ burst_mass when bursts occur) "
                        "exceed 1");
  }
  header_.version = 2;
  header_.layers = layers;
  header_.steps = steps;
  header_.block_tokens = block_tokens;
  header_.context_tokens = context_tokens;
  header_.sequences = sequences;
  header_.has_prompt = true;
  header_.origin = p;
  header_.origin["generator"] = "kvtier patterns";
  header_.origin["seed"] = seed;

  const uint32_t ctx_blocks = (context_tokens + block_tokens - 1) / block_tokens;
  ctx_blocks_ = ctx_blocks;
  lanes_.resize(static_cast<size_t>(layers) * sequences);
  dense_.assign(header_.blocks_at(steps), 0.0);
  std::vector<Span> scratch;
  for (uint32_t l = 0; l < layers; ++l) {
    const uint32_t n_heavy =
        std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(shape_[l].heavy_fraction * ctx_blocks)));
    for (uint32_t s = 0; s < sequences; ++s) {
      Lane& lane = lanes_[static_cast<size_t>(l) * sequences + s];
      lane.rng = mix(seed ^ mix((static_cast<uint64_t>(l) << 32) | s));
      // Spans until they cover n_heavy blocks (the last one cut to fit); they
      // are placed in the prompt, where the prompt made them heavy.
      // Built in one scratch vector and copied at their exact size: the lanes
      // hold them for the whole trace, and vectors grown in place, one lane
      // after another, would leave the heap full of the capacity they outgrew.
      scratch.clear();
      for (uint32_t covered = 0; covered < n_heavy;) {
        const uint32_t len = std::min(span_length(lane), n_heavy - covered);
        scratch.push_back(place(lane, len, std::min(sinks_, ctx_blocks), ctx_blocks));
        covered += len;
      }
      lane.spans.assign(scratch.begin(), scratch.end());
      lane.prompt_spans = lane.spans;
    }
  }
}

double PatternAttention::state_bytes(const json& p, const std::string& where, uint32_t layers,
                                     uint32_t context_tokens, uint32_t steps, uint32_t block_tokens,
                                     uint32_t sequences) {
  json q = p;
  resolve_params(q, params(), where, {"kind"});
  const double ctx_blocks = std::ceil(double(context_tokens) / block_tokens);
  const double last_blocks = std::floor((double(context_tokens) + steps + block_tokens) / block_tokens);
  const double span_mean = std::max(1.0, get_num(q, "span_blocks"));
  double lanes_bytes = 0;
  for (uint32_t l = 0; l < layers; ++l) {
    double hf = 0;
    try {
      hf = at_depth(q["heavy_fraction"], l, layers);
    } catch (const std::exception&) {
      hf = 1;  // the constructor names the bad value
    }
    const double n_heavy = std::max(1.0, std::round(hf * ctx_blocks));
    // Spans until n_heavy is covered: about n_heavy / mean of them, at most n_heavy.
    const double spans = std::min(n_heavy, 1.5 * n_heavy / span_mean + 8);
    lanes_bytes += double(sequences) * (double(sizeof(Lane)) + 32 + 2 * spans * double(sizeof(Span)));
  }
  return lanes_bytes + 8 * last_blocks + 12 * ctx_blocks;
}

double PatternAttention::uniform(Lane& l) {
  l.rng = mix(l.rng);
  return static_cast<double>(l.rng >> 11) * 0x1.0p-53;
}

uint32_t PatternAttention::span_length(Lane& l) {
  // Geometric with mean span_blocks: 1 + failures before success, p = 1/mean.
  if (span_blocks_ <= 1.0) return 1;
  const double q = 1.0 - 1.0 / span_blocks_;
  const double u = std::max(uniform(l), 1e-300);
  return 1 + static_cast<uint32_t>(std::floor(std::log(u) / std::log(q)));
}

PatternAttention::Span PatternAttention::place(Lane& l, uint32_t len, uint32_t lo, uint32_t hi) {
  // Heavy hitters are the blocks that are neither sinks nor window: a span
  // lies within [lo, hi) where that range has room, else anywhere.
  if (hi <= lo) {
    lo = 0;
    hi = std::max<uint32_t>(hi, 1);
  }
  len = std::max<uint32_t>(1, std::min(len, hi - lo));
  return Span{lo + below(l, hi - lo - len + 1), len};
}

// The masses of one record (or, with `prompt`, of the prompt averaged over its
// queries) over blocks 0..n-1 into m (zeroed by the caller).
void PatternAttention::fill(Lane& lane, const LayerShape& s, uint32_t n, bool prompt, std::vector<double>& m) const {
  const uint32_t sinks = std::min(sinks_, n), window = std::min(window_, n);
  const bool burst = !prompt && lane.burst_left > 0;
  double heavy_mass =
      1.0 - s.sink_mass - s.window_mass - s.recent_mass - s.background_mass - (burst ? burst_mass_ : 0.0);
  double spare = 0;  // mass of a pattern with no block to go to goes to the heavy hitters
  if (sinks) for (uint32_t b = 0; b < sinks; ++b) m[b] += s.sink_mass / sinks;
  else spare += s.sink_mass;
  if (prompt) {
    // Each prompt query's local window is its own neighbourhood: averaged over
    // the prompt, the window share spreads evenly over the prompt's blocks.
    for (uint32_t b = 0; b < n; ++b) m[b] += s.window_mass / n;
  } else if (window) {
    for (uint32_t b = n - window; b < n; ++b) m[b] += s.window_mass / window;
  } else {
    spare += s.window_mass;
  }
  // Recency: the blocks just before the window, mass falling geometrically
  // with the distance from it; in a prompt, each query's own neighbourhood,
  // so spread evenly as the window is.
  const uint32_t recent = prompt ? 0 : std::min(recent_, n - std::min(n, sinks + window));
  if (prompt && recent_ && s.recent_mass > 0) {
    for (uint32_t b = 0; b < n; ++b) m[b] += s.recent_mass / n;
  } else if (recent) {
    double z = 0, w = 1;
    for (uint32_t d = 0; d < recent; ++d, w *= s.recent_decay) z += w;
    w = 1;
    for (uint32_t d = 0; d < recent; ++d, w *= s.recent_decay) m[n - window - 1 - d] += z > 0 ? s.recent_mass * w / z : 0;
  } else {
    spare += s.recent_mass;
  }
  if (burst) {
    const uint32_t len = std::min(burst_blocks_, n - lane.burst_start);
    for (uint32_t b = lane.burst_start; b < lane.burst_start + len; ++b) m[b] += burst_mass_ / len;
  }
  // Heavy hitters: rank r (over the spans' blocks in order) gets r^-s.
  heavy_mass = std::max(0.0, heavy_mass + spare);
  double z = 0;
  uint32_t rank = 0;
  for (const Span& sp : lane.spans)
    for (uint32_t i = 0; i < sp.len; ++i) z += std::pow(++rank, -s.zipf_s);
  rank = 0;
  std::vector<char> heavy(n, 0);
  for (const Span& sp : lane.spans)
    for (uint32_t i = 0; i < sp.len; ++i) {
      const double w = heavy_mass * std::pow(++rank, -s.zipf_s) / z;
      const uint32_t b = std::min(sp.start + i, n - 1);
      m[b] += w;
      heavy[b] = 1;
    }
  if (s.background_mass > 0) {
    uint32_t others = 0;
    for (uint32_t b = 0; b < n; ++b) others += !heavy[b] && b >= sinks && (prompt || b < n - window - recent);
    for (uint32_t b = 0; b < n; ++b)
      if (!heavy[b] && b >= sinks && (prompt || b < n - window - recent))
        m[b] += others ? s.background_mass / others : 0.0;
    if (!others) // nowhere to spread it: keep the record's total at 1
      for (uint32_t b = 0; b < n; ++b) m[b] += s.background_mass / n;
  }
}

const std::vector<float>* PatternAttention::prompt(uint32_t seq, uint32_t layer) const {
  if (layer >= header_.layers || seq >= header_.sequences) return nullptr;
  // A lane as it was placed (the prompt reads only its spans; it draws nothing).
  Lane lane;
  lane.spans = lanes_[static_cast<size_t>(layer) * header_.sequences + seq].prompt_spans;
  prompt_m_.assign(ctx_blocks_, 0.0);
  fill(lane, shape_[layer], ctx_blocks_, true, prompt_m_);
  prompt_.assign(prompt_m_.begin(), prompt_m_.end());
  return &prompt_;
}

bool PatternAttention::next(AttentionRecord& rec) {
  if (step_ >= header_.steps) return false;
  const uint32_t S = header_.sequences;
  Lane& lane = lanes_[static_cast<size_t>(layer_) * S + seq_];
  const uint32_t n = header_.blocks_at(step_);
  rec.step = step_;
  rec.layer = layer_;
  rec.seq = S > 1 ? seq_ : kAllSequences;
  // Drift: a span moves anywhere in the sequence so far, its rank kept.
  // Heavy spans and bursts land between the sinks and the recent blocks.
  const uint32_t lo = std::min(sinks_, n), hi = n > window_ + recent_ ? n - window_ - recent_ : 0;
  for (Span& sp : lane.spans)
    if (uniform(lane) < drift_) sp = place(lane, sp.len, lo, hi);
  if (lane.burst_left > 0) --lane.burst_left;
  if (lane.burst_left == 0 && uniform(lane) < burst_rate_) {
    // A distant span: anywhere between the sinks and the local window.
    lane.burst_start = place(lane, burst_blocks_, lo, hi).start;
    lane.burst_left = burst_steps_;
  }
  std::fill(dense_.begin(), dense_.begin() + n, 0.0);
  fill(lane, shape_[layer_], n, false, dense_);
  if (jitter_ > 0) {
    // Log-normal noise of mean 1 on every listed block (Box-Muller on the
    // lane's own stream, so the same on every platform), then renormalised.
    double total = 0;
    for (uint32_t b = 0; b < n; ++b) {
      if (dense_[b] <= 0) continue;
      const double u1 = std::max(uniform(lane), 1e-300), u2 = uniform(lane);
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
      dense_[b] *= std::exp(jitter_ * z - 0.5 * jitter_ * jitter_);
      total += dense_[b];
    }
    for (uint32_t b = 0; b < n; ++b) dense_[b] /= total;
  }
  rec.blocks.clear();
  rec.mass.clear();
  for (uint32_t b = 0; b < n; ++b)
    if (dense_[b] > 0) {
      rec.blocks.push_back(b);
      rec.mass.push_back(static_cast<float>(dense_[b]));
    }
  if (++seq_ == S) {
    seq_ = 0;
    if (++layer_ == header_.layers) {
      layer_ = 0;
      ++step_;
    }
  }
  return true;
}

}  // namespace kvtier
