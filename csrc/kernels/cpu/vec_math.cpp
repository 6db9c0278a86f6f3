// What is built on the vectorized float32 exp (exp256 / exp512, vec_math.h): array exp with
// sums, max, erf-GELU and sigmoid (declared in vec_math.h). The float32 entry points run the
// widest copy of this file the CPU has (kernels/cpu/isa/vec_math_*.cpp; see isa.h).
#include "kernels/cpu/vec_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/isa.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#if MYTORCH_ISA_VARIANTS && !defined(MYTORCH_ISA_VARIANT)
namespace mytorch {
namespace isa_avx2_cpu {
MYTORCH_VEC_MATH_FLOAT_DECLS
}  // namespace isa_avx2_cpu
namespace isa_avx512_cpu {
MYTORCH_VEC_MATH_FLOAT_DECLS
}  // namespace isa_avx512_cpu
}  // namespace mytorch
#endif

namespace mytorch {
namespace cpu {

namespace {

// y[i] = exp(x[i] - shift), stored when STORE; returns the sum of the exponentials (float
// accumulation). x may equal y.
template <bool STORE>
float exp_sum(const float* x, float* y, int64_t n, float shift) {
  int64_t i = 0;
  float sum = 0.f;
#if defined(__AVX512F__)
  const __m512 s = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    const __m512 v = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
    if constexpr (STORE) _mm512_storeu_ps(y + i, v);
    acc = _mm512_add_ps(acc, v);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s));
    if constexpr (STORE) _mm512_mask_storeu_ps(y + i, m, v);
    acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(m, v));
    i = n;
  }
  sum = _mm512_reduce_add_ps(acc);
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 s = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 v = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    if constexpr (STORE) _mm256_storeu_ps(y + i, v);
    acc = _mm256_add_ps(acc, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  for (float l : lanes) sum += l;
#endif
  for (; i < n; ++i) {
    const float v = std::exp(x[i] - shift);
    if constexpr (STORE) y[i] = v;
    sum += v;
  }
  return sum;
}

}  // namespace

float exp_shift_sum(const float* x, float* y, int64_t n, float shift) {
  MYTORCH_ISA_DISPATCH(exp_shift_sum, x, y, n, shift)
  return exp_sum<true>(x, y, n, shift);
}

float exp_shift_sum_only(const float* x, int64_t n, float shift) {
  MYTORCH_ISA_DISPATCH(exp_shift_sum_only, x, n, shift)
  return exp_sum<false>(x, nullptr, n, shift);
}

// max(x[0..n)); -inf for n == 0. NaN inputs may be skipped (their exp is NaN anyway).
float max_of(const float* x, int64_t n) {
  MYTORCH_ISA_DISPATCH(max_of, x, n)
  int64_t i = 0;
  float m = -INFINITY;
#if defined(__AVX512F__)
  __m512 a0 = _mm512_set1_ps(-INFINITY), a1 = a0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_max_ps(a0, _mm512_loadu_ps(x + i));
    a1 = _mm512_max_ps(a1, _mm512_loadu_ps(x + i + 16));
  }
  m = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
#elif defined(__AVX2__)
  __m256 a0 = _mm256_set1_ps(-INFINITY), a1 = a0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_max_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_max_ps(a1, _mm256_loadu_ps(x + i + 8));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(a0, a1));
  for (float l : lanes) m = l > m ? l : m;
#endif
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

double max_of(const double* x, int64_t n) {
  double m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

// The erf-GELU pieces, erfc as in elementwise.h's fast_erfc (Numerical Recipes 6.2):
// Phi(x) = 0.5 erfc(-x/sqrt2), the standard normal CDF, and its density.
constexpr float kErfcCoef[10] = {0.17087277f, -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                 -0.18628806f, 0.09678418f, 0.37409196f, 1.00002368f, -1.26551223f};
constexpr float kSqrtHalfF = 0.70710678118654752440f, kInvSqrt2PiF = 0.39894228040143267794f;

#if defined(__AVX512F__)
inline __m512 normal_cdf512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  const __m512 u = _mm512_mul_ps(x, _mm512_set1_ps(kSqrtHalfF));  // erfc(-u) = 2 - erfc(u)
  const __m512 z = _mm512_abs_ps(u);
  const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(half, z, one));
  __m512 p = _mm512_set1_ps(kErfcCoef[0]);
  for (int k = 1; k < 10; ++k) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kErfcCoef[k]));
  const __m512 e = _mm512_mul_ps(t, exp512(_mm512_fnmadd_ps(z, z, p)));  // erfc(|u|)
  const __m512 erfc_neg_u = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_GT_OQ), e,
                                                 _mm512_sub_ps(_mm512_set1_ps(2.0f), e));
  return _mm512_mul_ps(half, erfc_neg_u);
}
inline __m512 normal_pdf512(__m512 x) {
  return _mm512_mul_ps(exp512(_mm512_mul_ps(_mm512_set1_ps(-0.5f), _mm512_mul_ps(x, x))),
                       _mm512_set1_ps(kInvSqrt2PiF));
}
#elif defined(__AVX2__) && defined(__FMA__)
inline __m256 normal_cdf256(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
  const __m256 u = _mm256_mul_ps(x, _mm256_set1_ps(kSqrtHalfF));
  const __m256 z = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), u);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(half, z, one));
  __m256 p = _mm256_set1_ps(kErfcCoef[0]);
  for (int k = 1; k < 10; ++k) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kErfcCoef[k]));
  const __m256 e = _mm256_mul_ps(t, exp256(_mm256_fnmadd_ps(z, z, p)));
  const __m256 erfc_neg_u = _mm256_blendv_ps(e, _mm256_sub_ps(_mm256_set1_ps(2.0f), e),
                                             _mm256_cmp_ps(u, _mm256_setzero_ps(), _CMP_GT_OQ));
  return _mm256_mul_ps(half, erfc_neg_u);
}
inline __m256 normal_pdf256(__m256 x) {
  return _mm256_mul_ps(exp256(_mm256_mul_ps(_mm256_set1_ps(-0.5f), _mm256_mul_ps(x, x))),
                       _mm256_set1_ps(kInvSqrt2PiF));
}
#endif

// The array helpers below do whole vectors only and return how many elements they did (the
// caller finishes the tail with the scalar formula); 0 without AVX-512 or AVX2+FMA.

// o = gelu(x), erf form: x Phi(x).
int64_t gelu_erf_vec(const float* x, float* o, int64_t n) {
  MYTORCH_ISA_DISPATCH(gelu_erf_vec, x, o, n)
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i);
    _mm512_storeu_ps(o + i, _mm512_mul_ps(xv, normal_cdf512(xv)));
  }
#elif defined(__AVX2__) && defined(__FMA__)
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    _mm256_storeu_ps(o + i, _mm256_mul_ps(xv, normal_cdf256(xv)));
  }
#endif
  (void)x, (void)o, (void)n;
  return i;
}

// o = g * d/dx gelu(x), erf form: Phi(x) + x phi(x).
int64_t gelu_erf_backward_vec(const float* g, const float* x, float* o, int64_t n) {
  MYTORCH_ISA_DISPATCH(gelu_erf_backward_vec, g, x, o, n)
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i);
    const __m512 d = _mm512_fmadd_ps(xv, normal_pdf512(xv), normal_cdf512(xv));
    _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_loadu_ps(g + i), d));
  }
#elif defined(__AVX2__) && defined(__FMA__)
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    const __m256 d = _mm256_fmadd_ps(xv, normal_pdf256(xv), normal_cdf256(xv));
    _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), d));
  }
#endif
  (void)g, (void)x, (void)o, (void)n;
  return i;
}

// o = sigmoid(x): with e = exp(-|x|) <= 1, 1 / (1 + e) for x >= 0 and e / (1 + e) below, so
// exp never overflows and tiny results keep their relative precision.
int64_t sigmoid_vec(const float* x, float* o, int64_t n) {
  MYTORCH_ISA_DISPATCH(sigmoid_vec, x, o, n)
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i + 16 <= n; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(xv)));
    const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, e));
    const __mmask16 neg = _mm512_cmp_ps_mask(xv, _mm512_setzero_ps(), _CMP_LT_OQ);
    _mm512_storeu_ps(o + i, _mm512_mask_mul_ps(s, neg, e, s));
  }
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), xv)));
    const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
    const __m256 neg = _mm256_cmp_ps(xv, _mm256_setzero_ps(), _CMP_LT_OQ);
    _mm256_storeu_ps(o + i, _mm256_blendv_ps(s, _mm256_mul_ps(e, s), neg));
  }
#endif
  (void)x, (void)o, (void)n;
  return i;
}

double exp_shift_sum(const double* x, double* y, int64_t n, double shift) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - shift);
    sum += y[i];
  }
  return sum;
}

double exp_shift_sum_only(const double* x, int64_t n, double shift) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - shift);
  return sum;
}

}  // namespace cpu
}  // namespace mytorch
