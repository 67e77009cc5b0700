// Lossless Zstd compression of the KV stored in the lower tiers, on the CPU
// (InCloud AIOS, seed 004: "60% less data", i.e. ratio 0.4 — a claim, not a
// measurement: raw FP16 activations usually compress far less with a
// general-purpose codec, about 0.8-0.9; set `ratio` from a measurement of
// your own KV). Keys and values share the ratio. Throughputs are aggregate
// over the threads the system gives the codec (zstd level 1 runs at roughly
// 0.5 GB/s compressing and 1.5 GB/s decompressing per core, per zstd's own
// README benchmarks).
#include "policies/policy.h"

namespace kvtier {

class ZstdCompression : public CompressionPolicy {
 public:
  static ParamList params() {
    return {num("ratio", 0.4, "stored bytes / FP16 bytes (AIOS claim: 0.4, i.e. 60% less data)", 0.0, 1.0),
            positive("compress_GBps", 2.0, "compression throughput over uncompressed bytes, all codec threads, GB/s"),
            positive("decompress_GBps", 6.0, "decompression throughput over uncompressed bytes, all codec threads, GB/s"),
            integer("from_tier", 1, "tiers with this index and below (slower) store compressed; 1 = all but the GPU", 0, 253)};
  }
  explicit ZstdCompression(const json& p)
      : ratio_(get_num(p, "ratio")),
        c_(get_num(p, "compress_GBps") * 1e9),
        d_(get_num(p, "decompress_GBps") * 1e9),
        from_(TierId(get_int(p, "from_tier"))) {
    if (ratio_ <= 0) throw ConfigError("compression zstd: ratio must be > 0");
  }
  CompressionSpec spec(TierId t, uint32_t) const override {
    CompressionSpec s;
    if (t < from_) return s;
    s.key_ratio = s.value_ratio = ratio_;
    s.compress_Bps = c_;
    s.decompress_Bps = d_;
    s.on_gpu = false;
    return s;
  }

 private:
  double ratio_, c_, d_;
  TierId from_;
};
KVTIER_REGISTER(CompressionPolicy, ZstdCompression, "zstd",
                "lossless Zstd of the KV in lower tiers on the CPU (AIOS); ratio and throughputs configurable");

}  // namespace kvtier
