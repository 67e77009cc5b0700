#include "sim/core/engine_setup.h"

#include <algorithm>

#include "sim/core/footprint.h"
#include "policies/eviction/hints.h"

#include "models/fpga_ku15p.h"

namespace kvtier {

void EnginePolicies::create(json& pol, const json& defaults) {
  for (auto it = pol.begin(); it != pol.end(); ++it)
    if (!defaults.contains(it.key()) && !is_annotation_key(it.key())) {
      std::vector<std::string> fams;
      for (auto d = defaults.begin(); d != defaults.end(); ++d) fams.push_back(d.key());
      std::string hint = nearest(it.key(), fams);
      throw ConfigError("policies." + it.key() + ": unknown policy family" +
                        (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
  for (auto d = defaults.begin(); d != defaults.end(); ++d)
    if (!pol.contains(d.key())) pol[d.key()] = *d;
  spec_ = pol;
  evict = Registry<EvictionPolicy>::instance().create(pol["eviction"], "policies.eviction");
  // An offline policy needs each block's next reference, which the replay
  // computes from the whole trace before it starts; a run's blocks are
  // created as it goes, so it would choose blindly.
  if (dynamic_cast<const NextAccessEviction*>(evict.get()))
    throw ConfigError("policies.eviction: '" + pol["eviction"]["name"].get<std::string>() +
                      "' needs every block's next reference, which only `kvtier replay` knows (from the whole trace); "
                      "use it there, or an online policy here");
  promote = Registry<PromotionPolicy>::instance().create(pol["promotion"], "policies.promotion");
  place = Registry<PlacementPolicy>::instance().create(pol["placement"], "policies.placement");
  prefetch = Registry<PrefetchPolicy>::instance().create(pol["prefetch"], "policies.prefetch");
  eval = Registry<EvaluationPolicy>::instance().create(pol["evaluation"], "policies.evaluation");
  compress = Registry<CompressionPolicy>::instance().create(pol["compression"], "policies.compression");
}

void EngineSetup::bind_host_devices() {
  for (size_t i = 0; i < hw.devices.size(); ++i) {
    if (hw.devices[i].kind == "cpu" && cpu_dev < 0) cpu_dev = static_cast<int>(i);
    if (fpga_kernel(*hw.devices[i].model) && fpga_dev < 0) fpga_dev = static_cast<int>(i);
    if (hw.devices[i].kind == "dram" && staging_dev < 0) staging_dev = static_cast<int>(i);
  }
  if (staging_dev < 0) staging_dev = cpu_dev;
}

double EnginePolicies::state_bytes_per_block(const BlockTable& shape) const {
  // A few layers of short sequences: what a policy keeps per sequence and
  // layer then counts against fewer blocks than in the run (an
  // overestimate), and the measurement stays cheap for any shape.
  const uint32_t layers = std::min<uint32_t>(shape.layers, 4), blocks = std::min<uint32_t>(shape.blocks_per_seq_layer, 128);
  auto measure = [&](uint32_t seqs) {
    BlockTable t;
    t.batch = seqs;
    t.layers = layers;
    t.blocks_per_seq_layer = blocks;
    t.block_tokens = shape.block_tokens;
    t.block_bytes = shape.block_bytes;
    t.tiers = shape.tiers;
    t.allocate(size_t(seqs) * layers * blocks, kNotCreated);
    json spec = spec_;
    const double before = heap_bytes_in_use();
    EnginePolicies copy;
    copy.create(spec, spec_);
    copy.setup(t);
    return heap_bytes_in_use() - before;
  };
  const double per_seq = double(layers) * blocks;
  if (per_seq <= 0) return 0;
  return std::max(0.0, (measure(2) - measure(1)) / per_seq);
}

void EnginePolicies::setup(const BlockTable& t) {
  evict->bind_placement(place.get());
  evict->setup(t);
  promote->setup(t);
  place->setup(t);
  prefetch->setup(t);
  eval->setup(t);
  compress->setup(t);
}

}  // namespace kvtier
