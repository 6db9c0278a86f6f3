// Batch normalization on the CPU over (N, C, *) inputs, per channel C.
#pragma once
#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <tuple>

namespace mytorch {
namespace cpu {

using OptTensor = std::optional<at::Tensor>;

// (out, save_mean, save_invstd). Training normalizes with the batch statistics and,
// when momentum is given and running stats are defined, updates them in place
// (unbiased variance). Eval normalizes with the running stats; save_* are empty.
std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_forward(
    const char* op, const at::Tensor& x, const OptTensor& weight, const OptTensor& bias,
    const OptTensor& running_mean, const OptTensor& running_var, bool training,
    std::optional<double> momentum, double eps);

// (grad_x, grad_weight, grad_bias), as masked.
std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_impl(
    const char* op, const at::Tensor& grad, const at::Tensor& x, const OptTensor& weight,
    const OptTensor& running_mean, const OptTensor& running_var, const OptTensor& save_mean,
    const OptTensor& save_invstd, bool training, double eps, std::array<bool, 3> mask);

}  // namespace cpu
}  // namespace mytorch
