#include "traces/request_synthetic.h"

#include <algorithm>
#include <cmath>
#include <queue>

namespace kvtier {
namespace {

// Id spaces (top bits), so ids of different origins never collide.
constexpr uint64_t kSessionSpace = 1ull << 62;  // | session << 24 | block index
constexpr uint64_t kChunkSpace = 2ull << 62;    // | chunk << 20 | block index
constexpr uint64_t kUniqueSpace = 3ull << 62;   // | counter

ParamList length_params(double mean) {
  return {str("kind", "lognormal", "distribution of the length", {"constant", "uniform", "exponential", "lognormal"}),
          positive("mean", mean, "mean tokens (constant: the length)"),
          num("sigma", 1.0, "lognormal: standard deviation of the log of the length", 0.0, 10.0),
          integer("min", 1, "shortest length (tokens); uniform: the lower bound", 0, 1e9),
          integer("max", 131072, "longest length (tokens); uniform: the upper bound", 1, 1e9)};
}

}  // namespace

// A member of SyntheticRequests::Impl, so not file-local (unity builds put
// this file's anonymous namespace in a translation unit of several files).
struct SyntheticLengthDist {
  std::string kind;
  double mean = 0, sigma = 0;
  uint32_t lo = 1, hi = 1;
  void load(json& j, const std::string& where, double def_mean) {
    if (j.is_null()) j = json::object();
    resolve_params(j, length_params(def_mean), where);
    kind = j["kind"].get<std::string>();
    mean = get_num(j, "mean");
    sigma = get_num(j, "sigma");
    lo = uint32_t(get_int(j, "min"));
    hi = uint32_t(get_int(j, "max"));
    if (lo > hi) throw ConfigError(where + ".min: " + std::to_string(lo) + " is above max " + std::to_string(hi));
  }
  uint32_t sample(std::mt19937_64& rng) const {
    double v = mean;
    if (kind == "uniform") {
      return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
    } else if (kind == "exponential") {
      v = std::exponential_distribution<double>(1.0 / mean)(rng);
    } else if (kind == "lognormal") {
      v = std::lognormal_distribution<double>(std::log(mean) - 0.5 * sigma * sigma, sigma)(rng);
    }
    v = std::round(v);
    if (v < double(lo)) v = lo;
    if (v > double(hi)) v = hi;
    return uint32_t(v);
  }
};

ParamList synthetic_request_params() {
  return {integer("requests", 1000, "requests to generate (all turns counted); replay arrivals may end sooner", 1, 1e9),
          integer("seed", 1, "random seed: the same parameters and seed give the same stream", 0, 9007199254740992.0),
          integer("block_tokens", 512, "tokens per KV block", 1, 1 << 20),
          any("arrival", json::object(), "arrival process: {kind: poisson|gamma|replay, rate_per_s, cv, trace, time_scale}",
              ParamType::Object),
          any("input", json::object(), "new prompt tokens per turn: {kind, mean, sigma, min, max}", ParamType::Object),
          any("output", json::object(), "output tokens per request: {kind, mean, sigma, min, max}", ParamType::Object),
          any("sessions", json::object(), "multi-turn conversations: {turns_mean, think_s}", ParamType::Object),
          any("rag", json::object(),
              "retrieval-augmented requests: {fraction, corpus_chunks, chunk_tokens, chunks_per_request, zipf_alpha, "
              "question_tokens}",
              ParamType::Object)};
}

struct SyntheticRequests::Impl {
  std::mt19937_64 rng;
  uint64_t total = 0, emitted = 0;
  uint32_t bt = 512;
  // Arrivals.
  std::string arrival_kind;
  double rate = 1, cv = 1, scale = 1;
  std::unique_ptr<RequestSource> replay;
  double next_arrival = 0;
  bool arrivals_left = true;
  // Lengths.
  SyntheticLengthDist input, output;
  // Sessions.
  double turns_mean = 1, think_s = 0;
  // RAG.
  double rag_fraction = 0, zipf_alpha = 1;
  uint32_t corpus = 0, chunk_tokens = 0, chunks_per_request = 0;
  SyntheticLengthDist question;
  std::vector<double> zipf_cdf;
  uint64_t next_session = 1, unique = 0;

  struct Turn {
    double at;
    uint64_t order;  // ties: first scheduled first
    uint64_t session;
    uint32_t context;      // tokens already in the conversation before this turn's new input
    uint32_t turns_left;   // including this one
    bool operator>(const Turn& o) const { return at > o.at || (at == o.at && order > o.order); }
  };
  std::priority_queue<Turn, std::vector<Turn>, std::greater<Turn>> pending;
  uint64_t order = 0;

  void advance_arrival() {
    if (arrival_kind == "replay") {
      Request r;
      if (replay->next(r)) next_arrival = r.arrival_s * scale;
      else arrivals_left = false;
    } else if (arrival_kind == "gamma") {
      double k = 1.0 / (cv * cv);
      next_arrival += std::gamma_distribution<double>(k, 1.0 / (rate * k))(rng);
    } else {
      next_arrival += std::exponential_distribution<double>(rate)(rng);
    }
  }
  uint32_t sample_chunk() {
    double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    return uint32_t(std::lower_bound(zipf_cdf.begin(), zipf_cdf.end(), u) - zipf_cdf.begin());
  }
  void prompt_blocks(uint64_t session, uint32_t tokens, std::vector<uint64_t>& out) {
    uint32_t full = tokens / bt;
    for (uint32_t j = 0; j < full; ++j) out.push_back(kSessionSpace | (session << 24) | j);
    if (tokens % bt) out.push_back(kUniqueSpace | unique++);
  }
};

SyntheticRequests::SyntheticRequests(json& p, const std::string& where) : impl_(std::make_unique<Impl>()) {
  if (!p.is_object()) throw ConfigError(where + ": expected an object of generator parameters");
  resolve_params(p, synthetic_request_params(), where, {"kind"});
  Impl& m = *impl_;
  m.total = uint64_t(get_int(p, "requests"));
  m.rng.seed(uint64_t(get_int(p, "seed")));
  block_tokens_ = m.bt = uint32_t(get_int(p, "block_tokens"));

  json& a = p["arrival"];
  resolve_params(a,
                 {str("kind", "poisson", "arrival process", {"poisson", "gamma", "replay"}),
                  positive("rate_per_s", 1.0, "mean arrivals (conversations) per second (poisson, gamma)"),
                  positive("cv", 2.0, "gamma: coefficient of variation of the gaps (1 = Poisson, > 1 bursty)"),
                  str("trace", "", "replay: a Mooncake or Azure trace whose arrival times are used"),
                  positive("time_scale", 1.0, "replay: arrival times are multiplied by this")},
                 where + ".arrival");
  m.arrival_kind = a["kind"].get<std::string>();
  m.rate = get_num(a, "rate_per_s");
  m.cv = get_num(a, "cv");
  m.scale = get_num(a, "time_scale");
  if (m.arrival_kind == "replay") {
    std::string tr = a["trace"].get<std::string>();
    if (tr.empty()) throw ConfigError(where + ".arrival.trace: replay arrivals need a trace file");
    m.replay = open_request_trace(tr);
  }
  m.input.load(p["input"], where + ".input", 2048);
  m.output.load(p["output"], where + ".output", 256);

  json& s = p["sessions"];
  resolve_params(s,
                 {num("turns_mean", 1.0, "mean turns per conversation (1: single-turn requests)", 1.0, 1e6),
                  num("think_s", 30.0, "mean seconds between a turn's arrival and the next turn's", 0.0, 1e9)},
                 where + ".sessions");
  m.turns_mean = get_num(s, "turns_mean");
  m.think_s = get_num(s, "think_s");

  json& g = p["rag"];
  resolve_params(g,
                 {num("fraction", 0.0, "share of conversations that are one retrieval-augmented request", 0.0, 1.0),
                  integer("corpus_chunks", 10000, "chunks in the corpus (a popularity table of this many entries)", 1, 1 << 24),
                  integer("chunk_tokens", 512, "tokens per chunk (a multiple of block_tokens)", 1, 1 << 20),
                  integer("chunks_per_request", 4, "distinct chunks retrieved per request", 1, 4096),
                  num("zipf_alpha", 1.0, "chunk popularity: P(rank k) ~ 1 / k^alpha", 0.0, 10.0),
                  any("question", json::object(), "question tokens after the chunks: {kind, mean, sigma, min, max}",
                      ParamType::Object)},
                 where + ".rag");
  m.rag_fraction = get_num(g, "fraction");
  m.corpus = uint32_t(get_int(g, "corpus_chunks"));
  m.chunk_tokens = uint32_t(get_int(g, "chunk_tokens"));
  m.chunks_per_request = uint32_t(get_int(g, "chunks_per_request"));
  m.zipf_alpha = get_num(g, "zipf_alpha");
  m.question.load(g["question"], where + ".rag.question", 64);
  if (m.rag_fraction > 0) {
    if (m.chunk_tokens % m.bt)
      throw ConfigError(where + ".rag.chunk_tokens: " + std::to_string(m.chunk_tokens) +
                        " is not a multiple of block_tokens " + std::to_string(m.bt) +
                        " (a chunk's KV blocks must not straddle chunks)");
    if (m.chunks_per_request > m.corpus)
      throw ConfigError(where + ".rag.chunks_per_request: " + std::to_string(m.chunks_per_request) +
                        " distinct chunks from a corpus of " + std::to_string(m.corpus));
    m.zipf_cdf.resize(m.corpus);
    double sum = 0;
    for (uint32_t k = 0; k < m.corpus; ++k) sum += 1.0 / std::pow(double(k + 1), m.zipf_alpha);
    double acc = 0;
    for (uint32_t k = 0; k < m.corpus; ++k) {
      acc += 1.0 / std::pow(double(k + 1), m.zipf_alpha) / sum;
      m.zipf_cdf[k] = acc;
    }
    m.zipf_cdf.back() = 1.0;
  }
  name_ = "synthetic(" + m.arrival_kind + ", seed " + std::to_string(get_int(p, "seed")) + ")";
  m.next_arrival = 0;
  m.advance_arrival();
}

SyntheticRequests::~SyntheticRequests() = default;

bool SyntheticRequests::next(Request& r) {
  Impl& m = *impl_;
  if (m.emitted >= m.total) return false;
  bool from_pending = !m.pending.empty() && (!m.arrivals_left || m.pending.top().at <= m.next_arrival);
  if (!from_pending && !m.arrivals_left) return false;
  r.blocks.clear();
  r.output_tokens = m.output.sample(m.rng);
  if (from_pending) {
    Impl::Turn t = m.pending.top();
    m.pending.pop();
    uint32_t added = m.input.sample(m.rng);
    r.arrival_s = t.at;
    r.session = t.session;
    r.input_tokens = t.context + added;
    m.prompt_blocks(t.session, r.input_tokens, r.blocks);
    if (t.turns_left > 1) {
      double gap = m.think_s > 0 ? std::exponential_distribution<double>(1.0 / m.think_s)(m.rng) : 0.0;
      m.pending.push({t.at + gap, m.order++, t.session, r.input_tokens + r.output_tokens, t.turns_left - 1});
    }
  } else {
    r.arrival_s = m.next_arrival;
    r.session = m.next_session++;
    bool rag = m.rag_fraction > 0 && std::uniform_real_distribution<double>(0.0, 1.0)(m.rng) < m.rag_fraction;
    if (rag) {
      std::vector<uint32_t> chosen;
      while (chosen.size() < m.chunks_per_request) {
        uint32_t c = m.sample_chunk();
        if (std::find(chosen.begin(), chosen.end(), c) == chosen.end()) chosen.push_back(c);
      }
      uint32_t per_chunk = m.chunk_tokens / m.bt;
      for (uint32_t c : chosen)
        for (uint32_t j = 0; j < per_chunk; ++j) r.blocks.push_back(kChunkSpace | (uint64_t(c) << 20) | j);
      uint32_t q = m.question.sample(m.rng);
      r.input_tokens = uint32_t(chosen.size()) * m.chunk_tokens + q;
      uint32_t qb = (q + m.bt - 1) / m.bt;
      for (uint32_t j = 0; j < qb; ++j) r.blocks.push_back(kUniqueSpace | m.unique++);
    } else {
      // Turns: 1 + Geometric(p) with mean turns_mean.
      uint32_t turns = 1;
      if (m.turns_mean > 1.0) turns += std::geometric_distribution<uint32_t>(1.0 / m.turns_mean)(m.rng);
      r.input_tokens = m.input.sample(m.rng);
      m.prompt_blocks(r.session, r.input_tokens, r.blocks);
      if (turns > 1) {
        double gap = m.think_s > 0 ? std::exponential_distribution<double>(1.0 / m.think_s)(m.rng) : 0.0;
        m.pending.push({r.arrival_s + gap, m.order++, r.session, r.input_tokens + r.output_tokens, turns - 1});
      }
    }
    m.advance_arrival();
  }
  ++m.emitted;
  return true;
}

}  // namespace kvtier
