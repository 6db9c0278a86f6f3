// ATen-level dropout entry points, shared by the mytorch:: ops and the aten routing of
// the mytorch device (csrc/aten/dropout.cpp).
#pragma once
#include <ATen/ATen.h>

#include <tuple>

namespace mytorch {
namespace cpu {

// (out, mask): mask is bool; out = input * mask / (1 - p). train=false: (copy, all-true mask).
std::tuple<at::Tensor, at::Tensor> dropout(const at::Tensor& input, double p, bool train,
                                           const c10::optional<at::Generator>& generator);
at::Tensor dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale);

}  // namespace cpu
}  // namespace mytorch
