// Launchers shared by the norm files: norm.cu (the ops, the forward kernels), norm_backward.cu
// and norm_wide.cu (rows wider than one block holds).
#pragma once
#include <ATen/core/Tensor.h>

#include <initializer_list>

#include "kernels/cuda/common.cuh"

namespace mytorch {
namespace cuda {

// 16-byte vectors (their element count) when the rows are whole vectors and every pointer is
// aligned, else 1.
template <typename T>
int pick_vec(int64_t cols, std::initializer_list<const void*> ptrs) {
  constexpr int V = vec16<T>();
  if (cols % V != 0) return 1;
  for (auto p : ptrs)
    if (p && !aligned16(p)) return 1;
  return V;
}

// dx and the weight (and, with mean, bias) gradients of RMSNorm (RMS) or LayerNorm; mean
// (LayerNorm only) and rstd: contiguous float32 per row; db: LayerNorm only.
template <bool RMS>
void launch_norm_bwd(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor* mean,
                     const at::Tensor& rstd, at::Tensor& dx, at::Tensor& dw, at::Tensor* db, int64_t rows,
                     int64_t cols);

// The cluster kernels (norm_wide.cu). Each returns false, launching nothing, before sm_90, for
// rows that are not whole aligned 16-byte vectors or wider than 8 blocks hold, or where no
// cluster of that shape fits the device.

// y and the statistics (rstd; LayerNorm: mean too) of RMSNorm (mean null) or LayerNorm, one
// row per thread-block cluster.
bool launch_norm_fwd_cluster(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, at::Tensor& y,
                             at::Tensor* mean, at::Tensor& rstd, int64_t rows, int64_t cols, double eps);

// dx and the weight (and, with mean, bias) gradients, one row per thread-block cluster.
bool launch_norm_bwd_cluster(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor* mean,
                             const at::Tensor& rstd, at::Tensor& dx, at::Tensor& dw, at::Tensor* db, int64_t rows,
                             int64_t cols);

}  // namespace cuda
}  // namespace mytorch
