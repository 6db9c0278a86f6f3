// 2-D pooling on the CPU: max (with indices), average, adaptive average.
// Inputs are (N, C, H, W) or (C, H, W); outputs are contiguous with the same rank.
#pragma once
#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace mytorch {
namespace cpu {

// stride empty means stride = kernel_size (as ATen).
std::tuple<at::Tensor, at::Tensor> max_pool2d(const at::Tensor& x, at::IntArrayRef kernel_size,
                                              at::IntArrayRef stride, at::IntArrayRef padding,
                                              at::IntArrayRef dilation, bool ceil_mode);
at::Tensor max_pool2d_backward(const at::Tensor& grad, const at::Tensor& x,
                               const at::Tensor& indices);

at::Tensor avg_pool2d(const at::Tensor& x, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override);
at::Tensor avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& x,
                               at::IntArrayRef kernel_size, at::IntArrayRef stride,
                               at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                               std::optional<int64_t> divisor_override);

at::Tensor adaptive_avg_pool2d(const at::Tensor& x, at::IntArrayRef output_size);
at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& x);

}  // namespace cpu
}  // namespace mytorch
