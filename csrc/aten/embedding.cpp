// aten embedding ops on the mytorch device -> kernels/cpu/embedding.cpp.
#include "aten/ops.h"

#include "kernels/embedding.h"

namespace mytorch {
namespace aten {

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx, bool scale_grad_by_freq,
                 bool sparse) {
  TORCH_CHECK(!sparse, "mytorch::embedding: sparse=True is not supported on the mytorch device");
  (void)padding_idx, (void)scale_grad_by_freq;  // used by the backward only
  return cpu::embedding_lookup(weight, indices);
}

Tensor embedding_dense_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights,
                                int64_t padding_idx, bool scale_grad_by_freq) {
  return cpu::embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq);
}

}  // namespace aten
}  // namespace mytorch
