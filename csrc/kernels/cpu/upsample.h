// 2-D upsampling on the CPU: nearest and bilinear, (N, C, H, W) inputs.
// Source positions follow ATen's rules (scales, align_corners) exactly.
#pragma once
#include <ATen/ATen.h>

#include <optional>

namespace mytorch {
namespace cpu {

at::Tensor upsample_nearest2d(const at::Tensor& x, at::IntArrayRef output_size,
                              std::optional<double> scale_h, std::optional<double> scale_w);
at::Tensor upsample_nearest2d_backward(const at::Tensor& grad, at::IntArrayRef input_size,
                                       std::optional<double> scale_h,
                                       std::optional<double> scale_w);
at::Tensor upsample_bilinear2d(const at::Tensor& x, at::IntArrayRef output_size,
                               bool align_corners, std::optional<double> scale_h,
                               std::optional<double> scale_w);
at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad, at::IntArrayRef input_size,
                                        bool align_corners, std::optional<double> scale_h,
                                        std::optional<double> scale_w);

}  // namespace cpu
}  // namespace mytorch
