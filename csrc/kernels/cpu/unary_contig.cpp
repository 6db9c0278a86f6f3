// The contiguous float32 / float64 loops of the elementwise unary ops (unary_contig.h). gcc
// vectorizes the branchy float math (exp, erfc, tanh) in a function of its own, where the same
// loop inside the strided lambda stays scalar. Sigmoid in float32 takes hand-written vectors
// (vec_math.h), faster than gcc's vectorization of the formula; the scalar formula finishes the
// tail. gelu's loops are the activation family's (activation.cpp).
#include "kernels/cpu/unary_contig.h"

#include <c10/util/Exception.h>

#include <type_traits>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/unary_apply.h"
#include "kernels/cpu/vec_math.h"

#if MYTORCH_ISA_VARIANTS && !defined(MYTORCH_ISA_VARIANT)
namespace mytorch {
namespace isa_avx2_cpu {
using ::mytorch::cpu::Un;
MYTORCH_UNARY_CONTIG_DECLS
}  // namespace isa_avx2_cpu
namespace isa_avx512_cpu {
using ::mytorch::cpu::Un;
MYTORCH_UNARY_CONTIG_DECLS
}  // namespace isa_avx512_cpu
}  // namespace mytorch
#endif

namespace mytorch {
namespace cpu {
namespace {

template <Un OP, typename T>
__attribute__((noinline)) void contig(const T* a, T* o, int64_t n, T lo, T hi) {
  int64_t start = 0;
  if constexpr (std::is_same_v<T, float>) {
    if constexpr (OP == Un::Sigmoid) start = sigmoid_vec(a, o, n);
  }
#pragma omp simd
  for (int64_t i = start; i < n; ++i) o[i] = T(un_apply<OP, T>(a[i], lo, hi));
}

template <typename T>
void run(Un op, const T* a, T* o, int64_t n, T lo, T hi) {
#define MYTORCH_UN_CASE(NAME) \
  case Un::NAME: return contig<Un::NAME, T>(a, o, n, lo, hi);
  switch (op) {
    MYTORCH_UN_CASE(Neg) MYTORCH_UN_CASE(Abs) MYTORCH_UN_CASE(Exp) MYTORCH_UN_CASE(Log)
    MYTORCH_UN_CASE(Sqrt) MYTORCH_UN_CASE(Rsqrt) MYTORCH_UN_CASE(Tanh) MYTORCH_UN_CASE(Sigmoid)
    MYTORCH_UN_CASE(Relu) MYTORCH_UN_CASE(Silu) MYTORCH_UN_CASE(Reciprocal) MYTORCH_UN_CASE(Sign)
    MYTORCH_UN_CASE(Clamp) MYTORCH_UN_CASE(Square)
    case Un::LogicalNot: break;  // a bool result: not a loop of this file
    case Un::Gelu: case Un::GeluTanh: break;  // the activation family's loops (activation.cpp)
  }
#undef MYTORCH_UN_CASE
  TORCH_INTERNAL_ASSERT(false, "unary_contig: op ", static_cast<int>(op), " has no floating loop");
}

}  // namespace

void unary_contig(Un op, const float* a, float* o, int64_t n, float lo, float hi) {
  MYTORCH_ISA_DISPATCH(unary_contig, op, a, o, n, lo, hi)
  run<float>(op, a, o, n, lo, hi);
}

void unary_contig(Un op, const double* a, double* o, int64_t n, double lo, double hi) {
  MYTORCH_ISA_DISPATCH(unary_contig, op, a, o, n, lo, hi)
  run<double>(op, a, o, n, lo, hi);
}

}  // namespace cpu
}  // namespace mytorch
