#include "cuda_validate/int_scoring.h"

#include <immintrin.h>

#include <vector>

namespace kvtier::host {

Isa best_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) return Isa::Avx512Vnni;
  if (__builtin_cpu_supports("avx2")) return Isa::Avx2;
  if (__builtin_cpu_supports("ssse3")) return Isa::Ssse3;
  return Isa::Scalar;
}

std::string isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512Vnni: return "avx512_vnni";
    case Isa::Avx2: return "avx2";
    case Isa::Ssse3: return "ssse3";
    default: return "scalar";
  }
}

namespace {

void int8_scalar(const int8_t* q, const int8_t* k, size_t rows, size_t dim, int32_t* out) {
  for (size_t r = 0; r < rows; ++r, k += dim) {
    int32_t s = 0;
    for (size_t d = 0; d < dim; ++d) s += int32_t(q[d]) * int32_t(k[d]);
    out[r] = s;
  }
}

void int4_scalar(const int8_t* q, const uint8_t* k, size_t rows, size_t dim, int32_t* out) {
  const size_t half = dim / 2;
  for (size_t r = 0; r < rows; ++r, k += half) {
    int32_t s = 0;
    for (size_t j = 0; j < half; ++j) {
      s += int32_t(q[2 * j]) * (int32_t(k[j] & 15) - 8);
      s += int32_t(q[2 * j + 1]) * (int32_t(k[j] >> 4) - 8);
    }
    out[r] = s;
  }
}

// maddubs takes unsigned x signed bytes: |q| x (k with q's sign) is q x k.
__attribute__((target("ssse3"))) void int8_ssse3(const int8_t* q, const int8_t* k, size_t rows, size_t dim,
                                                 int32_t* out) {
  const __m128i ones = _mm_set1_epi16(1);
  for (size_t r = 0; r < rows; ++r, k += dim) {
    __m128i acc = _mm_setzero_si128();
    for (size_t d = 0; d < dim; d += 16) {
      const __m128i qv = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + d));
      const __m128i kv = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k + d));
      const __m128i p = _mm_maddubs_epi16(_mm_abs_epi8(qv), _mm_sign_epi8(kv, qv));
      acc = _mm_add_epi32(acc, _mm_madd_epi16(p, ones));
    }
    acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0x4e));
    acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0xb1));
    out[r] = _mm_cvtsi128_si32(acc);
  }
}

__attribute__((target("avx2"))) void int8_avx2(const int8_t* q, const int8_t* k, size_t rows, size_t dim,
                                               int32_t* out) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (size_t r = 0; r < rows; ++r, k += dim) {
    __m256i acc = _mm256_setzero_si256();
    for (size_t d = 0; d < dim; d += 32) {
      const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + d));
      const __m256i kv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + d));
      const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(qv), _mm256_sign_epi8(kv, qv));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
    }
    __m128i a = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0x4e));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0xb1));
    out[r] = _mm_cvtsi128_si32(a);
  }
}

__attribute__((target("avx512f"))) int32_t hsum512(__m512i v) {
  alignas(64) int32_t t[16];
  _mm512_store_si512(t, v);
  int32_t s = 0;
  for (int32_t x : t) s += x;
  return s;
}

// dpbusd takes unsigned x signed bytes too: with k + 128 as the unsigned
// side, sum (k + 128) q = q.k + 128 sum q, a constant per query.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void int8_vnni(const int8_t* q, const int8_t* k, size_t rows,
                                                                       size_t dim, int32_t* out) {
  int32_t qsum = 0;
  for (size_t d = 0; d < dim; ++d) qsum += q[d];
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (size_t r = 0; r < rows; ++r, k += dim) {
    __m512i acc = _mm512_setzero_si512();
    for (size_t d = 0; d < dim; d += 64) {
      const __m512i qv = _mm512_loadu_si512(q + d);
      const __m512i kv = _mm512_xor_si512(_mm512_loadu_si512(k + d), flip);
      acc = _mm512_dpbusd_epi32(acc, kv, qv);
    }
    out[r] = hsum512(acc) - 128 * qsum;
  }
}

// INT4: nibbles are already unsigned (value + 8): sum nib x q - 8 sum q. The
// query is split into its even and odd elements to match the nibbles.
__attribute__((target("ssse3"))) void int4_ssse3(const int8_t* qe, const int8_t* qo, int32_t qsum, const uint8_t* k,
                                                 size_t rows, size_t half, int32_t* out) {
  const __m128i ones = _mm_set1_epi16(1), lo = _mm_set1_epi8(15);
  for (size_t r = 0; r < rows; ++r, k += half) {
    __m128i acc = _mm_setzero_si128();
    for (size_t j = 0; j < half; j += 16) {
      const __m128i kv = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k + j));
      const __m128i kl = _mm_and_si128(kv, lo), kh = _mm_and_si128(_mm_srli_epi16(kv, 4), lo);
      const __m128i pe = _mm_maddubs_epi16(kl, _mm_loadu_si128(reinterpret_cast<const __m128i*>(qe + j)));
      const __m128i po = _mm_maddubs_epi16(kh, _mm_loadu_si128(reinterpret_cast<const __m128i*>(qo + j)));
      acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_add_epi16(pe, po), ones));
    }
    acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0x4e));
    acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0xb1));
    out[r] = _mm_cvtsi128_si32(acc) - 8 * qsum;
  }
}

__attribute__((target("avx2"))) void int4_avx2(const int8_t* qe, const int8_t* qo, int32_t qsum, const uint8_t* k,
                                               size_t rows, size_t half, int32_t* out) {
  const __m256i ones = _mm256_set1_epi16(1), lo = _mm256_set1_epi8(15);
  for (size_t r = 0; r < rows; ++r, k += half) {
    __m256i acc = _mm256_setzero_si256();
    for (size_t j = 0; j < half; j += 32) {
      const __m256i kv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + j));
      const __m256i kl = _mm256_and_si256(kv, lo), kh = _mm256_and_si256(_mm256_srli_epi16(kv, 4), lo);
      const __m256i pe = _mm256_maddubs_epi16(kl, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qe + j)));
      const __m256i po = _mm256_maddubs_epi16(kh, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qo + j)));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_add_epi16(pe, po), ones));
    }
    __m128i a = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0x4e));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0xb1));
    out[r] = _mm_cvtsi128_si32(a) - 8 * qsum;
  }
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void int4_vnni(const int8_t* qe, const int8_t* qo, int32_t qsum,
                                                                       const uint8_t* k, size_t rows, size_t half,
                                                                       int32_t* out) {
  const __m512i lo = _mm512_set1_epi8(15);
  for (size_t r = 0; r < rows; ++r, k += half) {
    __m512i acc = _mm512_setzero_si512();
    for (size_t j = 0; j < half; j += 64) {
      const __m512i kv = _mm512_loadu_si512(k + j);
      acc = _mm512_dpbusd_epi32(acc, _mm512_and_si512(kv, lo), _mm512_loadu_si512(qe + j));
      acc = _mm512_dpbusd_epi32(acc, _mm512_and_si512(_mm512_srli_epi16(kv, 4), lo), _mm512_loadu_si512(qo + j));
    }
    out[r] = hsum512(acc) - 8 * qsum;
  }
}

size_t lanes(Isa isa) { return isa == Isa::Avx512Vnni ? 64 : isa == Isa::Avx2 ? 32 : 16; }

}  // namespace

void score_int8(Isa isa, const int8_t* q, const int8_t* keys, size_t rows, size_t dim, int32_t* out) {
  if (isa == Isa::Scalar || dim % lanes(isa) != 0) return int8_scalar(q, keys, rows, dim, out);
  if (isa == Isa::Avx512Vnni) return int8_vnni(q, keys, rows, dim, out);
  if (isa == Isa::Avx2) return int8_avx2(q, keys, rows, dim, out);
  return int8_ssse3(q, keys, rows, dim, out);
}

void score_int4(Isa isa, const int8_t* q, const uint8_t* keys, size_t rows, size_t dim, int32_t* out) {
  const size_t half = dim / 2;
  if (isa == Isa::Scalar || half % lanes(isa) != 0 || dim % 2) return int4_scalar(q, keys, rows, dim, out);
  // Per call: a query is scored against many rows, so splitting it is noise.
  std::vector<int8_t> qe(half), qo(half);
  int32_t qsum = 0;
  for (size_t j = 0; j < half; ++j) {
    qe[j] = q[2 * j];
    qo[j] = q[2 * j + 1];
    qsum += q[2 * j] + q[2 * j + 1];
  }
  if (isa == Isa::Avx512Vnni) return int4_vnni(qe.data(), qo.data(), qsum, keys, rows, half, out);
  if (isa == Isa::Avx2) return int4_avx2(qe.data(), qo.data(), qsum, keys, rows, half, out);
  return int4_ssse3(qe.data(), qo.data(), qsum, keys, rows, half, out);
}

}  // namespace kvtier::host
