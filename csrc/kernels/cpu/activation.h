// Piecewise-linear activations of MobileNetV3: hardswish and hardsigmoid.
#pragma once
#include <ATen/ATen.h>

namespace mytorch {
namespace cpu {

enum class HardAct { kSwish, kSigmoid };

// out may alias x (in-place use); both contiguous with x's dtype and numel.
void hardact_into(HardAct act, const at::Tensor& x, const at::Tensor& out);
at::Tensor hardswish(const at::Tensor& x);
at::Tensor hardsigmoid(const at::Tensor& x);
at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& x);
at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& x);

}  // namespace cpu
}  // namespace mytorch
