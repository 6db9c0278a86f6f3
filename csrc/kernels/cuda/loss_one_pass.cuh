// The one-pass cross-entropy launchers (loss_one_pass.cu, loss_stream.cu), shared by
// fused_cross_entropy_grad and the fused linear + cross-entropy.
#pragma once
#include <ATen/core/Tensor.h>

namespace mytorch {
namespace cuda {

// Loss per row, lse and the gradient for a loss gradient of 1 (divided by *denom when given)
// in one pass; dlogits may be the logits (written over).
void launch_ce_fwd_bwd(const at::Tensor& logits, at::Tensor& dlogits, const at::Tensor& target, at::Tensor& lse,
                       at::Tensor& loss_rows, const at::Tensor* denom, int64_t ignore_index, double smoothing);

// The same for rows of 16-byte vectors longer than 64 KB on sm_90+ (loss_stream.cu);
// false, with nothing launched, for other rows and devices.
bool launch_ce_fwd_bwd_stream(const at::Tensor& logits, at::Tensor& dlogits, const at::Tensor& target,
                              at::Tensor& lse, at::Tensor& loss_rows, const at::Tensor* denom, int64_t ignore_index,
                              double smoothing);

}  // namespace cuda
}  // namespace mytorch
