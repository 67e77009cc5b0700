// Importance scoring on the CPU: q.K dot products of one query against rows
// of quantized keys (HillInfer's APP scores keys at INT8 or INT4 on the host).
// One implementation per vector extension, picked at run time from what the
// CPU has; the scalar one is the reference the others are checked against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvtier::host {

enum class Isa { Scalar, Ssse3, Avx2, Avx512Vnni };
Isa best_isa();
std::string isa_name(Isa isa);

// INT8 keys: rows of `dim` signed bytes in -127..127 (symmetric quantization;
// the SSSE3/AVX2 paths negate keys, which -128 would overflow), q likewise;
// out[r] = sum_d q[d] * k[r][d].
void score_int8(Isa isa, const int8_t* q, const int8_t* keys, size_t rows, size_t dim, int32_t* out);

// INT4 keys: rows of dim/2 bytes, element 2j in the low nibble of byte j and
// 2j+1 in the high one, each stored as value + 8 (0..15 for -8..7).
void score_int4(Isa isa, const int8_t* q, const uint8_t* keys, size_t rows, size_t dim, int32_t* out);

}  // namespace kvtier::host
