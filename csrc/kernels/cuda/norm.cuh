// The norm kernels for rows wider than one block holds (norm_wide.cu), called by norm.cu's
// launchers. Each returns false, launching nothing, before sm_90, for rows that are not whole
// aligned 16-byte vectors or wider than 8 blocks hold, or where no cluster of that shape fits
// the device.
#pragma once
#include <ATen/core/Tensor.h>

namespace mytorch {
namespace cuda {

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
