// Lossless compression of the KV stored in the lower tiers, on CPU cores:
// Zstd (InCloud AIOS, seed 004) and LZ4 (MatKV writes its chunks' KV with
// LZ4, seed 001). The codecs' figures come from models/compression.h
// (single-core speeds from their READMEs; ratios for FP16 KV, whose
// mantissa bits compress poorly, are assumptions). The AIOS seed claims
// "60% less data" with Zstd, i.e. ratio 2.5: unverified, so not the default;
// a preset that reproduces the claim sets "ratio": 2.5 and says so. Keys and
// values share the ratio. Where the data meets the GPU the CPU works in host
// memory: a block read from storage lands in a host buffer compressed and
// crosses to the GPU uncompressed (sim/transfer_planner.cpp).
#include <cstdio>

#include "models/compression.h"
#include "policies/policy.h"

namespace kvtier {

class LosslessCompression : public CompressionPolicy {
 public:
  static ParamList params(const char* codec) {
    const Codec& c = find_codec(codec, std::string("compression ") + codec);
    const std::string name(codec);
    auto figure = [](double v) {
      char b[32];
      std::snprintf(b, sizeof b, "%g", v);
      return std::string(b);
    };
    return {num("ratio", 0.0,
                "uncompressed / stored bytes (>= 1); 0 = the built-in " + name + " figure of models/compression.h (" +
                    figure(c.ratio) + ", assumed for FP16 KV)" +
                    (name == "zstd" ? "; the AIOS seed's '60% less data' is 2.5" : ""),
                0.0),
            num("compress_GBps", 0.0,
                "compression throughput per core over uncompressed bytes, GB/s; 0 = built-in (" +
                    figure(c.compress_Bps / 1e9) + ")",
                0.0),
            num("decompress_GBps", 0.0,
                "decompression throughput per core over uncompressed bytes, GB/s; 0 = built-in (" +
                    figure(c.decompress_Bps / 1e9) + ")",
                0.0),
            integer("threads", 4, "CPU cores running the codec in parallel", 1, 1024),
            integer("from_tier", 1, "tiers with this index and below (slower) store compressed; 1 = all but the GPU", 0, 253)};
  }
  LosslessCompression(const json& p, const char* codec) : from_(TierId(get_int(p, "from_tier"))) {
    const std::string where = std::string("compression ") + codec;
    const Codec& c = find_codec(codec, where);
    double r = get_num(p, "ratio");
    if (r > 0 && r < 1) throw ConfigError(where + ": ratio " + std::to_string(r) + " would expand the data; expected >= 1");
    ratio_ = r > 0 ? r : c.ratio;
    double threads = double(get_int(p, "threads"));
    c_ = (get_num(p, "compress_GBps") > 0 ? get_num(p, "compress_GBps") * 1e9 : c.compress_Bps) * threads;
    d_ = (get_num(p, "decompress_GBps") > 0 ? get_num(p, "decompress_GBps") * 1e9 : c.decompress_Bps) * threads;
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
  double ratio_ = 1, c_ = 0, d_ = 0;
  TierId from_;
};

struct ZstdCompression : LosslessCompression {
  static ParamList params() { return LosslessCompression::params("zstd"); }
  explicit ZstdCompression(const json& p) : LosslessCompression(p, "zstd") {}
};
struct Lz4Compression : LosslessCompression {
  static ParamList params() { return LosslessCompression::params("lz4"); }
  explicit Lz4Compression(const json& p) : LosslessCompression(p, "lz4") {}
};
KVTIER_REGISTER(CompressionPolicy, ZstdCompression, "zstd",
                "lossless Zstd of the KV in lower tiers on CPU cores (AIOS); codec figures from models/compression.h");
KVTIER_REGISTER(CompressionPolicy, Lz4Compression, "lz4",
                "lossless LZ4 of the KV in lower tiers on CPU cores (MatKV); codec figures from models/compression.h");

}  // namespace kvtier
