// Activation kernels (OpenMP). The template op family: a pure kernel over raw
// pointers, then the ATen glue that checks and allocates, then the registration.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <cmath>

#include "checks.h"
#include "kernels/cpu/elementwise.h"

namespace mytorch {
namespace cpu {

// The gelu kernels are the strided, vectorized ones of the elementwise family
// (kernels/cpu/elementwise_unary.cpp, Un::Gelu / Un::GeluTanh, and their backward).

// ---- ATen glue: checks, layout, allocation ----
static bool parse_approximate(const char* op, c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", op,
              ": expected approximate to be 'none' or 'tanh', got '", std::string(approximate), "'");
  return approximate == "tanh";
}

at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) {
  const char* op = "mytorch::gelu";
  bool tanh_approx = parse_approximate(op, approximate);
  check_floating(op, "x", x);
  at::Tensor y = at::empty(x.sizes(), x.options());
  unary(tanh_approx ? Un::GeluTanh : Un::Gelu, x, y);
  return y;
}

at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& x, c10::string_view approximate) {
  const char* op = "mytorch::gelu_backward";
  bool tanh_approx = parse_approximate(op, approximate);
  check_floating(op, "x", x);
  check_same_dtype(op, grad, "grad", x, "x");
  check_same_device(op, grad, "grad", x, "x");
  check_same_shape(op, grad, "grad", x, "x");
  at::Tensor dx = at::empty(x.sizes(), x.options());
  binary(tanh_approx ? Bin::GeluTanhBwd : Bin::GeluBwd, grad, x, 1, dx);
  return dx;
}

}  // namespace cpu
}  // namespace mytorch

// The mytorch device keeps its tensors in host memory, so it runs the same kernels.
TORCH_LIBRARY_IMPL(mytorch, CPU, m) {
  m.impl("gelu", &mytorch::cpu::gelu);
  m.impl("gelu_backward", &mytorch::cpu::gelu_backward);
}
TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) {
  m.impl("gelu", &mytorch::cpu::gelu);
  m.impl("gelu_backward", &mytorch::cpu::gelu_backward);
}
