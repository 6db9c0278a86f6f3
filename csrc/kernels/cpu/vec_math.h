// Vectorized float32 exp over arrays, for softmax, log-softmax and losses, and the erf-GELU
// and sigmoid built on it (kernels/cpu/vec_math.cpp). Each call does a whole row or run, so
// the float32 ones can pick the AVX2 / AVX-512 code at run time (isa.h) for the price of a
// call.
#pragma once
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
