#include "models/compression.h"

#include <algorithm>

namespace kvtier {

double quantized_ratio(int bits, int group) { return 16.0 / (bits + 2.0 * 16.0 / group); }

const std::vector<Codec>& codec_table() {
  static const std::vector<Codec> t = {
      {"none", 1.0, 0, 0, false, false, "identity", 0, 0, ""},
      {"zstd", 1.25, 510e6, 1550e6, false, false,
       "speeds: zstd README, zstd 1.5.x level 1 on Silesia (Core i7-9700K, one core); ratio: assumed for FP16 KV",
       25e9, 50e9,
       "assumed: nvCOMP publishes no Zstd figure we found; its algorithm selection guide "
       "(docs.nvidia.com/cuda/nvcomp/algorithm_selection.html) ranks Zstd a step below LZ4 (compression Low vs "
       "Moderate, decompression Moderate vs High), so a quarter and a half of LZ4's 100 GB/s on an A100"},
      {"lz4", 1.1, 780e6, 4970e6, false, false,
       "speeds: lz4 README, LZ4 default on Silesia (Core i7-9700K, one core); ratio: assumed for FP16 KV", 100e9, 100e9,
       "nvCOMP 2.0 README (github.com/NVIDIA/nvcomp): Snappy and LZ4 'up to 100 GB/s compression and decompression "
       "throughput depending on the dataset', measured on an A100 80GB"},
      {"int8", quantized_ratio(8), 500e9, 500e9, true, true,
       "ratio: 8 bits + FP16 scale/zero per 64 values; speed: assumed memory-bound GPU kernel (~half an RTX 4090's "
       "1008 GB/s, read + write)",
       0, 0, ""},
      {"int4", quantized_ratio(4), 500e9, 500e9, true, true,
       "ratio: 4 bits + FP16 scale/zero per 64 values (FlexGen's 4-bit group-wise scheme uses group 64); speed: "
       "assumed memory-bound GPU kernel",
       0, 0, ""},
  };
  return t;
}

const Codec& find_codec(const std::string& name, const std::string& where) {
  for (const auto& c : codec_table())
    if (c.name == name) return c;
  std::string msg = where + ": unknown codec '" + name + "'; known:";
  for (const auto& c : codec_table()) msg += " " + c.name;
  throw ConfigError(msg);
}

ParamList codec_params() {
  return {
      str("name", nullptr, "codec: none, zstd, lz4, int8, int4"),
      num("ratio", 0.0, "input / output bytes (0 = the built-in figure)", 0),
      num("compress_GBps", 0.0, "compression throughput per engine, GB/s of input (0 = built-in)", 0),
      num("decompress_GBps", 0.0, "decompression throughput per engine, GB/s of output (0 = built-in)", 0),
  };
}

Codec parse_codec(json& obj, const std::string& where) {
  if (obj.is_string()) obj = json{{"name", obj.get<std::string>()}};
  resolve_params(obj, codec_params(), where);
  Codec c = find_codec(obj["name"].get<std::string>(), where + ".name");
  double r = get_num(obj, "ratio");
  if (r > 0) {
    if (r < 1) throw ConfigError(where + ".ratio: " + std::to_string(r) + " would expand the data; expected >= 1");
    c.ratio = r;
  }
  if (get_num(obj, "compress_GBps") > 0) c.compress_Bps = get_num(obj, "compress_GBps") * 1e9;
  if (get_num(obj, "decompress_GBps") > 0) c.decompress_Bps = get_num(obj, "decompress_GBps") * 1e9;
  if (obj.contains("source") && obj["source"].is_string()) c.source = obj["source"].get<std::string>();
  return c;
}

double compress_s(const Codec& c, double bytes, int engines) {
  return c.compress_Bps > 0 ? bytes / (c.compress_Bps * std::max(engines, 1)) : 0;
}
double decompress_s(const Codec& c, double bytes, int engines) {
  return c.decompress_Bps > 0 ? bytes / (c.decompress_Bps * std::max(engines, 1)) : 0;
}
double compressed_bytes(const Codec& c, double bytes) { return bytes / c.ratio; }

}  // namespace kvtier
