// Per-layer key quantization (HiFC, seed 002): keys stored in `bits` bits
// per element in configurable layer ranges (default, as the seed: 8 bit in
// layers 1-8, 4 bit in 9-24, FP16 in 25-32), values in value_bits (16 =
// FP16, unchanged). Layers are numbered from 1 in `ranges`, as in the seed
// (engine layer index + 1); layers no range covers stay FP16.
//
// Ratio (uncompressed / stored): 16 / bits, plus, with group > 0, one FP16
// scale and zero point per `group` values (models/compression.h's
// quantized_ratio, the scheme of its int8/int4 codecs): 8 bit at group 64 is
// 16/8.5. group 0 gives the bare 16/bits. (De)quantization runs on the GPU at
// the int8 codec's throughput of models/compression.h unless set. The
// attention-quality cost of the lower precision is not modelled.
#include <string>

#include "models/compression.h"
#include "policies/policy.h"

namespace kvtier {

class QuantCompression : public CompressionPolicy {
 public:
  static ParamList params() {
    return {any("ranges",
                json::array({json{{"from_layer", 1}, {"to_layer", 8}, {"bits", 8}},
                             json{{"from_layer", 9}, {"to_layer", 24}, {"bits", 4}},
                             json{{"from_layer", 25}, {"to_layer", 32}, {"bits", 16}}}),
                "key precision per layer range: [{from_layer, to_layer, bits}], layers from 1, inclusive; "
                "uncovered layers stay 16 bit",
                ParamType::Array),
            integer("value_bits", 16, "bits per value element in every layer (16 = FP16, not quantized)", 1, 16),
            integer("group", 64, "values per FP16 scale + zero point (their overhead counts in the ratio); 0 = none", 0),
            num("quant_GBps", 0.0, "GPU quantization throughput over FP16 bytes, GB/s; 0 = the int8 codec's (500)", 0.0),
            num("dequant_GBps", 0.0, "GPU dequantization throughput over FP16 bytes, GB/s; 0 = the int8 codec's (500)", 0.0),
            integer("from_tier", 0, "tiers with this index and below store quantized; 0 = every tier", 0, 253)};
  }
  explicit QuantCompression(const json& p) : group_(int(get_int(p, "group"))), from_(TierId(get_int(p, "from_tier"))) {
    const Codec& c = find_codec("int8", "compression quant");
    q_ = get_num(p, "quant_GBps") > 0 ? get_num(p, "quant_GBps") * 1e9 : c.compress_Bps;
    dq_ = get_num(p, "dequant_GBps") > 0 ? get_num(p, "dequant_GBps") * 1e9 : c.decompress_Bps;
    value_ratio_ = ratio(int(get_int(p, "value_bits")));
    const json& r = p.at("ranges");
    for (size_t i = 0; i < r.size(); ++i) {
      std::string where = "compression quant: ranges[" + std::to_string(i) + "]";
      const json& e = r[i];
      if (!e.is_object() || !e.contains("from_layer") || !e.contains("to_layer") || !e.contains("bits") ||
          !e["from_layer"].is_number_integer() || !e["to_layer"].is_number_integer() || !e["bits"].is_number_integer())
        throw ConfigError(where + ": expected {\"from_layer\": int, \"to_layer\": int, \"bits\": int}, got " + e.dump());
      long long a = e["from_layer"], b = e["to_layer"], bits = e["bits"];
      if (a < 1 || b < a || b > 100000) throw ConfigError(where + ": need 1 <= from_layer <= to_layer, got " + e.dump());
      if (bits < 1 || bits > 16) throw ConfigError(where + ": bits must be in 1..16, got " + std::to_string(bits));
      if (size_t(b) > key_bits_.size()) key_bits_.resize(size_t(b), 16);
      for (long long l = a; l <= b; ++l) key_bits_[size_t(l - 1)] = int(bits);
    }
    for (int bits : key_bits_) key_ratio_.push_back(ratio(bits));
  }
  CompressionSpec spec(TierId t, uint32_t layer) const override {
    CompressionSpec s;
    if (t < from_) return s;
    s.key_ratio = layer < key_ratio_.size() ? key_ratio_[layer] : 1.0;
    s.value_ratio = value_ratio_;
    if (s.key_ratio == 1.0 && s.value_ratio == 1.0) return s;  // FP16 as is: no kernel
    s.compress_Bps = q_;
    s.decompress_Bps = dq_;
    s.on_gpu = true;
    return s;
  }

 private:
  double ratio(int bits) const { return bits >= 16 ? 1.0 : (group_ > 0 ? quantized_ratio(bits, group_) : 16.0 / bits); }
  std::vector<int> key_bits_;      // by 0-based layer
  std::vector<double> key_ratio_;  // by 0-based layer
  double value_ratio_ = 1;
  int group_;
  double q_ = 0, dq_ = 0;
  TierId from_;
};
KVTIER_REGISTER(CompressionPolicy, QuantCompression, "quant",
                "per-layer key quantization (HiFC: 8 bit layers 1-8, 4 bit 9-24, FP16 25-32); values FP16 unless set");

}  // namespace kvtier
