// aten upsampling ops on the mytorch device -> the OpenMP kernels (kernels/cpu/upsample.cpp).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/upsample.h"

namespace {
using namespace mytorch::cpu;
using Scale = std::optional<double>;

at::Tensor nearest_backward(const at::Tensor& grad, at::IntArrayRef, at::IntArrayRef input_size,
                            Scale sh, Scale sw) {
  return upsample_nearest2d_backward(grad, input_size, sh, sw);
}
at::Tensor bilinear_backward(const at::Tensor& grad, at::IntArrayRef, at::IntArrayRef input_size,
                             bool align_corners, Scale sh, Scale sw) {
  return upsample_bilinear2d_backward(grad, input_size, align_corners, sh, sw);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_nearest2d", &upsample_nearest2d);
  m.impl("upsample_nearest2d_backward", &nearest_backward);
  m.impl("upsample_bilinear2d", &upsample_bilinear2d);
  m.impl("upsample_bilinear2d_backward", &bilinear_backward);
}
