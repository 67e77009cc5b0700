// Group-wise 4-bit quantization as FlexGen runs it on the GPU (--compress-weight,
// --compress-cache): per group of 64 values an FP16 minimum and scale, the
// values packed two to a byte. Its cost is memory traffic: FlexGen's
// compression.py runs it as a chain of element-wise tensor operations, each
// one a full pass over its input and output, so (de)quantizing costs a fixed
// number of bytes moved per FP16 byte, at the GPU's memory bandwidth.
//
// Passes counted from FlexGen's flexgen/compression.py, per FP16 byte of the
// uncompressed tensor (N elements = 2N bytes; packed data N/2 bytes):
//   decompress: shift and mask of the packed bytes (read N/2, write N/2 each),
//     their stores into the FP16 halves (read N/2, write N each), div_ by the
//     scale (read 2N, write 2N), add_ of the minimum (read 2N, write 2N):
//     13N bytes = 6.5 per FP16 byte;
//   compress: min and max over groups (read 2N each), subtract, multiply,
//     clamp, round (read 2N, write 2N each), cast to uint8 (read 2N, write N),
//     pack (read N, write N/2): 24.5N bytes = 12.25 per FP16 byte.
#pragma once

#include "models/compression.h"

namespace kvtier {

struct GroupQuant {
  int bits = 4;
  int group = 64;
  double decompress_bytes_per_byte = 6.5;
  double compress_bytes_per_byte = 12.25;

  // FP16 bytes / stored bytes (scale and minimum per group included).
  double ratio() const { return quantized_ratio(bits, group); }
  // Seconds to restore `fp16_bytes` of FP16 data on a GPU of `mem_Bps`.
  double decompress_s(double fp16_bytes, double mem_Bps) const {
    return mem_Bps > 0 ? fp16_bytes * decompress_bytes_per_byte / mem_Bps : 0.0;
  }
  // Seconds to quantize `fp16_bytes` of FP16 data.
  double compress_s(double fp16_bytes, double mem_Bps) const {
    return mem_Bps > 0 ? fp16_bytes * compress_bytes_per_byte / mem_Bps : 0.0;
  }
  // Throughputs over FP16 bytes, as the compression policies take them.
  double decompress_Bps(double mem_Bps) const { return mem_Bps / decompress_bytes_per_byte; }
  double compress_Bps(double mem_Bps) const { return mem_Bps / compress_bytes_per_byte; }
};

}  // namespace kvtier
