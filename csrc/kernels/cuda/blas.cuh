// cuBLAS GEMM on row-major matrix views, for the GEMM and convolution kernels (CUDA).
//
//   C[b] (m x n) = alpha * A[b] (m x k) @ B[b] (k x n) + beta * C[b],   b < batch
//
// Element (i, j) of matrix b of a view lives at p[b * bs + i * rs + j * cs]. A and B
// may be row-major (cs == 1) or column-major (rs == 1); C is row-major. cuBLAS is
// column-major, so the call computes C^T = B^T @ A^T. float32 runs in full fp32 math
// (TF32 only where torch.backends.cuda.matmul.allow_tf32 allows it), float64 in fp64,
// bf16/fp16 accumulate in fp32 and round once into C.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/Exceptions.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

namespace mytorch {
namespace cuda {

// A (possibly batched) matrix view; strides in elements.
struct MatView {
  const void* p;
  int64_t rs, cs, bs;
};

// How cuBLAS reads a rows x cols view: row-major or column-major with leading dim ld.
struct BlasOperand {
  bool ok, row_major;
  int64_t ld;
};

inline BlasOperand blas_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cs == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(1, cols) : rs;
    if (ld >= std::max<int64_t>(1, cols)) return {true, true, ld};
  }
  if (rs == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(1, rows) : cs;
    if (ld >= std::max<int64_t>(1, rows)) return {true, false, ld};
  }
  return {false, false, 0};
}

// Whether a 2-D or 3-D tensor's trailing two dims can go to cuBLAS without a copy.
inline bool blas_readable(const at::Tensor& t) {
  const int64_t d = t.dim();
  const BlasOperand l = blas_operand(t.size(d - 2), t.size(d - 1), t.stride(d - 2), t.stride(d - 1));
  return l.ok && l.ld <= INT_MAX;
}

template <typename T>
struct BlasType;
template <>
struct BlasType<float> {
  using Scalar = float;
  static constexpr cudaDataType_t data = CUDA_R_32F;
};
template <>
struct BlasType<double> {
  using Scalar = double;
  static constexpr cudaDataType_t data = CUDA_R_64F;
};
template <>
struct BlasType<c10::Half> {
  using Scalar = float;
  static constexpr cudaDataType_t data = CUDA_R_16F;
};
template <>
struct BlasType<c10::BFloat16> {
  using Scalar = float;
  static constexpr cudaDataType_t data = CUDA_R_16BF;
};

// Sets the handle's math mode and host pointer mode for one call, restoring both after.
class BlasModeGuard {
 public:
  BlasModeGuard(cublasHandle_t h, cublasMath_t math) : h_(h) {
    TORCH_CUDABLAS_CHECK(cublasGetMathMode(h_, &math_));
    TORCH_CUDABLAS_CHECK(cublasGetPointerMode(h_, &ptr_));
    TORCH_CUDABLAS_CHECK(cublasSetMathMode(h_, math));
    TORCH_CUDABLAS_CHECK(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_HOST));
  }
  ~BlasModeGuard() {  // no throwing from a destructor: a failure here only leaves the mode set
    cublasSetMathMode(h_, math_);
    cublasSetPointerMode(h_, ptr_);
  }
  BlasModeGuard(const BlasModeGuard&) = delete;
  BlasModeGuard& operator=(const BlasModeGuard&) = delete;

 private:
  cublasHandle_t h_;
  cublasMath_t math_;
  cublasPointerMode_t ptr_;
};

// C[b] = alpha * A[b] @ B[b] + beta * C[b] on the current stream. Needs m, n, k, batch >= 1
// and A, B readable by cuBLAS (blas_operand(...).ok); C row-major with leading dim ldc
// and batch stride sbc. `op` names the calling op in errors.
template <typename T>
void gemm_batched(const char* op, int64_t batch, int64_t m, int64_t n, int64_t k, double alpha,
                  const MatView& a, const MatView& b, double beta, T* c, int64_t ldc,
                  int64_t sbc) {
  using S = typename BlasType<T>::Scalar;
  const BlasOperand la = blas_operand(m, k, a.rs, a.cs), lb = blas_operand(k, n, b.rs, b.cs);
  TORCH_INTERNAL_ASSERT(la.ok && lb.ok, op, ": operand layout not readable by cuBLAS");
  TORCH_INTERNAL_ASSERT(m >= 1 && n >= 1 && k >= 1 && batch >= 1 && ldc >= n);
  TORCH_CHECK(std::max({m, n, k, ldc, la.ld, lb.ld}) <= INT_MAX, op, ": matrix sizes (m=", m,
              ", n=", n, ", k=", k, ") or leading dims exceed what cuBLAS takes (2^31 - 1)");
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
  TORCH_CUDABLAS_CHECK(cublasSetStream(handle, at::cuda::getCurrentCUDAStream()));
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  if (std::is_same<T, double>::value) {
    compute = CUBLAS_COMPUTE_64F;
  } else if (std::is_same<T, float>::value) {
    if (at::globalContext().allowTF32CuBLAS()) {
      compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      math = CUBLAS_TF32_TENSOR_OP_MATH;
    }
  } else {  // bf16 / fp16: fp32 accumulation throughout, no reduced-precision reductions
    math = static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                     CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  }
  BlasModeGuard mode(handle, math);
  const S al = static_cast<S>(alpha), be = static_cast<S>(beta);
  constexpr cudaDataType_t dt = BlasType<T>::data;
  // column-major view: C^T (n x m) = op(B^T) (n x k) @ op(A^T) (k x m)
  const cublasOperation_t opb = lb.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t opa = la.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const int in = static_cast<int>(n), im = static_cast<int>(m), ik = static_cast<int>(k);
  for (int64_t b0 = 0; b0 < batch; b0 += INT_MAX) {
    const int nb = static_cast<int>(std::min<int64_t>(INT_MAX, batch - b0));
    const T* ap = static_cast<const T*>(a.p) + b0 * a.bs;
    const T* bp = static_cast<const T*>(b.p) + b0 * b.bs;
    T* cp = c + b0 * sbc;
    if (nb == 1) {
      TORCH_CUDABLAS_CHECK(cublasGemmEx(handle, opb, opa, in, im, ik, &al, bp, dt,
                                        static_cast<int>(lb.ld), ap, dt, static_cast<int>(la.ld),
                                        &be, cp, dt, static_cast<int>(ldc), compute,
                                        CUBLAS_GEMM_DEFAULT));
    } else {
      TORCH_CUDABLAS_CHECK(cublasGemmStridedBatchedEx(
          handle, opb, opa, in, im, ik, &al, bp, dt, static_cast<int>(lb.ld), b.bs, ap, dt,
          static_cast<int>(la.ld), a.bs, &be, cp, dt, static_cast<int>(ldc), sbc, nb, compute,
          CUBLAS_GEMM_DEFAULT));
    }
  }
}

}  // namespace cuda
}  // namespace mytorch
