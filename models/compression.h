// Compression and quantization codecs for KV on its way down the tiers: the
// ratio each achieves and the throughput of its engine. A transfer of n bytes
// through a codec moves n / ratio bytes and costs compress time on the
// sending side and decompress time on the receiving side.
//
// Built-in figures (each with its source in codec_table()):
//   zstd -1, lz4: single-core speeds from their READMEs (Silesia corpus); on
//     FP16 KV the LZ family finds little to remove (mantissa bits look random),
//     so the ratios are our assumption for FP16 tensors, not Silesia's.
//     (The AIOS seed's "60% less data" with Zstd would be ratio 2.5; we do not
//     adopt it.)
//   zstd, lz4 on the GPU (nvCOMP): LZ4 at the nvCOMP README's A100 figure
//     ("up to 100 GB/s compression and decompression"); Zstd has no
//     published figure we found, so it is assumed from nvCOMP's own ranking
//     of its formats (Zstd a step below LZ4 in both directions).
//   int8, int4: FP16 -> 8 / 4 bits with one FP16 scale and zero per group of
//     64 (KIVI/FlexGen-style group-wise quantization), run on the GPU at
//     memory speed, so their throughput is a fraction of GPU bandwidth.
#pragma once

#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

struct Codec {
  std::string name;
  double ratio = 1;           // input bytes / output bytes
  double compress_Bps = 0;    // input bytes per second, per engine (one core, or one GPU)
  double decompress_Bps = 0;  // output (restored) bytes per second, per engine
  bool lossy = false;
  bool on_gpu = false;        // runs as a GPU kernel rather than on CPU cores
  std::string source;
  // The same format run as GPU kernels (nvCOMP), for a lossless codec that
  // can run on either side: throughput of the whole GPU, over uncompressed
  // bytes; 0 = no GPU implementation known.
  double gpu_compress_Bps = 0;
  double gpu_decompress_Bps = 0;
  std::string gpu_source;
};

// The built-in table: none, zstd, lz4, int8, int4.
const std::vector<Codec>& codec_table();
// A built-in codec by name; ConfigError at `where` listing the known names.
const Codec& find_codec(const std::string& name, const std::string& where);
// {"name": "zstd", "ratio": ..., "compress_GBps": ..., ...}: the built-in with
// overrides; validates in place (defaults filled), ConfigError at `where`.
Codec parse_codec(json& obj, const std::string& where);
ParamList codec_params();

// Bits per value after group-wise quantization to `bits` with FP16 scale and
// zero point per `group` values, and the resulting ratio against FP16.
double quantized_ratio(int bits, int group = 64);

// Time to compress `bytes` of input with `engines` engines in parallel (CPU
// cores for zstd/lz4, 1 for a GPU codec), and to decompress back to `bytes`.
double compress_s(const Codec& c, double bytes, int engines = 1);
double decompress_s(const Codec& c, double bytes, int engines = 1);
double compressed_bytes(const Codec& c, double bytes);

}  // namespace kvtier
