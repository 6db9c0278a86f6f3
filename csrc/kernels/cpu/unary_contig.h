// The contiguous float32 / float64 loops of the elementwise unary ops (exp, tanh, sigmoid ...),
// where the vector width decides the speed: unary_contig.cpp, compiled also for AVX2 and
// AVX-512 and picked at run time (isa.h). o[i] = op(a[i]) for i < n; lo/hi: clamp bounds.
#pragma once
#include <cstdint>

#include "kernels/cpu/elementwise.h"

#define MYTORCH_UNARY_CONTIG_DECLS                                                   \
  void unary_contig(Un op, const float* a, float* o, int64_t n, float lo, float hi); \
  void unary_contig(Un op, const double* a, double* o, int64_t n, double lo, double hi);

namespace mytorch {
namespace cpu {

MYTORCH_UNARY_CONTIG_DECLS

}  // namespace cpu
}  // namespace mytorch
