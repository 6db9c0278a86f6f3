// ATen-level embedding entry points, shared by the mytorch:: ops and the aten routing
// of the mytorch device (csrc/aten/embedding.cpp).
#pragma once
#include <ATen/ATen.h>

namespace mytorch {
namespace cpu {

// out = weight[indices]; shape indices.shape + [embedding_dim].
at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices, int64_t padding_idx);
// Dense (num_weights, D) gradient; the padding_idx row stays zero.
at::Tensor embedding_backward(const at::Tensor& grad, const at::Tensor& indices,
                              int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq);

}  // namespace cpu
}  // namespace mytorch
