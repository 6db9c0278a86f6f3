// Vectorized float32 exp: the one polynomial of the CPU kernels (below, inline, for kernels
// with their own vector loops: vec_math.cpp, attention.cpp), and over arrays, for softmax,
// log-softmax and losses, and the erf-GELU and sigmoid built on it (kernels/cpu/vec_math.cpp).
// Each array call does a whole row or run, so the float32 ones can pick the AVX2 / AVX-512
// code at run time (isa.h) for the price of a call.
#ifndef MYTORCH_KERNELS_CPU_VEC_MATH_H
#define MYTORCH_KERNELS_CPU_VEC_MATH_H
#include <cstdint>

// The float32 entry points, also declared in each ISA variant's namespace.
#define MYTORCH_VEC_MATH_FLOAT_DECLS                                                    \
  /* y[i] = exp(x[i] - shift); returns the sum of y (float accumulation). x may equal y. */ \
  float exp_shift_sum(const float* x, float* y, int64_t n, float shift);              \
  /* Same sum, without storing the exponentials. */                                   \
  float exp_shift_sum_only(const float* x, int64_t n, float shift);                   \
  /* max(x[0..n)); -inf for n == 0. NaN inputs may be skipped. */                     \
  float max_of(const float* x, int64_t n);                                            \
  /* o = gelu(x), erf form; these three do whole vectors only and return how many  */ \
  /* elements they did (the caller finishes the tail with the scalar formula).     */ \
  int64_t gelu_erf_vec(const float* x, float* o, int64_t n);                          \
  /* o = g * d/dx gelu(x), erf form. */                                               \
  int64_t gelu_erf_backward_vec(const float* g, const float* x, float* o, int64_t n); \
  /* o = sigmoid(x). */                                                               \
  int64_t sigmoid_vec(const float* x, float* o, int64_t n);

namespace mytorch {
namespace cpu {

MYTORCH_VEC_MATH_FLOAT_DECLS

// float64: plain loops.
double max_of(const double* x, int64_t n);
double exp_shift_sum(const double* x, double* y, int64_t n, double shift);
double exp_shift_sum_only(const double* x, int64_t n, double shift);

}  // namespace cpu
}  // namespace mytorch

#endif  // MYTORCH_KERNELS_CPU_VEC_MATH_H

// ---- the vector exp: exp256 (AVX2 + FMA), exp512 (AVX-512) ----
// x = n*ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r (~1 ulp), then a scale by 2^n;
// x is clamped to [-104, 88.73] first, where the scale saturates as exp does: +inf above
// ln(FLT_MAX), denormals below ln(FLT_MIN), 0 below ln of half the smallest denormal; NaN stays
// NaN. This part is read again where an ISA copy includes the header after its target pragma
// (isa.h): the functions exist for the ISAs the including source compiles for, in its namespace
// (mytorch::cpu, or the copy's), and have internal linkage, so no copy leaks to another ISA.
#if (defined(__AVX512F__) && !defined(MYTORCH_VEC_EXP512)) || \
    (defined(__AVX2__) && defined(__FMA__) && !defined(MYTORCH_VEC_EXP256))
#include <immintrin.h>
namespace mytorch {
namespace cpu {
namespace vec_exp {
constexpr float kLo = -104.0f, kHi = 88.73f, kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace vec_exp
}  // namespace cpu
}  // namespace mytorch
#endif

#if defined(__AVX512F__) && !defined(MYTORCH_VEC_EXP512)
#define MYTORCH_VEC_EXP512
namespace mytorch {
namespace cpu {
static inline __m512 exp512(__m512 x) {
  using namespace vec_exp;
  x = _mm512_max_ps(_mm512_set1_ps(kLo), _mm512_min_ps(_mm512_set1_ps(kHi), x));  // NaN passes through
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP[0]);
  for (int k = 1; k < 6; ++k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP[k]));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);  // p * 2^n, rounded once: inf, denormals and 0 as exp
}
}  // namespace cpu
}  // namespace mytorch
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(MYTORCH_VEC_EXP256)
#define MYTORCH_VEC_EXP256
namespace mytorch {
namespace cpu {
static inline __m256 exp256(__m256 x) {
  using namespace vec_exp;
  x = _mm256_max_ps(_mm256_set1_ps(kLo), _mm256_min_ps(_mm256_set1_ps(kHi), x));  // NaN passes through
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP[0]);
  for (int k = 1; k < 6; ++k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP[k]));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n in two factors 2^(n/2) (n in [-150, 128]: both normal), so the last product rounds once
  // into the denormals or overflows to inf, as exp
  const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
}  // namespace cpu
}  // namespace mytorch
#endif
