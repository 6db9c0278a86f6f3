// The embedding family: embedding (out = weight[indices], shape indices.shape + [D]) and
// embedding_backward (a dense (num_weights, D) gradient; the padding_idx row stays zero). The
// checks and shape math both backends share, and the entry points of each
// (kernels/cpu/embedding.cpp, kernels/cuda/embedding.cu). Host code only.
#pragma once
#include <vector>

#include "checks.h"

namespace mytorch {
namespace embedding {

// padding_idx in [-V, V) for a 2-D weight of V embeddings, as torch.nn.functional.embedding.
inline void check_padding_idx(const char* op, const at::Tensor& weight, int64_t padding_idx) {
  check_dim(op, "weight", weight, 2);
  const int64_t V = weight.size(0);
  TORCH_CHECK(padding_idx >= -V && padding_idx < V, op, ": expected padding_idx in [", -V, ", ", V, ") for ", V,
              " embeddings, got ", padding_idx);
}

inline void check_indices_dtype(const char* op, const at::Tensor& indices) {
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt, op,
              ": expected indices to have dtype int64 or int32, got ", indices.scalar_type());
}

// indices.shape + [D]
inline std::vector<int64_t> out_shape(const at::Tensor& indices, int64_t D) {
  std::vector<int64_t> shape(indices.sizes().begin(), indices.sizes().end());
  shape.push_back(D);
  return shape;
}

inline void check_backward(const char* op, const at::Tensor& grad, const at::Tensor& indices, int64_t num_weights) {
  check_floating(op, "grad", grad);
  check_same_device(op, grad, "grad", indices, "indices");
  TORCH_CHECK(grad.dim() == indices.dim() + 1 && grad.sizes().slice(0, indices.dim()).equals(indices.sizes()), op,
              ": expected grad of shape indices.shape + [embedding_dim] = ", shape_str(indices.sizes()),
              " + [D], got ", shape_str(grad.sizes()));
  TORCH_CHECK(num_weights >= 0, op, ": expected num_weights >= 0, got ", num_weights);
}

}  // namespace embedding

// ---- entry points: the registered ops (cpu/register.cpp, cuda/register.cpp) ----
#define MYTORCH_EMBEDDING_OPS                                                                          \
  at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices, int64_t padding_idx);     \
  at::Tensor embedding_backward(const at::Tensor& grad, const at::Tensor& indices, int64_t num_weights, \
                                int64_t padding_idx, bool scale_grad_by_freq);

namespace cpu {
MYTORCH_EMBEDDING_OPS
// The lookup without the padding_idx check (the forward does not read padding_idx), for
// aten::embedding on the mytorch device (csrc/aten/embedding.cpp), which takes it unchecked.
at::Tensor embedding_lookup(const at::Tensor& weight, const at::Tensor& indices);
}  // namespace cpu
namespace cuda {
MYTORCH_EMBEDDING_OPS
}  // namespace cuda

#undef MYTORCH_EMBEDDING_OPS

}  // namespace mytorch
