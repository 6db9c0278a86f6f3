// mm, bmm, addmm, baddbmm, linear (CUDA): cuBLAS GEMM (blas.cuh) plus our own kernel for the
// beta * self term, with the checks of kernels/gemm.h. Same contract as kernels/cpu/gemm.cpp: float32,
// float64, bf16, fp16 (fp32 accumulation, one rounding); beta * self is written into
// the output first, in the output dtype, and the GEMM accumulates onto it.
#include <vector>

#include "kernels/cuda/blas.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/gemm.h"

namespace mytorch {
namespace cuda {

// Declared in common.cuh; defined here, where blas.cuh already includes the CUDA context header.
int num_sms() { return at::cuda::getCurrentDeviceProperties()->multiProcessorCount; }
size_t max_block_smem() { return at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin; }
int64_t l2_bytes() { return at::cuda::getCurrentDeviceProperties()->l2CacheSize; }

namespace {

// out[b, i, j] = beta * self[b * sb + i * sm + j * sn] (self broadcast to out's B x M x N).
template <typename T>
__global__ void scale_copy_kernel(const T* __restrict__ self, T* __restrict__ out, int64_t M,
                                  int64_t N, int64_t sb, int64_t sm, int64_t sn, int64_t total,
                                  double beta) {
  using Acc = at::opmath_type<T>;
  const Acc sc = static_cast<Acc>(beta);
  MYTORCH_GRID_LOOP(int64_t, idx, total) {
    const int64_t j = idx % N, t = idx / N, i = t % M, b = t / M;
    out[idx] = static_cast<T>(sc * static_cast<Acc>(self[b * sb + i * sm + j * sn]));
  }
}

void check_mm_args(const char* op, const at::Tensor& a, const char* an, const at::Tensor& b, const char* bn,
                   int64_t dim) {
  gemm::check_mm_args(op, a, an, b, bn, dim);
  check_cuda(op, an, a);
}

// A 2-D or 3-D operand as a cuBLAS view (copied to contiguous when its strides do not fit).
MatView mat_view(const at::Tensor& t, at::Tensor& keep) {
  keep = blas_readable(t) ? t : t.contiguous();
  const int64_t d = keep.dim();
  return {keep.data_ptr(), keep.stride(d - 2), keep.stride(d - 1), d == 3 ? keep.stride(0) : 0};
}

// out (fresh, contiguous, B x M x N or M x N) = beta * self + alpha * a @ b.
// self (if given) broadcasts to out; beta == 0 ignores its values (it is still checked).
void baddbmm_into(const char* op, const at::Tensor* self, const at::Tensor& a,
                  const at::Tensor& b, at::Tensor& out, double beta, double alpha) {
  gemm::check_self(op, self, a, out.sizes());
  const bool accumulate = self != nullptr && self->defined() && beta != 0.0;
  if (out.numel() == 0) return;
  c10::cuda::CUDAGuard guard(a.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  const bool batched = a.dim() == 3;
  const int64_t B = batched ? a.size(0) : 1, M = a.size(-2), K = a.size(-1), N = b.size(-1);
  if (accumulate) {
    // broadcast strides of self against out's (B, M, N), right-aligned
    int64_t st[3] = {0, 0, 0};
    const int64_t sd = self->dim();
    for (int64_t d = 0; d < sd; ++d)
      if (self->size(d) != 1) st[3 - sd + d] = self->stride(d);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, a.scalar_type(), "mytorch_addmm_self_cuda", [&] {
      scale_copy_kernel<scalar_t><<<blocks_for(out.numel()), kThreads, 0, stream>>>(
          self->const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), M, N, st[0], st[1],
          st[2], out.numel(), beta);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  // alpha as the GEMM sees it (float for all but float64)
  const bool alpha_zero = a.scalar_type() == at::kDouble ? alpha == 0.0 : static_cast<float>(alpha) == 0.f;
  if (K == 0 || alpha_zero) {  // out = beta * self (as the CPU kernel: a and b unread)
    if (!accumulate) zero_fill(out);
    return;
  }
  at::Tensor ka, kb;
  const MatView va = mat_view(a, ka), vb = mat_view(b, kb);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, a.scalar_type(), "mytorch_gemm_cuda", [&] {
    gemm_batched<scalar_t>(op, B, M, N, K, alpha, va, vb, accumulate ? 1.0 : 0.0,
                           out.mutable_data_ptr<scalar_t>(), N, M * N);
  });
}

}  // namespace

// out = beta * self + alpha * a @ b, a fresh contiguous tensor, with p's checks (self null: mm, bmm).
at::Tensor product(const gemm::Product& p, const at::Tensor* self, const at::Tensor& a, const at::Tensor& b,
                   double beta, double alpha) {
  check_mm_args(p.op, a, p.an, b, p.bn, p.dim);
  if (self) gemm::check_self_dim(p.op, *self, p.dim);
  at::Tensor out = aten::empty(gemm::out_shape(a, b), contiguous_options(a));
  baddbmm_into(p.op, self, a, b, out, beta, alpha);
  return out;
}

// y = x @ w^T + bias over the last dim of x; w: (out_features, in_features).
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias) {
  const char* op = "mytorch::linear";
  const gemm::Linear l = gemm::check_linear(op, x, w, bias);
  check_cuda(op, "input", x);
  at::Tensor x2 = x.reshape({l.rows, x.size(-1)});
  at::Tensor out = aten::empty({l.rows, w.size(0)}, contiguous_options(x));
  baddbmm_into(op, l.bias, x2, w.t(), out, 1.0, 1.0);
  return out.view(l.shape);
}

}  // namespace cuda
}  // namespace mytorch
