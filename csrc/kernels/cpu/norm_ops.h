// ATen-level LayerNorm / RMSNorm entry points, shared by the mytorch:: ops and the
// aten routing of the mytorch device (csrc/aten/norm.cpp).
#pragma once
#include <ATen/ATen.h>

#include <array>
#include <tuple>

namespace mytorch {
namespace cpu {

// (out, mean, rstd); mean/rstd have shape input.shape[:axis] + [1]*k and the accumulation
// dtype (float32 for bf16/fp16 inputs, the input's otherwise).
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& input,
                                                          at::IntArrayRef normalized_shape,
                                                          const c10::optional<at::Tensor>& weight,
                                                          const c10::optional<at::Tensor>& bias,
                                                          double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const c10::optional<at::Tensor>& weight);
// mask picks (grad_input, grad_weight, grad_bias); unpicked outputs are undefined.
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_masked(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const c10::optional<at::Tensor>& weight,
    const c10::optional<at::Tensor>& bias, std::array<bool, 3> mask);

// (out, rstd); rstd is float32 for bf16/fp16 input. eps=None: finfo(dtype).eps.
std::tuple<at::Tensor, at::Tensor> rms_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                            const c10::optional<at::Tensor>& weight,
                                            c10::optional<double> eps);
std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out,
                                                     const at::Tensor& input,
                                                     at::IntArrayRef normalized_shape,
                                                     const at::Tensor& rstd,
                                                     const c10::optional<at::Tensor>& weight);
std::tuple<at::Tensor, at::Tensor> rms_norm_backward_masked(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
    const at::Tensor& rstd, const c10::optional<at::Tensor>& weight, std::array<bool, 2> mask);

}  // namespace cpu
}  // namespace mytorch
