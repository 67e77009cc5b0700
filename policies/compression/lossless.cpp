// Lossless compression of the KV stored in the lower tiers: Zstd (InCloud
// AIOS, seed 004) and LZ4 (MatKV writes its chunks' KV with LZ4, seed 001).
// The codecs' figures come from models/compression.h (single-core CPU speeds
// from their READMEs, GPU speeds from nvCOMP; ratios for FP16 KV, whose
// mantissa bits compress poorly, are assumptions). The AIOS seed claims "60%
// less data" with Zstd, i.e. ratio 2.5: unverified, so not the default; a
// preset that reproduces the claim sets "ratio": 2.5 and says so. Keys and
// values share the ratio.
//
// `where` says which processor runs the codec, and so where the data is
// uncompressed (sim/platform/transfer_planner.cpp). On the CPU ("cpu"), the cores
// read the compressed bytes out of host memory (after a drive has read them
// there) and write the restored bytes into a staging buffer, from which they
// cross to the GPU uncompressed; `threads` of them work at once, bounded by
// the cpu device's cores. On the GPU ("gpu", nvCOMP's kernels, as AIOS runs
// them), the compressed bytes cross PCIe and the GPU restores them in a
// kernel next to the attention kernel that reads them.
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
            str("where", "cpu",
                "the processor running the codec: cpu (threads in host memory; PCIe carries restored bytes) or gpu "
                "(nvCOMP kernels beside attention; PCIe carries compressed bytes)",
                {"cpu", "gpu"}),
            num("compress_GBps", 0.0,
                "compression throughput over uncompressed bytes, GB/s: per thread on the cpu, of the whole GPU on the "
                "gpu; 0 = built-in (cpu " + figure(c.compress_Bps / 1e9) + ", gpu " + figure(c.gpu_compress_Bps / 1e9) + ")",
                0.0),
            num("decompress_GBps", 0.0,
                "decompression throughput over uncompressed bytes, GB/s: per thread on the cpu, of the whole GPU on "
                "the gpu; 0 = built-in (cpu " + figure(c.decompress_Bps / 1e9) + ", gpu " +
                    figure(c.gpu_decompress_Bps / 1e9) + ")",
                0.0),
            integer("threads", 4,
                    "CPU threads running the codec at once (where cpu), each on its own core up to the cpu device's "
                    "cores; ignored on the gpu",
                    1, 1024),
            integer("from_tier", 1, "tiers with this index and below (slower) store compressed; 1 = all but the GPU", 0, 253)};
  }
  LosslessCompression(const json& p, const char* codec) : from_(TierId(get_int(p, "from_tier"))) {
    const std::string where = std::string("compression ") + codec;
    const Codec& c = find_codec(codec, where);
    double r = get_num(p, "ratio");
    if (r > 0 && r < 1) throw ConfigError(where + ": ratio " + std::to_string(r) + " would expand the data; expected >= 1");
    ratio_ = r > 0 ? r : c.ratio;
    gpu_ = p.at("where").get<std::string>() == "gpu";
    const double cb = gpu_ ? c.gpu_compress_Bps : c.compress_Bps;
    const double db = gpu_ ? c.gpu_decompress_Bps : c.decompress_Bps;
    // On the CPU the rates are per thread and the spec carries those of all
    // `threads` together; the engine bounds them by the cores it has.
    threads_ = gpu_ ? 0 : static_cast<uint32_t>(get_int(p, "threads"));
    const double engines = gpu_ ? 1.0 : double(threads_);
    c_ = (get_num(p, "compress_GBps") > 0 ? get_num(p, "compress_GBps") * 1e9 : cb) * engines;
    d_ = (get_num(p, "decompress_GBps") > 0 ? get_num(p, "decompress_GBps") * 1e9 : db) * engines;
  }
  CompressionSpec spec(TierId t, uint32_t) const override {
    CompressionSpec s;
    if (t < from_) return s;
    s.key_ratio = s.value_ratio = ratio_;
    s.compress_Bps = c_;
    s.decompress_Bps = d_;
    s.on_gpu = gpu_;
    s.threads = threads_;
    return s;
  }

 private:
  double ratio_ = 1, c_ = 0, d_ = 0;
  bool gpu_ = false;
  uint32_t threads_ = 0;
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
                "lossless Zstd of the KV in lower tiers, on CPU threads or GPU kernels (AIOS); codec figures from "
                "models/compression.h");
KVTIER_REGISTER(CompressionPolicy, Lz4Compression, "lz4",
                "lossless LZ4 of the KV in lower tiers, on CPU threads or GPU kernels (MatKV); codec figures from "
                "models/compression.h");

}  // namespace kvtier
