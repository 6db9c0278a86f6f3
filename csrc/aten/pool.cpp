// aten pooling ops on the mytorch device -> the OpenMP pooling kernels (kernels/cpu/pool.cpp).
// (adaptive_avg_pool2d to 1x1 reaches aten::mean, not these.) The kernels other than
// max_pool2d_with_indices_backward take ATen's arguments as they are (aten/register.cpp).
#include "aten/ops.h"

#include "kernels/pool.h"

namespace mytorch {
namespace aten {

Tensor max_pool2d_with_indices_backward(const Tensor& grad, const Tensor& self, at::IntArrayRef, at::IntArrayRef,
                                        at::IntArrayRef, at::IntArrayRef, bool, const Tensor& indices) {
  return cpu::max_pool2d_backward(grad, self, indices);
}

}  // namespace aten
}  // namespace mytorch
