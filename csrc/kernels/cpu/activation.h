// The activation family's entry points that other files call (kernels/cpu/activation.cpp): the
// aten ops of the mytorch device (csrc/aten/activation.cpp) and the elementwise glue, which runs
// the gelu loops for aten::gelu and aten::gelu_backward.
#pragma once
#include <ATen/ATen.h>

#include "kernels/cpu/elementwise.h"

namespace mytorch {
namespace cpu {

// y = gelu(x) over an iteration with operands (y, x) of one floating dtype, any strides;
// tanh_approx: the tanh approximation.
void gelu_loop(const Strided& it, at::ScalarType dtype, bool tanh_approx);
// dx = grad * gelu'(x) over an iteration with operands (dx, grad, x).
void gelu_backward_loop(const Strided& it, at::ScalarType dtype, bool tanh_approx);

// Piecewise-linear activations of MobileNetV3: hardswish and hardsigmoid.
enum class HardAct { kSwish, kSigmoid };

// out may alias x (in-place use); both contiguous with x's dtype and numel.
void hardact_into(HardAct act, const at::Tensor& x, const at::Tensor& out);
at::Tensor hardswish(const at::Tensor& x);
at::Tensor hardsigmoid(const at::Tensor& x);
at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& x);
at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& x);

}  // namespace cpu
}  // namespace mytorch
