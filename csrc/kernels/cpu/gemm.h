// Raw-pointer GEMM entry points for other CPU kernels (conv via im2col, attention).
//
//   C = alpha * A @ B + beta * C,   A: m x k, B: k x n, C: m x n
//
// Each matrix is given by a pointer and two element strides: element (i, j) of X
// lives at X[i * rs + j * cs]. Row-major, column-major (transposed) and sliced
// views all work without a copy; the kernel packs panels internally.
// beta == 0 means C is write-only (NaN/Inf already in C do not propagate).
// Called from inside an OpenMP parallel region, the GEMM runs on the calling
// thread only; otherwise it uses the OpenMP thread pool.
#pragma once
#include <cstdint>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace mytorch {
namespace cpu {

void sgemm(int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t rsa, int64_t csa,
           const float* b, int64_t rsb, int64_t csb,
           float beta, float* c, int64_t rsc, int64_t csc);

void dgemm(int64_t m, int64_t n, int64_t k, double alpha,
           const double* a, int64_t rsa, int64_t csa,
           const double* b, int64_t rsb, int64_t csb,
           double beta, double* c, int64_t rsc, int64_t csc);

// Low-precision inputs, float32 accumulation, float32 C.
void gemm_bf16_f32(int64_t m, int64_t n, int64_t k, float alpha,
                   const c10::BFloat16* a, int64_t rsa, int64_t csa,
                   const c10::BFloat16* b, int64_t rsb, int64_t csb,
                   float beta, float* c, int64_t rsc, int64_t csc);
void gemm_f16_f32(int64_t m, int64_t n, int64_t k, float alpha,
                  const c10::Half* a, int64_t rsa, int64_t csa,
                  const c10::Half* b, int64_t rsb, int64_t csb,
                  float beta, float* c, int64_t rsc, int64_t csc);

// Which micro-kernel this build uses, e.g. "avx512 12x32 fp32, 12x16 fp64".
const char* gemm_kernel_name();

}  // namespace cpu
}  // namespace mytorch
