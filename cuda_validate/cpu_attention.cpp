#include "cuda_validate/cpu_attention.h"

#include <cpuid.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace kvtier::host {

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t x;
  if (exp == 0) {
    if (man == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400));
      x = sign | (uint32_t(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000 | (man << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

bool has_f16c() {
  __builtin_cpu_init();
  // F16C from CPUID leaf 1 (ECX bit 29): clang before 16 rejects "f16c" in __builtin_cpu_supports.
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  return __builtin_cpu_supports("avx") && f16c && __builtin_cpu_supports("fma");
}

// Running softmax state of one query head.
struct Head {
  float m = -INFINITY, l = 0;
};

void attend_scalar(const AttentionShape& s, const float* q, const uint16_t* const* blocks, const int* tokens, size_t n,
                   float* out) {
  const int D = s.head_dim, G = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const size_t tok = size_t(2) * s.kv_heads * D, vo = size_t(s.kv_heads) * D;  // halves per token; V's offset
  std::vector<Head> st(s.heads);
  std::fill(out, out + size_t(s.heads) * D, 0.f);
  for (size_t b = 0; b < n; ++b) {
    const uint16_t* K = blocks[b];
    const uint16_t* V = blocks[b] + vo;
    for (int t = 0; t < tokens[b]; ++t)
      for (int h = 0; h < s.heads; ++h) {
        const size_t off = size_t(t) * tok + size_t(h / G) * D;
        float dot = 0;
        for (int d = 0; d < D; ++d) dot += q[h * D + d] * half_to_float(K[off + d]);
        dot *= scale;
        Head& x = st[h];
        const float m = std::max(x.m, dot), c = std::exp(x.m - m), p = std::exp(dot - m);
        x.l = x.l * c + p;
        x.m = m;
        float* o = out + size_t(h) * D;
        for (int d = 0; d < D; ++d) o[d] = o[d] * c + p * half_to_float(V[off + d]);
      }
  }
  for (int h = 0; h < s.heads; ++h)
    for (int d = 0; d < D; ++d) out[size_t(h) * D + d] /= st[h].l > 0 ? st[h].l : 1.f;
}

__attribute__((target("avx,f16c,fma"))) void attend_f16c(const AttentionShape& s, const float* q,
                                                         const uint16_t* const* blocks, const int* tokens, size_t n,
                                                         float* out) {
  const int D = s.head_dim, G = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const size_t tok = size_t(2) * s.kv_heads * D, vo = size_t(s.kv_heads) * D;  // halves per token; V's offset
  std::vector<Head> st(s.heads);
  std::fill(out, out + size_t(s.heads) * D, 0.f);
  for (size_t b = 0; b < n; ++b) {
    const uint16_t* K = blocks[b];
    const uint16_t* V = blocks[b] + vo;
    for (int t = 0; t < tokens[b]; ++t)
      for (int h = 0; h < s.heads; ++h) {
        const size_t off = size_t(t) * tok + size_t(h / G) * D;
        const float* qh = q + size_t(h) * D;
        __m256 acc = _mm256_setzero_ps();
        for (int d = 0; d < D; d += 8) {
          const __m256 k = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(K + off + d)));
          acc = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d), k, acc);
        }
        __m128 a = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        a = _mm_add_ps(a, _mm_movehl_ps(a, a));
        a = _mm_add_ss(a, _mm_shuffle_ps(a, a, 1));
        const float dot = _mm_cvtss_f32(a) * scale;
        Head& x = st[h];
        const float m = std::max(x.m, dot), c = std::exp(x.m - m), p = std::exp(dot - m);
        x.l = x.l * c + p;
        x.m = m;
        float* o = out + size_t(h) * D;
        const __m256 cv = _mm256_set1_ps(c), pv = _mm256_set1_ps(p);
        for (int d = 0; d < D; d += 8) {
          const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(V + off + d)));
          _mm256_storeu_ps(o + d, _mm256_fmadd_ps(pv, v, _mm256_mul_ps(_mm256_loadu_ps(o + d), cv)));
        }
      }
  }
  for (int h = 0; h < s.heads; ++h)
    for (int d = 0; d < D; ++d) out[size_t(h) * D + d] /= st[h].l > 0 ? st[h].l : 1.f;
}

}  // namespace

std::string attention_isa() { return has_f16c() ? "avx_f16c_fma" : "scalar"; }

void attend(const AttentionShape& s, const float* q, const uint16_t* const* blocks, const int* tokens, size_t n,
            float* out) {
  static const bool fast = has_f16c();
  if (fast && s.head_dim % 8 == 0) attend_f16c(s, q, blocks, tokens, n, out);
  else attend_scalar(s, q, blocks, tokens, n, out);
}

}  // namespace kvtier::host
