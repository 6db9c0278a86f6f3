// aten pooling ops on the mytorch device -> the OpenMP pooling kernels (kernels/cpu/pool.cpp).
// (adaptive_avg_pool2d to 1x1 reaches aten::mean, not these.)
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/pool.h"

namespace {
using namespace mytorch::cpu;

at::Tensor max_pool2d_with_indices_backward(const at::Tensor& grad, const at::Tensor& self,
                                            at::IntArrayRef, at::IntArrayRef, at::IntArrayRef,
                                            at::IntArrayRef, bool, const at::Tensor& indices) {
  return max_pool2d_backward(grad, self, indices);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_pool2d_with_indices", &max_pool2d);
  m.impl("max_pool2d_with_indices_backward", &max_pool2d_with_indices_backward);
  m.impl("avg_pool2d", &avg_pool2d);
  m.impl("avg_pool2d_backward", &avg_pool2d_backward);
  m.impl("_adaptive_avg_pool2d", &adaptive_avg_pool2d);
  m.impl("_adaptive_avg_pool2d_backward", &adaptive_avg_pool2d_backward);
}
