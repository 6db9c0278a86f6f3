// The activation family: gelu, hardswish / hardsigmoid, bias + GELU and SwiGLU, forward and
// backward. The checks both backends share, so that they raise the same errors, the op list
// and the entry points of each (kernels/cpu/activation.cpp; kernels/cuda/activation.cu,
// activation_hard.cu). Each backend passes its dtype check (check_floating on the CPU,
// check_cuda_float on CUDA) as `check_float`. Host code only.
#pragma once
#include <c10/util/string_view.h>

#include <string>
#include <tuple>

#include "checks.h"

namespace mytorch {
namespace activation {

// The approximate= argument of the GELU ops: true for 'tanh', false for 'none'.
inline bool parse_approximate(const char* op, c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", op,
              ": expected approximate to be 'none' or 'tanh', got '", std::string(approximate), "'");
  return approximate == "tanh";
}

// A backward's grad: x's dtype, device and shape.
inline void check_grad_like(const char* op, const at::Tensor& grad, const at::Tensor& x, const char* x_name) {
  check_same_dtype(op, grad, "grad", x, x_name);
  check_same_device(op, grad, "grad", x, x_name);
  check_same_shape(op, grad, "grad", x, x_name);
}

// x (..., C) and bias (C) of one floating dtype and device.
template <typename CheckFloat>
void check_bias_gelu(const char* op, const at::Tensor& x, const at::Tensor& bias, CheckFloat check_float) {
  check_float(op, "x", x);
  check_same_dtype(op, x, "x", bias, "bias");
  check_same_device(op, x, "x", bias, "bias");
  TORCH_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(-1), op,
              ": expected bias of shape [x.size(-1)], got x ", x.sizes(), " and bias ", bias.sizes());
}

// a and b of one floating dtype, device and shape.
template <typename CheckFloat>
void check_swiglu(const char* op, const at::Tensor& a, const at::Tensor& b, CheckFloat check_float) {
  check_float(op, "a", a);
  check_same_dtype(op, a, "a", b, "b");
  check_same_device(op, a, "a", b, "b");
  check_same_shape(op, a, "a", b, "b");
}

}  // namespace activation

// ---- entry points ----
// The registered ops, X(name), each backend's defined in its files and registered from this
// list (cpu/register.cpp, cuda/register.cpp).
#define MYTORCH_ACTIVATION_OPS(X)                                                                        \
  X(gelu) X(gelu_backward) X(hardswish) X(hardswish_backward) X(hardsigmoid) X(hardsigmoid_backward) \
  X(bias_gelu) X(bias_gelu_backward) X(swiglu) X(swiglu_backward)

#define MYTORCH_ACTIVATION_DECLS                                                                        \
  at::Tensor gelu(const at::Tensor& x, c10::string_view approximate);                                  \
  at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& x, c10::string_view approximate); \
  at::Tensor hardswish(const at::Tensor& x);                                                            \
  at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& x);                          \
  at::Tensor hardsigmoid(const at::Tensor& x);                                                          \
  at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& x);                        \
  at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias, c10::string_view approximate);     \
  std::tuple<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& grad, const at::Tensor& x,   \
                                                        const at::Tensor& bias,                         \
                                                        c10::string_view approximate);                  \
  at::Tensor swiglu(const at::Tensor& a, const at::Tensor& b);                                         \
  std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& grad, const at::Tensor& a,      \
                                                     const at::Tensor& b);

namespace cpu {
MYTORCH_ACTIVATION_DECLS
}  // namespace cpu
namespace cuda {
MYTORCH_ACTIVATION_DECLS
}  // namespace cuda

#undef MYTORCH_ACTIVATION_DECLS

}  // namespace mytorch
