// aten upsampling ops on the mytorch device -> the OpenMP kernels (kernels/cpu/upsample.cpp).
// The forwards take ATen's arguments as they are (aten/register.cpp); the backwards drop
// output_size, which grad's shape gives.
#include "aten/ops.h"

#include "kernels/upsample.h"

namespace mytorch {
namespace aten {

Tensor upsample_nearest2d_backward(const Tensor& grad, at::IntArrayRef, at::IntArrayRef input_size,
                                   std::optional<double> scale_h, std::optional<double> scale_w) {
  return cpu::upsample_nearest2d_backward(grad, input_size, scale_h, scale_w);
}
Tensor upsample_bilinear2d_backward(const Tensor& grad, at::IntArrayRef, at::IntArrayRef input_size,
                                    bool align_corners, std::optional<double> scale_h,
                                    std::optional<double> scale_w) {
  return cpu::upsample_bilinear2d_backward(grad, input_size, align_corners, scale_h, scale_w);
}

}  // namespace aten
}  // namespace mytorch
