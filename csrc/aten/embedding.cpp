// aten embedding ops on the mytorch device -> kernels/cpu/embedding.cpp.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/embedding.h"

namespace {

at::Tensor embedding_aten(const at::Tensor& weight, const at::Tensor& indices, int64_t padding_idx,
                          bool scale_grad_by_freq, bool sparse) {
  TORCH_CHECK(!sparse, "mytorch::embedding: sparse=True is not supported on the mytorch device");
  (void)padding_idx, (void)scale_grad_by_freq;  // used by the backward only
  return mytorch::cpu::embedding_lookup(weight, indices);
}

at::Tensor embedding_dense_backward_aten(const at::Tensor& grad, const at::Tensor& indices,
                                         int64_t num_weights, int64_t padding_idx,
                                         bool scale_grad_by_freq) {
  return mytorch::cpu::embedding_backward(grad, indices, num_weights, padding_idx,
                                          scale_grad_by_freq);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("embedding", &embedding_aten);
  m.impl("embedding_dense_backward", &embedding_dense_backward_aten);
}
