#include "sim/platform/weight_stream.h"

#include <cmath>

#include "policies/policy.h"

namespace kvtier {

void WeightStreamDeleter::operator()(WeightStream* w) const { delete w; }

void install_weights(EngineSetup& s, WeightStreamPtr w, size_t tiers) {
  s.weight_gpu_bytes = w->gpu_bytes() + w->gpu_staging_bytes();
  s.weight_tier_bytes.assign(tiers, 0.0);
  for (size_t t = 0; t < tiers; ++t) s.weight_tier_bytes[t] = w->tier_bytes(static_cast<int>(t));
  s.weight_cache_compressed = w->plan().compress_cache;
  if (s.weight_cache_compressed) s.weight_cache_codec = w->cache_codec(s.gpu_mem_Bps);  // the GPU is bound by now
  s.weights = std::move(w);
}

namespace {
std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", bytes / 1e9);
  return buf;
}
}  // namespace

WeightStream::WeightStream(const WeightPlan& plan, double layer_bytes, uint32_t layers, Homes homes, double first_bytes,
                           double last_bytes)
    : plan_(plan), layer_bytes_(layer_bytes), layers_(layers), first_bytes_(first_bytes), last_bytes_(last_bytes),
      homes_(homes) {}

WeightStreamPtr WeightStream::from_config(const WeightPlan& plan, const Hardware& hw, const LlmSpec& model,
                                                        const std::vector<size_t>& tiers, size_t gpu_dev, int cpu_dev,
                                                        uint32_t batch, const std::string& compression) {
  const std::string P = "policies.weights";
  if (plan.gpu_batches == 0 || batch % plan.gpu_batches != 0)
    throw ConfigError(P + ".gpu_batches: " + std::to_string(plan.gpu_batches) + " does not divide workload.batch " +
                      std::to_string(batch) + " into equal GPU batches");
  Homes h;
  h.gpu = static_cast<int>(gpu_dev);
  for (size_t t = 0; t < tiers.size(); ++t)
    if (tiers[t] != gpu_dev) {
      h.dram_tier = static_cast<int>(t);
      h.dram = static_cast<int>(tiers[t]);
      break;
    }
  if (!tiers.empty() && tiers.back() != gpu_dev && static_cast<int>(tiers.size()) - 1 != h.dram_tier) {
    h.disk_tier = static_cast<int>(tiers.size()) - 1;
    h.disk = static_cast<int>(tiers.back());
  }
  const bool needs_host = plan.cpu > 0 || plan.disk > 0 || plan.cpu_attention || plan.activations_on_cpu;
  if (needs_host && h.dram < 0)
    throw ConfigError(P + ": weights, attention or activations in host memory need a tier below the GPU in hardware.tiers");
  if (plan.disk > 0 && h.disk < 0)
    throw ConfigError(P + ".disk_percent: weights on disk need a second tier below the GPU (the lowest is the disk) in "
                      "hardware.tiers");
  if (plan.cpu_attention && cpu_dev < 0)
    throw ConfigError(P + ".cpu_attention: hardware.devices needs a device of kind cpu");
  if ((!plan.pin_weights || !plan.pin_cache) && cpu_dev < 0)
    throw ConfigError(P + (plan.pin_weights ? ".pin_cache" : ".pin_weights") +
                      ": copying pageable host memory into pinned buffers needs a device of kind cpu in hardware.devices");
  h.cpu = cpu_dev;
  const uint32_t wbits = model.weight_bits ? model.weight_bits : model.dtype_bytes * 8;
  if (plan.compress_weights && wbits != 16)
    throw ConfigError(P + ".compress_weights: group-wise 4-bit compression takes 16-bit weights; model.weight_dtype is " +
                      model.weight_dtype + " (" + std::to_string(wbits) + " bits)");
  if (plan.compress_cache && model.dtype_bytes != 2)
    throw ConfigError(P + ".compress_cache: group-wise 4-bit compression takes 16-bit KV; model.dtype_bytes is " +
                      std::to_string(model.dtype_bytes));
  if (plan.compress_cache && compression != "none")
    throw ConfigError("policies.compression: must be none when policies.weights.compress_cache compresses the KV (got '" +
                      compression + "')");
  if (plan.compress_cache && plan.cpu_attention)
    throw ConfigError(P + ".compress_cache: compressed KV with cpu_attention (the CPU restoring it) is not modelled");
  GroupQuant q;
  const double ratio = plan.compress_weights ? q.ratio() : 1.0;
  const double layer = model.weight_bytes_per_layer() / ratio;
  // The head's matrix as FlexGen's OutputEmbed holds it: its own copy even where tied.
  const double first = model.embedding_params() * model.weight_elem_bytes() / ratio;
  const double last = model.head_read_bytes() / ratio;
  WeightStreamPtr ws(new WeightStream(plan, layer, model.layers, h, first, last));
  // Whatever holds a share must hold all of it.
  auto fits = [&](int dev, double bytes, const char* param) {
    if (dev < 0 || bytes <= 0) return;
    const auto& d = hw.devices[static_cast<size_t>(dev)];
    const double cap = d.model->capacity_bytes();
    if (bytes > cap)
      throw ConfigError("hardware.devices." + d.name + ": " + gb(bytes) + " GB of weights (" + P + "." + param +
                        ") do not fit its " + gb(cap) + " GB");
  };
  fits(h.gpu, ws->gpu_bytes() + ws->gpu_staging_bytes(), "gpu_percent");
  fits(h.dram, ws->dram_bytes() + ws->dram_staging_bytes(), "cpu_percent");
  fits(h.disk, ws->disk_bytes(), "disk_percent");
  if (plan.cpu_attention || !plan.pin_weights || !plan.pin_cache) {
    const DeviceModel& cpu = *hw.devices[static_cast<size_t>(cpu_dev)].model;
    ws->cpu_flops = cpu.flops();
    ws->cpu_mem_Bps = cpu.memory_Bps() > 0 ? cpu.memory_Bps() : hw.devices[static_cast<size_t>(h.dram)].model->read_Bps();
    if (plan.cpu_attention && (ws->cpu_flops <= 0 || ws->cpu_mem_Bps <= 0))
      throw ConfigError(P + ".cpu_attention: the cpu device has no FLOP/s or memory bandwidth");
    if (ws->cpu_mem_Bps <= 0)
      throw ConfigError(P + (plan.pin_weights ? ".pin_cache" : ".pin_weights") +
                        ": neither the cpu device nor the host memory gives a memory bandwidth for the copy");
  }
  return ws;
}

double WeightStream::tier_bytes(int tier) const {
  double b = 0;
  if (tier == homes_.dram_tier) b += dram_bytes() + dram_staging_bytes();
  if (tier == homes_.disk_tier) b += disk_bytes();
  return b;
}

CompressionSpec WeightStream::cache_codec(double gpu_mem_Bps) const {
  CompressionSpec c;
  c.key_ratio = c.value_ratio = quant_.ratio();
  c.compress_Bps = quant_.compress_Bps(gpu_mem_Bps);
  c.decompress_Bps = quant_.decompress_Bps(gpu_mem_Bps);
  c.on_gpu = true;
  return c;
}

JobId WeightStream::load(uint32_t layer, int32_t step, JobBoard& board,
                         const std::function<Stream&(size_t, size_t)>& stream, JobId* staging) {
  if (!streams()) return kNoJob;
  const size_t gpu = static_cast<size_t>(homes_.gpu), dram = static_cast<size_t>(homes_.dram);
  const double from_dram = plan_.cpu * load_bytes(layer), from_disk = plan_.disk * load_bytes(layer);
  JobId last = kNoJob;
  auto job = [&](size_t from, size_t to, double bytes, std::vector<JobId> deps) {
    TransferJob j{board.create(), from, to, bytes, std::move(deps), -1, 0, "weights"};
    j.step = step;
    j.layer = static_cast<int32_t>(layer);
    const JobId id = j.id;
    stream(from, to).submit(std::move(j));
    return id;
  };
  if (staging) *staging = kNoJob;
  if (from_dram > 0) {
    // Pageable weights reach the GPU through a pinned buffer the CPU fills first.
    std::vector<JobId> deps;
    if (!plan_.pin_weights) {
      const size_t cpu = static_cast<size_t>(homes_.cpu);
      deps.push_back(pin_copy(from_dram, step, layer, board, stream(cpu, cpu)));
      if (staging) *staging = deps.back();
    }
    last = job(dram, gpu, from_dram, std::move(deps));
    to_gpu_ += from_dram;
  }
  if (from_disk > 0) {
    // Disk to DRAM, then on to the GPU, as FlexGen's disk tensors do.
    const JobId read = job(static_cast<size_t>(homes_.disk), dram, from_disk, {});
    last = job(dram, gpu, from_disk, {read});
    from_disk_ += from_disk;
    to_gpu_ += from_disk;
  }
  ++loads_;
  return last;
}

JobId WeightStream::issue(uint32_t layer, int32_t step, bool more_after, JobBoard& board,
                          const std::function<Stream&(size_t, size_t)>& stream) {
  if (!streams()) return kNoJob;
  if (!plan_.overlap) return load(layer, step, board, stream);
  if (next_ == kNoJob) next_ = load(layer, step, board, stream);
  const JobId mine = next_;
  next_ = kNoJob;
  next_staging_ = kNoJob;
  if (more_after) next_ = load((layer + 1) % layers_, layer + 1 == layers_ ? step + 1 : step, board, stream, &next_staging_);
  return mine;
}

JobId WeightStream::pin_copy(double bytes, int32_t step, uint32_t layer, JobBoard& board, Stream& cpu_stream) {
  const double sec = 2.0 * bytes / cpu_mem_Bps;
  TransferJob j{board.create(), 0, 0, 0, {}, homes_.cpu, sec, "pin"};
  j.step = step;
  j.layer = static_cast<int32_t>(layer);
  const JobId id = j.id;
  cpu_stream.submit(std::move(j));
  pin_copy_s += sec;
  return id;
}

void WeightStream::await(JobId j, JobBoard& board) {
  if (board.done(j)) return;
  const double t0 = sg4::Engine::get_clock();
  board.wait(j);
  wait_s += sg4::Engine::get_clock() - t0;
}

json WeightStream::metrics() const {
  return json{{"gpu_bytes", gpu_bytes()},
              {"dram_bytes", dram_bytes()},
              {"disk_bytes", disk_bytes()},
              {"gpu_staging_bytes", gpu_staging_bytes()},
              {"bytes_to_gpu", to_gpu_},
              {"bytes_from_disk", from_disk_},
              {"loads", loads_},
              {"gpu_batches", plan_.gpu_batches},
              {"wait_s", wait_s},
              {"cpu_attention_s", cpu_attention_s},
              {"pin_copy_s", pin_copy_s},
              {"hidden_wait_s", hidden_wait_s}};
}

}  // namespace kvtier
