// mm, bmm, addmm, baddbmm, linear (CUDA): cuBLAS GEMM (blas.cuh) plus our own
// kernel for the beta * self term. Same contract as kernels/cpu/gemm.cpp: float32,
// float64, bf16, fp16 (fp32 accumulation, one rounding); beta * self is written into
// the output first, in the output dtype, and the GEMM accumulates onto it.
#include <vector>

#include "kernels/cuda/blas.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/vision.cuh"

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

void check_mm_args(const char* op, const at::Tensor& a, const char* an, const at::Tensor& b,
                   const char* bn, int64_t dim) {
  check_floating(op, an, a);
  check_same_dtype(op, a, an, b, bn);
  check_same_device(op, a, an, b, bn);
  check_dim(op, an, a, dim);
  check_dim(op, bn, b, dim);
  if (dim == 3)
    TORCH_CHECK(a.size(0) == b.size(0), op, ": expected ", an, " and ", bn,
                " to have the same batch size, got ", a.size(0), " and ", b.size(0));
  TORCH_CHECK(a.size(dim - 1) == b.size(dim - 2), op, ": ", an, " and ", bn,
              " shapes cannot be multiplied (", shape_str(a.sizes()), " and ", shape_str(b.sizes()), ")");
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
  if (self != nullptr && self->defined()) {
    check_same_dtype(op, *self, "self", a, a.dim() == 2 ? "mat1" : "batch1");
    check_same_device(op, *self, "self", a, a.dim() == 2 ? "mat1" : "batch1");
    TORCH_CHECK(expandable_to(self->sizes(), out.sizes()), op, ": self of shape ",
                shape_str(self->sizes()), " cannot broadcast to the output shape ", shape_str(out.sizes()));
  }
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

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  const char* op = "mytorch::mm";
  check_mm_args(op, a, "self", b, "mat2", 2);
  at::Tensor out = aten::empty({a.size(0), b.size(1)}, contiguous_options(a));
  baddbmm_into(op, nullptr, a, b, out, 0.0, 1.0);
  return out;
}

at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) {
  const char* op = "mytorch::bmm";
  check_mm_args(op, a, "self", b, "mat2", 3);
  at::Tensor out = aten::empty({a.size(0), a.size(1), b.size(2)}, contiguous_options(a));
  baddbmm_into(op, nullptr, a, b, out, 0.0, 1.0);
  return out;
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  const char* op = "mytorch::addmm";
  check_mm_args(op, a, "mat1", b, "mat2", 2);
  TORCH_CHECK(self.dim() <= 2, op, ": expected self to be at most 2-D, got ", self.dim(), "-D");
  at::Tensor out = aten::empty({a.size(0), b.size(1)}, contiguous_options(a));
  baddbmm_into(op, &self, a, b, out, beta.toDouble(), alpha.toDouble());
  return out;
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  const char* op = "mytorch::baddbmm";
  check_mm_args(op, a, "batch1", b, "batch2", 3);
  TORCH_CHECK(self.dim() <= 3, op, ": expected self to be at most 3-D, got ", self.dim(), "-D");
  at::Tensor out = aten::empty({a.size(0), a.size(1), b.size(2)}, contiguous_options(a));
  baddbmm_into(op, &self, a, b, out, beta.toDouble(), alpha.toDouble());
  return out;
}

// y = x @ w^T + bias over the last dim of x; w: (out_features, in_features).
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias) {
  const char* op = "mytorch::linear";
  check_floating(op, "input", x);
  check_same_dtype(op, x, "input", w, "weight");
  check_same_device(op, x, "input", w, "weight");
  check_dim(op, "weight", w, 2);
  TORCH_CHECK(x.dim() >= 1, op, ": expected input to have at least 1 dim, got a 0-D tensor");
  TORCH_CHECK(x.size(-1) == w.size(1), op, ": expected input's last dim to equal in_features=",
              w.size(1), ", got input of shape ", shape_str(x.sizes()));
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias) {
    check_same_dtype(op, *bias, "bias", w, "weight");
    check_same_device(op, *bias, "bias", w, "weight");
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == w.size(0), op,
                ": expected bias of shape [", w.size(0), "], got ", shape_str(bias->sizes()));
  }
  check_cuda(op, "input", x);
  // rows from the leading dims, not -1: reshape cannot infer -1 when in_features is 0
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  at::Tensor x2 = x.reshape({rows, x.size(-1)});
  at::Tensor out = aten::empty({rows, w.size(0)}, contiguous_options(x));
  baddbmm_into(op, has_bias ? &*bias : nullptr, x2, w.t(), out, 1.0, 1.0);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 1);
  shape.push_back(w.size(0));
  return out.view(shape);
}

}  // namespace cuda
}  // namespace mytorch
