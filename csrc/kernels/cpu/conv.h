// 2-D convolution on the CPU (im2col + GEMM; a direct kernel for depthwise).
// The ATen-level entries below check their inputs and allocate on the input's
// device; csrc/aten/conv.cpp routes aten::convolution_overrideable to them.
#pragma once
#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <tuple>

namespace mytorch {
namespace cpu {

// input (N, C, H, W), weight (O, C/groups, kH, kW), bias (O) or none -> (N, O, OH, OW).
at::Tensor conv2d(const at::Tensor& input, const at::Tensor& weight,
                  const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                  at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups);

// (grad_input, grad_weight, grad_bias); an output whose mask entry is false is undefined.
std::tuple<at::Tensor, at::Tensor, at::Tensor> conv2d_backward(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
    std::array<bool, 3> output_mask);

// input (N, C, L), weight (O, C/groups, K): the 2-D path with a height of 1.
at::Tensor conv1d(const at::Tensor& input, const at::Tensor& weight,
                  const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                  at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups);
std::tuple<at::Tensor, at::Tensor, at::Tensor> conv1d_backward(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
    std::array<bool, 3> output_mask);

}  // namespace cpu
}  // namespace mytorch
